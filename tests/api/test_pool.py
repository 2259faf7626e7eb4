"""The bounded store pool: at most ``size`` calls run at once; bad sizes refused."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from flowmem.api.pool import StorePool
from flowmem.errors import ConfigurationError


@pytest.mark.parametrize("size", [0, -1, True, 1.5, "8"])
def test_bad_size_is_refused(size: object) -> None:
    with pytest.raises(ConfigurationError):
        StorePool(size)  # type: ignore[arg-type]


def test_pool_bounds_concurrency() -> None:
    pool = StorePool(2)
    lock = threading.Lock()
    running = 0
    peak = 0

    def work(n: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return n * 2

    async def main() -> list[int]:
        return list(await asyncio.gather(*(pool.run(work, n) for n in range(8))))

    assert asyncio.run(main()) == [n * 2 for n in range(8)]
    assert peak == 2


def test_close_waits_for_started_calls_and_the_pool_restarts() -> None:
    pool = StorePool(2)
    started = threading.Event()
    finished: list[int] = []

    def slow() -> int:
        started.set()
        time.sleep(0.05)
        finished.append(1)
        return 1

    async def main() -> int:
        task = asyncio.ensure_future(pool.run(slow))
        await asyncio.to_thread(started.wait, 5)
        await asyncio.to_thread(pool.close)  # returns only once slow() has finished
        assert finished == [1]
        first = await task
        return first + await pool.run(lambda: 41)  # a later call gets new threads

    assert asyncio.run(main()) == 42
