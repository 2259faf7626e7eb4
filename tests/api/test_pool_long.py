"""Long reads (issue 38 §2): in threads, at most ``StorePool.long_reads`` at once (one fewer than the threads); their pages too on a local store."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from flowmem.api.pool import LONG_READS, StorePool


@pytest.mark.parametrize(("size", "bound"), [(8, LONG_READS), (2, 1), (1, 1)])
def test_at_most_long_reads_run_at_once_and_never_on_the_loop(size: int, bound: int) -> None:
    pool = StorePool(size)
    assert pool.long_reads == bound
    lock = threading.Lock()
    running, most, on_loop = [0], [0], []

    def read() -> None:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            pass
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    async def many() -> None:
        await asyncio.gather(*(pool.long(read) for _ in range(6)))

    try:
        asyncio.run(many())
    finally:
        pool.close()
    assert most[0] <= bound
    assert on_loop == []


def _most_at_once(pool: StorePool, calls: int) -> tuple[int, list[bool]]:
    """Run ``calls`` page reads through ``pool.page`` at once: how many ran together, and which on the loop."""
    lock = threading.Lock()
    running, most, on_loop = [0], [0], []

    def read() -> None:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            pass
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    async def many() -> None:
        await asyncio.gather(*(pool.page(read) for _ in range(calls)))

    try:
        asyncio.run(many())
    finally:
        pool.close()
    return most[0], on_loop


def test_a_local_stores_pages_are_read_in_threads_at_most_long_reads_at_once() -> None:
    from flowmem.store import MemoryStore

    pool = StorePool(8, inline=True, store=MemoryStore())  # a LocalCalls store: short calls on the loop
    most, on_loop = _most_at_once(pool, 8)
    assert on_loop == []
    assert most == pool.long_reads == LONG_READS  # six threads left for the short calls


def test_a_network_stores_pages_take_the_pool_as_any_call() -> None:
    """PostgreSQL's calls all run in its two threads: a bound of one would halve its page reads."""
    most, on_loop = _most_at_once(StorePool(2), 6)
    assert on_loop == []
    assert most == 2
