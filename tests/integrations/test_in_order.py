"""``InOrder`` under ``InThread``: a synchronous memory's calls in worker threads, one at a time, in order.

A worker thread cannot be stopped: a caller cancelled while its call runs (a tripped
guardrail, a timeout around the run) leaves the call going. The calls made after it
must not overtake it, or a session's next message is stored before the model turn that
came first. ``Gate`` is the seam: its append of ``"first"`` holds until the test lets it
go, and it records when each append starts and ends. Every test runs on both ways a queue
starts its worker (``InOrder.lean``, decision 0170): the same behaviour is asked of each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from flowmem.integrations import InThread, in_order
from flowmem.integrations.in_order import InOrder, Queues
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore

CONTEXT = ExecutionContext(user_id="alice")
OVERTAKE_SECONDS = 0.5
"""How long a test gives a later call to start while the first one is held (it must not)."""


@pytest.fixture(autouse=True, params=[True, False], ids=["lean", "plain"])
def handoff(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each test on the lean start of a queue's worker and on the plain one (``InOrder.lean``)."""
    monkeypatch.setattr(InOrder, "lean", request.param)
    return bool(request.param)


class Gate(MemoryService):
    """A ``MemoryService`` whose append of ``"first"`` waits for ``release``; every append logged."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.events: list[tuple[str, str]] = []
        self.first_entered = threading.Event()
        self.other_started = threading.Event()
        self.release = threading.Event()

    def append(self, scope: str, key: str, messages: Any, *args: Any, **kwargs: Any) -> Any:
        """Log the append's start and end; hold ``"first"`` until released."""
        content = messages[0]["content"]
        self.events.append(("start", content))
        if content == "first":
            self.first_entered.set()
            self.release.wait(30)
        else:
            self.other_started.set()
        if content == "boom":
            self.events.append(("end", content))
            raise ValueError("boom")
        try:
            return super().append(scope, key, messages, *args, **kwargs)
        finally:
            self.events.append(("end", content))


def _append(memory: InThread, content: str) -> Any:
    return memory.append("user", "chat", [{"role": "user", "content": content}], CONTEXT)


async def cancel_once_held(write: Coroutine[Any, Any, Any], gate: Gate) -> None:
    """Start ``write`` (the gate's first append), and cancel its caller once its thread holds it."""
    first = asyncio.create_task(write)
    await asyncio.to_thread(gate.first_entered.wait, 30)
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first


async def release_when_overtaken_or_after_a_while(gate: Gate) -> None:
    """Let the held append go once another call started, or after ``OVERTAKE_SECONDS``."""
    await asyncio.to_thread(gate.other_started.wait, OVERTAKE_SECONDS)
    gate.release.set()


def _stored(gate: Gate) -> list[str]:
    return [m["content"] for m in gate.load("user", "chat", CONTEXT).messages]


def test_a_call_whose_caller_was_cancelled_ends_before_the_next_call_starts() -> None:
    gate = Gate()
    memory = InThread(gate)

    async def scenario() -> None:
        await cancel_once_held(_append(memory, "first"), gate)
        second = asyncio.create_task(_append(memory, "second"))
        await release_when_overtaken_or_after_a_while(gate)
        await second

    asyncio.run(scenario())
    assert gate.events == [
        ("start", "first"),
        ("end", "first"),
        ("start", "second"),
        ("end", "second"),
    ]
    assert _stored(gate) == ["first", "second"]  # the cancelled caller's call went through, first


def test_a_call_cancelled_before_its_turn_never_runs_and_holds_up_nothing() -> None:
    gate = Gate()
    memory = InThread(gate)

    async def scenario() -> None:
        await cancel_once_held(_append(memory, "first"), gate)
        waiting = asyncio.create_task(_append(memory, "dropped"))
        await asyncio.sleep(0)  # its call is queued behind the first
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        third = asyncio.create_task(_append(memory, "third"))
        await release_when_overtaken_or_after_a_while(gate)
        await third

    asyncio.run(scenario())
    assert gate.events == [
        ("start", "first"),
        ("end", "first"),
        ("start", "third"),
        ("end", "third"),
    ]
    assert _stored(gate) == ["first", "third"]


