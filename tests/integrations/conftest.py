"""``backend_service``: a ``MemoryService`` over each store backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.service import MemoryService
from tests.store.conftest import BACKENDS, open_backend


@pytest.fixture(params=BACKENDS)
def backend_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryService]:
    """A service over a fresh store of each backend kind."""
    store = open_backend(request.param, request, tmp_path)
    try:
        yield MemoryService(store)
    finally:
        store.close()
