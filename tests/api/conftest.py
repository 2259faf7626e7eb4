"""Fixtures of the API tests: the app in process over MemoryStore and SQLite (and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from flowmem.api import create_app
from flowmem.api.ratelimit import RateLimits
from flowmem.store import Store, open_store
from tests.api.helpers import Api, make_tokens
from tests.api.transport import OneHopClient
from tests.conftest import fresh_schema
from tests.migrated import migrated_sqlite_url


@contextmanager
def app_over(url: str) -> Iterator[Api]:
    """The app in process over a fresh store at ``url``, with one token per test principal."""
    store: Store = open_store(url)
    tokens = make_tokens(store)
    try:
        with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
            yield Api(client, store, tokens)
    finally:
        store.close()


@pytest.fixture(params=["memory", "sqlite"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The app in process over a fresh store, with one token per test principal."""
    url = "memory://" if request.param == "memory" else migrated_sqlite_url(tmp_path / "api.db")
    with app_over(url) as app:
        yield app


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The app over each backend: memory, SQLite and PostgreSQL (a migrated, empty schema)."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = migrated_sqlite_url(tmp_path / "api.db")  # migrated once per process
    else:
        url = request.getfixturevalue("postgres_store_url")  # migrated already
    with app_over(url) as app:
        yield app


@pytest.fixture(scope="module", params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def module_any_api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """``any_api`` shared by a module's tests: for tests that only read what a module fixture wrote once."""
    if request.param == "postgres":  # a bare schema of its own, migrated by opening the store
        with fresh_schema(request.getfixturevalue("postgres_url")) as url, app_over(url) as app:
            yield app
    else:
        url = "memory://" if request.param == "memory" else migrated_sqlite_url(tmp_path_factory.mktemp("api") / "api.db")
        with app_over(url) as app:
            yield app


@contextmanager
def memory_app(**options: Any) -> Iterator[Api]:
    """The app in process over a fresh MemoryStore (``create_app`` given ``options``)."""
    store: Store = open_store("memory://")
    tokens = make_tokens(store)
    with OneHopClient(create_app(store, **options), raise_server_exceptions=False) as client:
        yield Api(client, store, tokens)


@pytest.fixture
def memory_api() -> Iterator[Api]:
    """The app over a MemoryStore only (for the slower or backend-independent tests)."""
    with memory_app() as app:
        yield app


@pytest.fixture(scope="module")
def module_memory_api() -> Iterator[Api]:
    """``memory_api`` shared by a module's tests: for tests whose requests change nothing stored."""
    with memory_app() as app:
        yield app


@pytest.fixture(scope="module")
def module_stateless_api() -> Iterator[Api]:
    """``memory_api`` shared by a module's tests of what reads and writes nothing stored.

    ``/v1/check``, ``/v1/normalize`` and the OpenAPI document: no test sees another's
    requests there; rate limits off, since a module's requests in a row are not one caller's burst.
    """
    with memory_app(rate_limits=RateLimits.off()) as app:
        yield app
