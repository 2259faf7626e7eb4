"""Issue 27 §2, concurrency: two runners appending to one session from two processes.

Two processes (``tests.integrations.adk.writers``) run ADK turns on the same session at
the same moment, round after round; each turn calls a tool, and the first attempts of
a round are made to overlap (one runner's question is stored while the other waits for
its tool). A runner that finds the session moved on is refused with
``StaleSessionError`` and runs its turn again.
Afterwards the stored history never has a call and its answer apart (each call is
answered by the very next event: its real answer, or the healed placeholder a later
user message put there, MEM-3), and every event a runner was told was stored is
stored, once; nothing else is.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Iterator
from multiprocessing import get_context
from typing import Any

import pytest

pytest.importorskip("google.adk")

from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.adk.events import HEALED_PREFIX
from tests.integrations import forkserver
from tests.integrations.adk.scripted import APP
from tests.integrations.adk.writers import Signals, writer

PROCESSES = get_context("forkserver")
PRELOAD = [
    "tests.integrations.adk.writers",
    "flowmem.integrations.adk.service",
    "flowmem.store.sqlite",
    "flowmem.store.postgres",
]
ROUNDS = 4
DEADLINE = 120.0
WRITERS = ("left", "right")
SESSION = "shared-chat"


@pytest.fixture(scope="module", autouse=True)
def _forkserver() -> Iterator[None]:
    forkserver.context(PRELOAD)  # kept for the process's next tests that fork (decision 0185)
    yield


def race(url: str) -> list[tuple[int, str, str, list[str]]]:
    """Run both writers for ``ROUNDS`` rounds; every attempt's report."""
    forkserver.context(PRELOAD)  # the module's server (a kill test may have started its own since)
    barrier = PROCESSES.Barrier(len(WRITERS))
    results = PROCESSES.Queue()
    rounds = [Signals(PROCESSES.Event(), PROCESSES.Event()) for _ in range(ROUNDS)]
    processes = [
        PROCESSES.Process(target=writer, args=(url, SESSION, name, rounds, barrier, results), daemon=True)
        for name in WRITERS
    ]
    for process in processes:
        process.start()
    deadline = time.monotonic() + DEADLINE
    reports: list[tuple[int, str, str, list[str]]] = []
    finished = 0
    try:
        while finished < ROUNDS * len(WRITERS):
            try:
                report = results.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                pytest.fail(f"the writers did not finish {ROUNDS} rounds in {DEADLINE} s: {reports}")
            assert report[0] >= 0, f"writer {report[1]} failed outside a turn: {report}"
            reports.append(report)
            finished += report[2] == "ok"
    finally:
        for process in processes:
            process.join(max(deadline - time.monotonic(), 1.0))
            if process.is_alive():
                process.kill()
                process.join(5)
    assert [p.exitcode for p in processes] == [0, 0]
    return reports


@pytest.mark.slow
def test_mem_12_two_runners_in_two_processes_never_split_a_call_from_its_answer_nor_lose_an_event(
    flowmem_url: str,
) -> None:
    async def seed() -> None:
        async with FlowmemSessionService(flowmem_url) as service:
            await service.create_session(app_name=APP, user_id="alice", session_id=SESSION)

    asyncio.run(seed())

    reports = race(flowmem_url)

    async def read() -> Any:
        async with FlowmemSessionService(flowmem_url) as service:
            return await service.get_session(app_name=APP, user_id="alice", session_id=SESSION)

    events = asyncio.run(read()).events
    acknowledged = [eid for *_, ids in reports for eid in ids if eid != "stale"]
    stored = [e.id for e in events]
    assert len(stored) == len(set(stored))
    assert sorted(e for e in stored if not e.startswith(HEALED_PREFIX)) == sorted(acknowledged)
    for index, event in enumerate(events):
        calls = {c.id for c in event.get_function_calls()}
        if not calls:
            continue
        assert index + 1 < len(events), f"call {calls} is the last event"
        following = events[index + 1]
        assert {r.id for r in following.get_function_responses()} == calls, (index, stored)
    assert sum(r[2] == "stale" for r in reports) > 0, "the runners never overlapped"
    healed = [e for e in stored if e.startswith(HEALED_PREFIX)]
    assert healed, "no turn was refused between its call and its answer"
    # every completed turn is in the history: its question, the call, the answer, the reply
    for round_ in range(ROUNDS):
        for name in WRITERS:
            texts = [
                p.text
                for e in events
                for p in (e.content.parts if e.content else [])
                if p.text
            ]
            assert f"{name} asks, round {round_}" in texts
            assert f"{name} done {round_}" in texts
