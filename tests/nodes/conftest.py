"""Fixtures for the node tests: a service over the reference store and a settable clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, open_store


class Clock:
    """A settable clock."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> Iterator[MemoryService]:
    """A service over each cheap backend: the reference store and the SQLite file."""
    store = MemoryStore() if request.param == "memory" else open_store(f"sqlite:///{tmp_path}/n.db")
    yield MemoryService(store, clock=clock)
    store.close()


@pytest.fixture
def ctx() -> ExecutionContext:
    return ExecutionContext(
        workflow_id="wf-1",
        pipeline_id="pl-1",
        execution_id="ex-1",
        node_id="node-1",
        session_id="sess-1",
        user_id="alice",
    )
