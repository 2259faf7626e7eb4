"""The store pool: at most ``size`` calls in threads at once, short calls on the loop, bad sizes refused."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import AbstractContextManager

import pytest

from flowmem.api.pool import (
    LOCAL_STORE_CONCURRENCY,
    NETWORK_STORE_CONCURRENCY,
    StorePool,
    default_store_concurrency,
)
from flowmem.errors import ConfigurationError
from flowmem.store import MemoryStore
from flowmem.store.base import LocalCalls
from flowmem.store.locks import WouldBlock, no_wait, waiting_allowed


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
        return list(await asyncio.gather(*(pool.in_thread(work, n) for n in range(8))))

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
        task = asyncio.ensure_future(pool.in_thread(slow))
        await asyncio.to_thread(started.wait, 5)
        await asyncio.to_thread(pool.close)  # returns only once slow() has finished
        assert finished == [1]
        first = await task
        return first + await pool.in_thread(lambda: 41)  # a later call gets new threads

    assert asyncio.run(main()) == 42


def test_short_runs_on_the_event_loop_thread_when_inline() -> None:
    pool = StorePool(2, inline=True, store=MemoryStore())

    async def main() -> tuple[int, int]:
        return threading.get_ident(), await pool._loop_first(threading.get_ident)

    loop_thread, call_thread = asyncio.run(main())
    assert call_thread == loop_thread
    pool.close()


def test_short_without_inline_runs_in_a_worker_thread() -> None:
    pool = StorePool(2, inline=False)

    async def main() -> tuple[int, int]:
        return threading.get_ident(), await pool._loop_first(threading.get_ident)

    loop_thread, call_thread = asyncio.run(main())
    assert call_thread != loop_thread
    pool.close()


def test_short_gives_a_call_that_would_wait_to_a_thread_where_it_may_wait() -> None:
    pool = StorePool(2, inline=True, store=MemoryStore())
    seen: list[tuple[bool, int]] = []

    def work() -> str:
        seen.append((waiting_allowed(), threading.get_ident()))
        if not waiting_allowed():
            raise WouldBlock("taken")
        return "done"

    async def main() -> tuple[int, str]:
        return threading.get_ident(), await pool._loop_first(work)

    loop_thread, result = asyncio.run(main())
    assert result == "done"
    assert seen[0] == (False, loop_thread)  # first on the loop, refusing to wait
    assert seen[1][0] is True and seen[1][1] != loop_thread  # then in a thread
    assert waiting_allowed()  # the no-wait mode ended with the call
    pool.close()


def test_short_passes_other_errors_through_without_a_second_try() -> None:
    pool = StorePool(2, inline=True, store=MemoryStore())
    calls: list[int] = []

    def work() -> None:
        calls.append(1)
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        asyncio.run(pool._loop_first(work))
    assert calls == [1]
    pool.close()


class NetworkStore:
    """A store stand-in without ``LocalCalls`` (like PostgreSQL): its calls are round trips."""

    url = "postgresql://stand-in"


def test_the_pool_decides_by_the_local_calls_capability() -> None:
    assert isinstance(MemoryStore(), LocalCalls) and not isinstance(NetworkStore(), LocalCalls)
    pool = StorePool(2, inline=True, store=NetworkStore())  # type: ignore[arg-type]

    async def main() -> tuple[int, int]:
        return threading.get_ident(), await pool._loop_first(threading.get_ident)

    loop_thread, call_thread = asyncio.run(main())
    assert pool.inline is False and call_thread != loop_thread
    pool.close()


def test_the_default_thread_bound_is_by_store_kind_and_a_given_size_wins() -> None:
    """Decision 0037: 8 threads for a local store, 2 for a network store (every call a thread)."""
    network = NetworkStore()
    assert (LOCAL_STORE_CONCURRENCY, NETWORK_STORE_CONCURRENCY) == (8, 2)
    assert StorePool(store=MemoryStore()).size == default_store_concurrency(MemoryStore()) == 8
    assert StorePool(store=network).size == default_store_concurrency(network) == 2  # type: ignore[arg-type]
    assert StorePool().size == 2
    assert StorePool(5, store=MemoryStore()).size == 5


class SlowSyncStore:
    """A store stand-in for ``durable``: writes are counted, ``sync`` blocks until released."""

    def __init__(self) -> None:
        self.written = 0
        self.synced = 0
        self.syncs = 0
        self.syncing = threading.Event()
        """Set once a sync has taken its ``upto`` (the writes it covers are decided)."""
        self.release = threading.Event()
        self.fail: Exception | None = None

    def write(self) -> None:
        self.written += 1

    def deferred(self) -> AbstractContextManager[None]:
        return no_wait()

    def sync_barrier(self) -> int | None:
        return self.written if self.written > self.synced else None

    def sync(self) -> int:
        upto = self.written
        self.syncs += 1
        self.syncing.set()
        self.release.wait(5)
        if self.fail is not None:
            raise self.fail
        self.synced = max(self.synced, upto)
        return upto


def test_durable_returns_at_once_when_nothing_waits_for_a_sync() -> None:
    store = SlowSyncStore()
    pool = StorePool(2, inline=True, store=store)  # type: ignore[arg-type]
    asyncio.run(pool._loop_first(lambda: None))
    assert store.syncs == 0
    pool.close()


def test_no_result_before_its_write_is_synced_and_one_sync_serves_many() -> None:
    store = SlowSyncStore()
    pool = StorePool(2, inline=True, store=store)  # type: ignore[arg-type]

    async def main() -> None:
        first = asyncio.ensure_future(pool._loop_first(store.write))
        # the first sync has taken its writes (a fixed 50 ms was not always enough under load)
        assert await asyncio.to_thread(store.syncing.wait, 30)
        assert not first.done()  # written, but not synced: no result yet
        others = [asyncio.ensure_future(pool._loop_first(store.write)) for _ in range(5)]
        for _ in range(100):  # they write on the loop, then wait for a sync
            await asyncio.sleep(0)
        assert store.written == 6 and not any(other.done() for other in others)
        store.release.set()
        await asyncio.gather(first, *others)

    asyncio.run(main())
    # the first sync covered write 1; the five made while it ran share the second
    assert store.syncs == 2
    assert store.synced == 6
    pool.close()


def test_a_cancelled_waiter_leaves_the_sync_running_for_the_others() -> None:
    store = SlowSyncStore()
    pool = StorePool(2, inline=True, store=store)  # type: ignore[arg-type]

    async def main() -> None:
        doomed = asyncio.ensure_future(pool._loop_first(store.write))
        other = asyncio.ensure_future(pool._loop_first(store.write))
        await asyncio.sleep(0.05)
        doomed.cancel()
        store.release.set()
        await other

    asyncio.run(main())
    assert store.synced == 2
    pool.close()


def test_a_failed_sync_answers_every_waiter_as_done_logs_it_and_the_next_call_syncs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/decisions/0019: the writes committed and are visible; a refusal would say not."""
    store = SlowSyncStore()
    store.fail = OSError("disk gone")
    store.release.set()
    pool = StorePool(2, inline=True, store=store)  # type: ignore[arg-type]

    async def main() -> list[object]:
        return list(
            await asyncio.gather(
                *(pool._loop_first(store.write) for _ in range(3)), return_exceptions=True
            )
        )

    with caplog.at_level(logging.ERROR, logger="flowmem"):
        results = asyncio.run(main())
    assert results == [None, None, None]
    assert any("disk gone" in r.getMessage() for r in caplog.records)
    store.fail = None
    asyncio.run(pool._loop_first(store.write))
    assert store.sync_barrier() is None
    pool.close()


def test_thread_calls_wait_for_syncs_too() -> None:
    store = SlowSyncStore()
    store.written = 1  # a write made on the loop earlier, not yet synced
    pool = StorePool(2, inline=True, store=store)  # type: ignore[arg-type]
    store.release.set()
    assert asyncio.run(pool.in_thread(lambda: "read")) == "read"
    assert store.syncs == 1 and store.sync_barrier() is None
    pool.close()
