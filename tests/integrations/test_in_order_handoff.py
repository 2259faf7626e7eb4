"""``InOrder.lean`` (decision 0170): a queue's worker handed to the loop's executor without an asyncio future.

``run_in_executor`` wraps the worker's future in one of the loop's, which no one awaits:
when the worker ends it wakes the loop a second time, after the answer already did. The
lean start gives the worker to the same executor itself. These tests count the loop's
wake-ups from other threads (``call_soon_threadsafe``) and check that the two starts run
the same calls in the same order with the same answers and errors; ``test_in_order.py``
runs every behaviour of the queue on both.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.integrations.in_order import InOrder, Queues


def _wakeups(lean: bool, calls: int, *, debug: bool = False, executor: bool = True) -> int:
    """How many times the loop is called from another thread over ``calls`` awaited calls, one after another."""
    loop = asyncio.new_event_loop()
    loop.set_debug(debug)
    plain = loop.call_soon_threadsafe
    count = 0

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        return plain(*args, **kwargs)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    if executor:
        loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
    queue = InOrder()
    queue.lean = lean

    async def scenario() -> list[int]:
        answers = [await queue.run(lambda i=i: i) for i in range(calls)]
        await loop.shutdown_default_executor()  # every worker ended: every wake-up made
        return answers

    try:
        assert loop.run_until_complete(scenario()) == list(range(calls))
    finally:
        loop.close()
    return count - 1  # the shutdown's own (its thread answers the loop)


def test_the_lean_start_wakes_the_loop_once_per_call_the_plain_one_twice() -> None:
    """Before decision 0170 (the plain start, always) a call woke the loop twice."""
    assert _wakeups(lean=True, calls=20) == 20
    assert _wakeups(lean=False, calls=20) == 40


@pytest.mark.parametrize(("debug", "executor"), [(True, True), (False, False)])
def test_the_lean_start_leaves_a_debug_loop_and_a_loop_with_no_executor_yet_to_run_in_executor(
    debug: bool, executor: bool
) -> None:
    """A loop in debug mode checks each callback; one with no executor yet has it made there."""
    lean = _wakeups(lean=True, calls=5, debug=debug, executor=executor)
    if debug:
        assert lean == 10
    else:
        assert lean == 6  # the first call made the executor, the four after it started lean


def test_the_lean_start_runs_in_the_loops_own_executor() -> None:
    """The worker is one of the executor's threads (``set_default_executor``), as with ``run_in_executor``."""

    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="the-loops-own")
        )
        queue = InOrder()
        await queue.run(lambda: None)
        return str(await queue.run(lambda: threading.current_thread().name))

    assert asyncio.run(scenario()).startswith("the-loops-own")


CALLS = st.lists(
    st.tuples(
        st.booleans(), st.integers(min_value=0, max_value=3)
    ),  # (fails, the key it is queued on)
    min_size=1,
    max_size=12,
)


def _outcomes(
    lean: bool, calls: list[tuple[bool, int]], together: bool
) -> tuple[list[Any], dict[int, list[int]]]:
    """Each call's answer or error, and the order each key's calls ran in, the calls made at once or in turn."""
    ran: dict[int, list[int]] = {}
    lock = threading.Lock()

    def call(index: int, fails: bool, key: int) -> int:
        with lock:
            ran.setdefault(key, []).append(index)
        if fails:
            raise ValueError(f"call {index} refused")
        return index * 10

    async def one(queues: Queues, index: int, fails: bool, key: int) -> Any:
        try:
            return await queues.of(key).write(f"call {index}", call, index, fails, key)
        except ValueError as exc:
            return str(exc)

    async def scenario() -> list[Any]:
        queues = Queues()
        held = [queues.of(key) for key in range(4)]
        for queue in held:
            queue.lean = lean
        if together:
            answers = list(await asyncio.gather(*(one(queues, i, *c) for i, c in enumerate(calls))))
        else:
            answers = [await one(queues, i, *c) for i, c in enumerate(calls)]
        assert not any(queue.busy for queue in held)
        return answers

    return asyncio.run(scenario()), ran


@settings(max_examples=40, deadline=None)
@given(calls=CALLS, together=st.booleans())
def test_the_lean_and_plain_starts_give_the_same_answers_errors_and_order(
    calls: list[tuple[bool, int]], together: bool
) -> None:
    lean = _outcomes(True, calls, together)
    assert lean == _outcomes(False, calls, together)
    answers, ran = lean
    assert answers == [
        f"call {i} refused" if fails else i * 10 for i, (fails, _) in enumerate(calls)
    ]
    for key, order in ran.items():  # each key's calls in the order they were made
        assert order == [i for i, (_, k) in enumerate(calls) if k == key]


def test_a_queued_call_runs_before_its_answer_is_awaited_and_answers_as_write() -> None:
    """``InOrder.queued`` (decision 0170): the caller works while the call runs, then awaits it."""
    started = threading.Event()

    def call(value: int) -> int:
        started.set()
        if value < 0:
            raise ValueError("refused")
        return value * 2

    async def scenario() -> tuple[bool, int, str]:
        queue = InOrder()
        answer = queue.queued("a write", call, 4)
        ran_meanwhile = started.wait(10)  # no await yet: the worker ran the call
        doubled = await answer
        try:
            await queue.queued("a refused write", call, -1)
        except ValueError as exc:
            return ran_meanwhile, doubled, str(exc)
        return ran_meanwhile, doubled, ""

    assert asyncio.run(scenario()) == (True, 8, "refused")
