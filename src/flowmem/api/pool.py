"""Where the app's blocking store work runs: on the event loop when it is short, else in threads.

Every route does its store work in one call: ``StorePool.short`` (a ``ShortCall``,
on the event loop first), ``StorePool.in_thread`` (any call, in a worker thread)
or ``StorePool.read`` (a lookup that answers nobody by itself: the gate's).

Threads: a bounded ``concurrent.futures.ThreadPoolExecutor`` driven through
``loop.run_in_executor`` (``store_concurrency`` threads). Requests beyond the
bound wait their turn, first come first served, in the pool's queue instead of
piling up as threads. The default depends on the store (docs/decisions/0037):
8 for a ``LocalCalls`` store, whose threads only take the calls that must wait
for a lock or run long; 2 for a network store (PostgreSQL), whose every call
takes a thread: on the measured machine more threads per worker only added GIL
hand-offs in the worker and concurrent backends in the database (server CPU per
append 0.86-1.19 ms with 2 threads, 1.40-1.42 ms with 8). A request cancelled while its call is still
queued never runs it; a call that has started always finishes.

The event loop: the pool decides by the store's capability. A store with
``LocalCalls`` (SQLite, memory: calls are local and short) gets its short calls
made directly on the loop inside ``store.deferred()``; any other store
(PostgreSQL: network round trips) runs every call in a thread. A worker thread
costs more than a local call: the thread and the event loop contend for the GIL
on every SQLite statement, which in the HTTP bench more than doubled the CPU of
an append (2.2-2.8 against 0.9-1.3 ms in process). A call that would wait for a
lock (another thread or process is writing the same file) raises ``WouldBlock``
before it changed anything and is run again in a worker thread, where it waits
as usual (bounded, MEM-12). That is safe only for a call that changes at most one
thing, as its last step: the type ``ShortCall`` (``flowmem.api.fast.route``) names
those, and ``short`` takes nothing else. ``inline=False`` (``flowmem serve
--no-inline-store``) puts every call in a thread.

Group commit: a write made inside ``store.deferred()`` is not durable when it
returns (``LocalCalls``; SQLite counts it, ``sync_barrier``). Before any call's
result is handed back, ``durable`` waits until an fsync in the pool's one sync
thread covers every write made so far (``store.sync``); writes made while that
fsync runs share the next one. So nothing is acknowledged, or shown to anyone,
before it is on disk, and the loop never waits for the disk (docs/decisions/0027).

Long reads (issue 38 §2, decision 0106): a read whose work and answer grow with
the buffer (a token window, a read with the archive, a compaction plan, a provider
format over several pages) runs through ``long``: in a thread, and at most
``LONG_READS`` of them at once (one fewer than the threads, at least one), the
others waiting their turn without a thread, so a thread is always left for the
short calls. Since decision 0113 that long part only finds what the read answers
(a window's cut, a plan's digest, whether a provider read needs repair): the rows
are then written a page at a time, so a reader holds a page (a provider read that
normalization must repair too: decision 0113). Their pages
(and the pages of a plain read after its first) are read through ``page``: in a
thread too, never on the loop, at most ``long_reads`` at once on a local store
(issue 38 §2): a
page read on the loop held it for the page's 512 rows, each row's step giving the
interpreter lock to the threads that find cuts and waiting to get it back, while
``/health`` queued behind eight readers' pages.

A failed fsync (docs/decisions/0019): the writes it covered are committed and
visible to every reader, so their requests are answered as done — a refusal would
claim that nothing changed — and the failure is logged as an ERROR. The store then
defers no write until one has synced by itself, so from there on a write the disk
does not take is refused before it changes anything.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from queue import SimpleQueue
from typing import Any, TypeVar

from flowmem.errors import ConfigurationError
from flowmem.store.base import LocalCalls, Store
from flowmem.store.locks import WouldBlock

log = logging.getLogger("flowmem")
T = TypeVar("T")
LONG_READS = 2  # long reads built at once per worker (fewer when the pool has fewer threads)
LOCAL_STORE_CONCURRENCY = 8  # SQLite, memory: threads for calls that wait for a lock or run long
NETWORK_STORE_CONCURRENCY = 2  # PostgreSQL: every call in a thread (docs/decisions/0037)


def default_store_concurrency(store: Store | None) -> int:
    """The store-thread bound a worker uses when none is given: by the store's kind."""
    return LOCAL_STORE_CONCURRENCY if isinstance(store, LocalCalls) else NETWORK_STORE_CONCURRENCY


class _SyncThread:
    """The pool's one sync thread: ``store.sync()`` on request, its result handed to the loop.

    A plain thread on a ``SimpleQueue`` rather than a one-thread executor: a sync
    is asked for about once per batch of answered writes, and an executor's future
    (with the asyncio future wrapping it) cost the event loop more than the wake-up.
    """

    def __init__(self) -> None:
        self._requests: SimpleQueue[tuple[Any, ...] | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="flowmem-sync", daemon=True)
        self._thread.start()

    def request(
        self,
        loop: asyncio.AbstractEventLoop,
        store: LocalCalls,
        done: Callable[[LocalCalls, int, BaseException | None], None],
    ) -> None:
        """Run ``store.sync()``, then ``done(store, upto, error)`` on ``loop``."""
        self._requests.put((loop, store, done))

    def _run(self) -> None:
        while (asked := self._requests.get()) is not None:
            loop, store, done = asked
            upto, error = 0, None
            try:
                upto = store.sync()
            except BaseException as exc:  # handed to the loop: answered as done (decision 0019)
                error = exc
            with suppress(RuntimeError):  # the loop closed meanwhile: nobody waits on it
                loop.call_soon_threadsafe(done, store, upto, error)

    def stop(self) -> None:
        """Finish the syncs asked for, then end the thread."""
        self._requests.put(None)
        self._thread.join()


