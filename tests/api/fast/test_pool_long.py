"""Long reads (issue 38 §2): in threads, at most ``StorePool.long_reads`` at once (one fewer than the threads)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from flowmem.api.fast.pool import LONG_READS, StorePool


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
