"""The ``store`` fixture: every conformance test runs on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.store import Store, open_store
from tests.migrated import migrated_sqlite_url

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


def open_backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """Open a fresh, empty store of one kind."""
    if kind == "memory":
        return open_store("memory://")
    if kind == "sqlite":
        return open_store(migrated_sqlite_url(tmp_path / "store.db"))  # migrated once per process
    url: str = request.getfixturevalue("postgres_store_url")  # migrated already (tests/conftest.py)
    return open_store(url)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend kind."""
    opened = open_backend(request.param, request, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a fresh, empty database of each SQL backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("postgres_db_url")
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``sql_url`` for tests that only open a store: PostgreSQL's schema already migrated.

    SQLite's database is the same fresh file as ``sql_url``'s; PostgreSQL's is a pooled
    schema holding every migration and no rows (``postgres_store_url``, tests/conftest.py)
    instead of a bare one that the first open migrates. Tests of the migrations or of
    what opening a store creates keep ``sql_url``.
    """
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("postgres_store_url")
    return url


@pytest.fixture
def two(postgres_store_url: str) -> Iterator[tuple[Store, Store]]:
    """Two PostgreSQL stores on one database, as two processes (each knows only its own appends)."""
    from flowmem.store.postgres import PostgresStore

    first, second = PostgresStore(postgres_store_url), PostgresStore(postgres_store_url)
    try:
        yield first, second
    finally:
        first.close()
        second.close()
