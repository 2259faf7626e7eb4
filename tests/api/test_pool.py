"""The store pool: at most ``size`` calls in threads at once, short calls on the loop, bad sizes refused."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from flowmem.api.pool import StorePool
from flowmem.errors import ConfigurationError
from flowmem.store.locks import WouldBlock, waiting_allowed


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


def test_run_short_runs_on_the_event_loop_thread_when_inline() -> None:
    pool = StorePool(2, inline=True)

    async def main() -> tuple[int, int]:
        return threading.get_ident(), await pool.run_short(threading.get_ident)

    loop_thread, call_thread = asyncio.run(main())
    assert call_thread == loop_thread
    pool.close()


def test_run_short_without_inline_runs_in_a_worker_thread() -> None:
    pool = StorePool(2, inline=False)

    async def main() -> tuple[int, int]:
        return threading.get_ident(), await pool.run_short(threading.get_ident)

    loop_thread, call_thread = asyncio.run(main())
    assert call_thread != loop_thread
    pool.close()


def test_run_short_gives_a_call_that_would_wait_to_a_thread_where_it_may_wait() -> None:
    pool = StorePool(2, inline=True)
    seen: list[tuple[bool, int]] = []

    def work() -> str:
        seen.append((waiting_allowed(), threading.get_ident()))
        if not waiting_allowed():
            raise WouldBlock("taken")
        return "done"

    async def main() -> tuple[int, str]:
        return threading.get_ident(), await pool.run_short(work)

    loop_thread, result = asyncio.run(main())
    assert result == "done"
    assert seen[0] == (False, loop_thread)  # first on the loop, refusing to wait
    assert seen[1][0] is True and seen[1][1] != loop_thread  # then in a thread
    assert waiting_allowed()  # the no-wait mode ended with the call
    pool.close()


def test_run_short_passes_other_errors_through_without_a_second_try() -> None:
    pool = StorePool(2, inline=True)
    calls: list[int] = []

    def work() -> None:
        calls.append(1)
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        asyncio.run(pool.run_short(work))
    assert calls == [1]
    pool.close()
