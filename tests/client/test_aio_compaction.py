"""The client's compaction (issue 28 §2): the two HTTP steps, and ``compact`` with a summarizer here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flowmem.errors import CompactionStaleError
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from tests.client.conftest import Server
from tests.store.archive.test_archive import history

ALICE = ExecutionContext(user_id="alice")


def test_compact_summarizes_here_and_archives_on_the_server(server: Server) -> None:
    seen: list[list[dict[str, Any]]] = []

    def summarize(rows: list[dict[str, Any]]) -> str:
        seen.append(rows)
        return f"summary of {len(rows)}"

    with server.client("alice") as client:
        client.append("user", "k", history(5), ALICE)
        before = client.load("user", "k", ALICE).messages
        done = client.compact("user", "k", ALICE, keep_tokens=150, summarize=summarize)
        assert done.compacted and done.archived == len(seen[0]) and done.tokens
        assert seen[0] == before[: done.archived]
        whole = client.load("user", "k", ALICE, include_archived=True)
        assert whole.messages[: len(whole.messages) - whole.count] == seen[0]
        again = client.compact("user", "k", ALICE, keep_tokens=150, summarize=summarize)
        assert not again.compacted and len(seen) == 1


def test_the_async_twin_awaits_its_summarizer(server: Server) -> None:
    async def summarize(rows: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0)
        return "an async summary"

    async def run() -> Any:
        async with server.async_client("alice") as client:
            await client.append("user", "k", history(5), ALICE)
            done = await client.compact("user", "k", ALICE, keep_tokens=150, summarize=summarize)
            live = await client.load("user", "k", ALICE)
            return done, live

    done, live = asyncio.run(run())
    assert done.compacted and live.messages[0]["content"] == "an async summary"


def test_a_stale_plan_raises_the_services_error(server: Server) -> None:
    with server.client("alice") as client:
        client.append("user", "k", history(5), ALICE)
        plan = client.compaction_plan("user", "k", ALICE, 150)
        assert plan.plan is not None
        assert server.store is not None
        MemoryService(server.store).compact_raw(
            "user", "alice", "k", keep_tokens=150, summarize=lambda rows: "first"
        )
        with pytest.raises(CompactionStaleError):
            client.apply_compaction("user", "k", ALICE, plan.plan, "late")


def test_a_refused_scope_sends_nothing(server: Server) -> None:
    with server.client("alice") as client:
        refused = client.compact("session", "k", None, keep_tokens=10, summarize=lambda r: "s")
        assert refused.refused == "no_context" and not refused.compacted


def test_compact_to_replaces_the_history_on_the_server_and_archives_it(server: Server) -> None:
    with server.client("alice") as client:
        client.append("user", "k", history(5), ALICE)
        before = client.load("user", "k", ALICE).messages
        done = client.compact_to("user", "k", ALICE, [{"role": "user", "content": "the gist"}])
        assert done.compacted and done.archived == len(before) and done.count == 1
        whole = client.load("user", "k", ALICE, include_archived=True)
        assert whole.messages[: len(before)] == before
        assert whole.messages[-1]["metadata"]["summary"]["archived"] == len(before)
        refused = client.compact_to("session", "k", None, [{"role": "user", "content": "x"}])
        assert refused.refused == "no_context" and not refused.compacted


def test_the_async_compact_to_is_the_same_call(server: Server) -> None:
    async def run() -> Any:
        async with server.async_client("alice") as client:
            await client.append("user", "k", history(5), ALICE)
            done = await client.compact_to("user", "k", ALICE, [{"role": "user", "content": "gist"}])
            whole = await client.load("user", "k", ALICE, include_archived=True)
            return done, whole

    done, whole = asyncio.run(run())
    assert done.compacted and whole.count == 1
    assert len(whole.messages) == done.archived + 1