def test_a_failed_call_raises_to_its_caller_and_the_next_call_runs() -> None:
    gate = Gate()
    memory = InThread(gate)
    gate.release.set()

    async def scenario() -> Any:
        with pytest.raises(ValueError, match="boom"):
            await _append(memory, "boom")
        return await _append(memory, "after")

    assert asyncio.run(scenario()).appended == 1
    assert _stored(gate) == ["after"]


def test_calls_made_from_two_event_loops_in_turn_each_answer() -> None:
    """``Runner.run_sync`` makes a loop per run: one memory serves them one after another."""
    gate = Gate()
    memory = InThread(gate)
    gate.release.set()
    asyncio.run(_append(memory, "one"))
    asyncio.run(_append(memory, "two"))
    assert _stored(gate) == ["one", "two"]


def test_a_call_on_a_loop_whose_threads_are_shut_down_raises_instead_of_waiting() -> None:
    gate = Gate()
    memory = InThread(gate)
    gate.release.set()

    async def after_shutdown() -> Any:
        await asyncio.get_running_loop().shutdown_default_executor()
        return await _append(memory, "late")

    with pytest.raises(RuntimeError, match="shutdown"):
        asyncio.run(after_shutdown())
    asyncio.run(_append(memory, "next"))  # the next loop's call is not held up by the failed one
    assert _stored(gate) == ["next"]


@pytest.mark.timeout(60)  # before: a deadlock (the caller waits for a worker that waits for its thread)
def test_a_synchronous_call_made_while_the_queue_waits_for_a_worker_runs_the_queue_itself() -> None:
    """Every executor thread may be a synchronous caller waiting its turn: the queue's worker
    could then never start. The waiting caller runs the queue (the earlier call first)."""
    queue = InOrder()
    ran: list[str] = []
    may_call = threading.Event()

    def sync_caller() -> str:  # occupies the executor's one thread, then calls in
        may_call.wait(30)
        return str(queue.run_here(lambda: ran.append("sync") or "sync"))

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        waiting = loop.run_in_executor(None, sync_caller)
        earlier = asyncio.create_task(queue.run(lambda: ran.append("async") or "async"))
        await asyncio.sleep(0)  # queued; its worker is behind ``sync_caller`` in the executor
        assert queue.busy
        may_call.set()
        return list(await asyncio.wait_for(asyncio.gather(earlier, waiting), 10))

    assert asyncio.run(scenario()) == ["async", "sync"]
    assert ran == ["async", "sync"]
    assert not queue.busy


def test_a_synchronous_call_with_nothing_queued_runs_in_its_own_thread_at_once() -> None:
    queue = InOrder()
    assert queue.run_here(threading.get_ident) == threading.get_ident()


def test_a_write_that_fails_after_its_caller_left_is_logged_once_a_read_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = InOrder()
    entered, release = threading.Event(), threading.Event()

    def refused(what: str) -> None:
        entered.set()
        release.wait(30)
        raise ValueError(f"{what} refused")

    async def cancelled_while_running(call: Coroutine[Any, Any, Any]) -> None:
        entered.clear()
        task = asyncio.create_task(call)
        await asyncio.to_thread(entered.wait, 30)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        release.set()
        await queue.run(lambda: None)  # after it ended
        release.clear()

    async def scenario() -> None:
        await cancelled_while_running(queue.write("the write of x", refused, "x"))
        await cancelled_while_running(queue.run(refused, "a read"))

    with caplog.at_level(logging.ERROR, logger="flowmem"):
        asyncio.run(scenario())
    lost = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lost) == 1, caplog.text
    assert lost[0].startswith("the write of x: its caller was cancelled") and "ValueError: x refused" in lost[0]


