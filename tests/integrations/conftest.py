"""Adapter fixtures: each runs the adapter tests in process and against a real server.

``backend_service``: a ``MemoryService`` over each store backend (memory, SQLite,
PostgreSQL), and ``remote``: a ``Client`` of the session's ``flowmem serve``.
``service``: an in-process service over a ``MemoryStore`` (``local``) and the same
``remote`` client. See ``tests/integrations/backends.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.memory import Memory
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations.backends import (
    LOCAL,
    REMOTE,
    AdapterServer,
    remote_memory,
    start_adapter_server,
)
from tests.store.conftest import BACKENDS, open_backend

CLOCK = 1_700_000_000


@pytest.fixture(scope="session")
def adapter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdapterServer]:
    """One real ``flowmem serve`` on loopback (SQLite) for every remote adapter test."""
    yield from start_adapter_server(tmp_path_factory.mktemp("adapters"))


@pytest.fixture(params=[*BACKENDS, REMOTE])
def backend_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A service over a fresh store of each backend kind, and a client of a real server."""
    if request.param == REMOTE:
        yield remote_memory(request)
        return
    store = open_backend(request.param, request, tmp_path)
    try:
        yield MemoryService(store)
    finally:
        store.close()


@pytest.fixture(params=[LOCAL, REMOTE])
def service(request: pytest.FixtureRequest) -> Memory:
    """A service over a fresh ``MemoryStore`` (fixed clock), and a client of a real server."""
    if request.param == REMOTE:
        return remote_memory(request)
    return MemoryService(MemoryStore(), clock=lambda: CLOCK)
