"""Adapter fixtures: each runs the adapter tests in process and against a real server.

``backend_service``: a ``MemoryService`` over each store backend (memory, SQLite,
PostgreSQL), and ``remote`` / ``remote-postgres``: a ``Client`` of the session's
``flowmem serve`` over SQLite / over PostgreSQL with two workers. ``service``: an
in-process service over a ``MemoryStore`` (``local``) and the same remote clients.
``session_memory``: every kind of ``backend_service`` and an ``AsyncClient`` of each
real server (``async-remote``, ``async-remote-postgres``), for the adapters that
await. ``flowmem_url``: a SQLite file or a fresh PostgreSQL schema, for tests whose
writers open the database themselves (other processes). See
``tests/integrations/backends.py``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.memory import AsyncMemory, Memory
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations import forkserver
from tests.integrations.backends import (
    ASYNC_REMOTES,
    LOCAL,
    REMOTES,
    SERVERS,
    AdapterServer,
    remote_memory,
    start_adapter_server,
)
from tests.migrated import migrated_sqlite_url
from tests.store.conftest import BACKENDS, open_backend

CLOCK = 1_700_000_000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def flowmem_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A flowmem database of the test: a SQLite file, or a migrated, empty PostgreSQL schema."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_store_url")  # migrated already
        return url
    return migrated_sqlite_url(tmp_path / "flowmem.db")  # migrated once per process


@pytest.fixture(scope="session")
def adapter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdapterServer]:
    """One real ``flowmem serve`` on loopback (SQLite) for every remote adapter test."""
    yield from start_adapter_server(tmp_path_factory.mktemp("adapters"))


@pytest.fixture(scope="session")
def adapter_server_postgres(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[AdapterServer]:
    """One real ``flowmem serve --workers 2`` over PostgreSQL (its own schema) for remote tests."""
    import psycopg

    schema = "adapters_remote"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    database = f"{postgres_url}?options=-csearch_path%3D{schema}"
    tmp = tmp_path_factory.mktemp("adapters-postgres")
    yield from start_adapter_server(tmp, database, "--workers", "2")


def _backend_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param in SERVERS:
        yield remote_memory(request, kind=request.param)
        return
    store = open_backend(request.param, request, tmp_path)
    try:
        yield MemoryService(store)
    finally:
        store.close()


@pytest.fixture(params=[*BACKENDS, *REMOTES])
def backend_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A service over a fresh store of each backend kind, and a client of each real server."""
    yield from _backend_memory(request, tmp_path)


@pytest.fixture(params=[*BACKENDS, *REMOTES, *ASYNC_REMOTES])
def session_memory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Memory | AsyncMemory]:
    """``backend_service``'s kinds and an ``AsyncClient`` of each real server."""
    yield from _backend_memory(request, tmp_path)


@pytest.fixture(params=[LOCAL, *REMOTES])
def service(request: pytest.FixtureRequest) -> Memory:
    """A service over a fresh ``MemoryStore`` (fixed clock), and a client of each real server."""
    if request.param in SERVERS:
        return remote_memory(request, kind=request.param)
    return MemoryService(MemoryStore(), clock=lambda: CLOCK)


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's state as the test found it, whatever the test did."""
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.fixture(scope="session", autouse=True)
def _fork_server_reaped() -> Iterator[None]:
    """The fork server the forking tests share (decision 0185), stopped and reaped when the
    session ends: its CPU and its children's then count in this process (``tests.suite_cpu``)."""
    yield
    forkserver.stop()