def test_queues_keeps_one_queue_per_key_while_it_is_held() -> None:
    queues = Queues()
    first = queues.of("a")
    assert queues.of("a") is first and queues.of("b") is not first
    assert not queues.busy("a") and not queues.busy("never used")


def test_queues_after_waits_for_the_calls_made_before_on_its_keys_and_no_others() -> None:
    queues = Queues()
    held = threading.Event()
    ended: list[str] = []

    def hold() -> None:
        held.wait(30)
        ended.append("held")

    async def scenario() -> list[str]:
        holding = asyncio.create_task(queues.of("a").run(hold))
        await asyncio.sleep(0)  # its call is queued
        await queues.after(["b", "never used"])  # not busy: at once
        order = ["after b"]
        named, every = asyncio.create_task(queues.after(["a"])), asyncio.create_task(queues.after())
        await asyncio.wait({named, every}, timeout=OVERTAKE_SECONDS)
        order.append(f"waited {named.done()} {every.done()}")
        held.set()
        await named
        order.append(f"after a, {ended}")
        await every
        order.append(f"after all, {ended}")
        await holding
        return order

    assert asyncio.run(scenario()) == [
        "after b",
        "waited False False",
        "after a, ['held']",
        "after all, ['held']",
    ]


class SlowToSettle(Future[Any]):
    """A future whose setter keeps its thread a while after waking the waiter (a worker descheduled)."""

    def set_result(self, result: Any) -> None:
        """Set the result, then hold the setting thread."""
        super().set_result(result)
        time.sleep(0.2)

    def set_exception(self, exception: BaseException | None) -> None:
        """Set the exception, then hold the setting thread."""
        super().set_exception(exception)
        time.sleep(0.2)


@pytest.mark.parametrize("fails", [False, True])
def test_a_queue_is_idle_once_its_last_call_answered_so_the_next_read_needs_no_thread(
    monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    """A caller resumed by its call's answer finds the queue idle, however late its worker runs on.

    An adapter reads in a queue's turn while it is busy (a thread hop); a worker slow to
    mark it idle after answering made the caller's next read hop for nothing.
    """
    monkeypatch.setattr(in_order, "Future", SlowToSettle)

    def call() -> None:
        if fails:
            raise ValueError("refused by the test")

    async def scenario() -> list[bool]:
        queues = Queues()
        seen = []
        for _ in range(3):
            with contextlib.suppress(ValueError):
                await queues.of("a").write("a write", call)
            seen.append(queues.busy("a"))
        return seen

    assert asyncio.run(scenario()) == [False, False, False]


class RefusingGate(Gate):
    """A ``Gate`` whose held append of ``"first"`` fails once released (a store's refusal)."""

    def append(self, scope: str, key: str, messages: Any, *args: Any, **kwargs: Any) -> Any:
        """Hold ``"first"`` until released, then raise; append anything else."""
        if messages[0]["content"] == "first":
            self.first_entered.set()
            self.release.wait(30)
            raise ValueError("refused by the test")
        return super().append(scope, key, messages, *args, **kwargs)


def test_an_append_that_fails_after_its_caller_was_cancelled_is_logged_with_what_it_carried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = RefusingGate()
    memory = InThread(gate)

    async def scenario() -> None:
        await cancel_once_held(_append(memory, "first"), gate)
        gate.release.set()
        await _append(memory, "after")  # after the refused one ended
        await memory.load("user", "chat", CONTEXT)  # a read: never logged

    with caplog.at_level(logging.ERROR, logger="flowmem"):
        asyncio.run(scenario())
    lost = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lost) == 1, caplog.text
    assert lost[0].startswith("flowmem append of 'user' 'chat', 1 message(s)") and "ValueError" in lost[0]
    assert _stored(gate) == ["after"]
