"""LangGraph's own checkpointer conformance suite against ``FlowmemSaver``, on every backend.

``langgraph-checkpoint-conformance`` runs its async tests per capability; a capability
counts only when its async method is overridden. Every base capability and the three
extended ones (``copy_thread``, ``prune``, ``delete_for_runs``) must pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService
from flowmem.store import open_store


def _report(url_of: Callable[[int], str], name: str) -> object:
    made = iter(range(1_000))

    @checkpointer_test(name=name)
    async def saver() -> AsyncIterator[FlowmemSaver]:
        store = open_store(url_of(next(made)))
        yield FlowmemSaver(MemoryService(store))
        store.close()

    return asyncio.run(validate(saver))


def _assert_full(report: object) -> None:
    results = report.to_dict()["results"]  # type: ignore[attr-defined]
    failures = {name: r["failures"] for name, r in results.items() if r["passed"] is not True}
    assert report.passed_all_base(), failures  # type: ignore[attr-defined]
    assert {name for name, r in results.items() if r["passed"]} == {c.value for c in ALL_CAPABILITIES}, failures


def test_conformance_memory() -> None:
    _assert_full(_report(lambda _: "memory://", "FlowmemSaver[memory]"))


def test_conformance_sqlite(tmp_path: Path) -> None:
    _assert_full(_report(lambda n: f"sqlite:///{tmp_path}/c{n}.db", "FlowmemSaver[sqlite]"))


@pytest.mark.postgres
def test_conformance_postgres(postgres_db_url: str) -> None:
    _assert_full(_report(lambda _: postgres_db_url, "FlowmemSaver[postgres]"))
