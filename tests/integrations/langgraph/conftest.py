"""LangGraph fixtures: ``saver``, a ``FlowmemSaver`` without a context user on each backend.

A test module that needs another kind of saver (a slow one, one per process) defines
its own ``saver``, which takes precedence over this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService
from flowmem.store import open_store

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowmemSaver]:
    """A saver without a context user, on a fresh database of each backend."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/lg.db"
    else:
        url = request.getfixturevalue("postgres_store_url")  # migrated already
    store = open_store(url)
    yield FlowmemSaver(MemoryService(store))
    store.close()