class StorePool:
    """Run blocking store calls in worker threads (at most ``size`` at a time) or on the loop."""

    def __init__(
        self,
        size: int | None = None,
        *,
        inline: bool = False,
        store: Store | None = None,
    ) -> None:
        """``store``: the one the calls use; with ``inline``, a ``LocalCalls`` store's short calls
        run on the event loop, and ``durable`` waits for its deferred writes.

        ``size`` None: ``default_store_concurrency(store)``.
        """
        if size is None:
            size = default_store_concurrency(store)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigurationError(f"store_concurrency must be an integer >= 1, got {size!r}")
        self.size = size
        self._local = store if isinstance(store, LocalCalls) else None
        self.inline = inline and self._local is not None
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._syncer: _SyncThread | None = None
        self._syncing = False  # an fsync is running in the sync thread
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.long_reads = max(1, min(LONG_READS, size - 1))
        self._long: asyncio.Semaphore | None = None
        self._pages: asyncio.Semaphore | None = None

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.size, thread_name_prefix="flowmem-store")
            return self._executor

    def _sync_thread(self) -> _SyncThread:
        with self._lock:
            if self._syncer is None:
                self._syncer = _SyncThread()
            return self._syncer

    async def in_thread(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``func(*args, **kwargs)`` in a worker thread once one is free."""
        call = functools.partial(func, *args, **kwargs)
        result = await asyncio.get_running_loop().run_in_executor(self._pool(), call)
        await self.durable()
        return result

    async def long(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``in_thread`` for a read whose work grows with the buffer: at most ``long_reads`` at once."""
        if self._long is None:
            self._long = asyncio.Semaphore(self.long_reads)
        async with self._long:
            return await self.in_thread(func, *args, **kwargs)

    async def page(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A read-only ``func`` that reads a page of a long answer: in a thread, never on the event loop.

        For a ``LocalCalls`` store at most ``long_reads`` at once, so that its other
        threads stay free for the short calls that must wait for a lock; a network
        store's calls all take a thread already and wait their turn in the pool's
        queue (a bound of one there halved PostgreSQL's page reads). Without waiting
        for durability (``read``): a page of a paged read passes the version its first
        read saw, which waited.
        """
        call = functools.partial(func, *args, **kwargs)
        loop = asyncio.get_running_loop()
        if self._local is None:
            return await loop.run_in_executor(self._pool(), call)
        if self._pages is None:
            self._pages = asyncio.Semaphore(self.long_reads)
        async with self._pages:
            return await loop.run_in_executor(self._pool(), call)

    async def durable(self) -> None:
        """Return once every write made so far is durable (group commit; at once when it is)."""
        if self._local is None:
            return
        target = self._local.sync_barrier()
        if target is None:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, waiter))
        if not self._syncing:
            self._start_sync(self._local)
        await waiter  # a cancelled request cancels its own waiter, never the fsync

    def _start_sync(self, store: LocalCalls) -> None:
        self._syncing = True
        self._sync_thread().request(asyncio.get_running_loop(), store, self._synced)

    def _synced(self, store: LocalCalls, upto: int, error: BaseException | None) -> None:
        """Wake the waiters that fsync covered (or failed); start the next one for the rest."""
        self._syncing = False
        if error is not None:
            log.error(
                "fsync of committed writes failed (%s): those writes are visible and were "
                "answered as done, but may not survive a power loss; later writes sync "
                "with their own commit until the disk takes them again",
                error,
            )
        waiting: list[tuple[int, asyncio.Future[None]]] = []
        for target, waiter in self._waiters:
            if waiter.done():
                continue
            if error is not None or target <= upto:
                # synced; or the fsync failed: committed and visible, answered as done (0019)
                waiter.set_result(None)
            else:  # written after that fsync started: the next one covers it
                waiting.append((target, waiter))
        self._waiters = waiting
        if waiting:
            self._start_sync(store)

    async def short(self, call: Callable[[], Any]) -> Any:
        """Run a ``ShortCall`` on the event loop, deferred; in a thread if it must wait.

        On the loop its write is not durable when ``call()`` returns: the result is
        handed back only after ``durable``. Without ``inline`` this is ``in_thread``.
        """
        return await self._loop_first(call)

    async def _loop_first(self, func: Callable[[], T]) -> T:
        """Call ``func`` inside ``store.deferred()`` on the loop, else (``WouldBlock``) in a thread.

        ``func`` must change at most one thing, as its last store step, so that a
        ``WouldBlock`` means nothing was changed and the call can simply run again.
        """
        if self._local is not None and self.inline:
            try:
                with self._local.deferred():
                    result = func()
            except WouldBlock:
                pass
            else:
                await self.durable()
                return result
        return await self.in_thread(func)

    async def read(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call a read-only ``func`` like ``short``, without waiting for durability.

        For a lookup that hands nothing to a client by itself (the request gate's
        token check): the call that answers the request waits (``durable``).
        """
        if self._local is not None and self.inline:
            try:
                with self._local.deferred():
                    return func(*args, **kwargs)
            except WouldBlock:
                pass
        call = functools.partial(func, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool(), call)

    def close(self) -> None:
        """Wait for the calls already submitted, then stop the threads (a later call restarts them)."""
        with self._lock:
            executor, self._executor = self._executor, None
            syncer, self._syncer = self._syncer, None
        if executor is not None:
            executor.shutdown(wait=True)
        if syncer is not None:
            syncer.stop()
