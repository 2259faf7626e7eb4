"""Store work runs off the event loop in a bounded number of threads.

Every route does its blocking store work in one call to ``StorePool.run``. The
bound (``store_concurrency``, default 8) makes requests beyond it wait their turn
in the event loop, first come first served, instead of piling up as threads that
contend for the GIL and for the database's write lock: under 32 concurrent
clients that contention costs throughput and, above all, tail latency.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from flowmem.errors import ConfigurationError

T = TypeVar("T")
DEFAULT_STORE_CONCURRENCY = 8


class StorePool:
    """Run blocking callables in worker threads, at most ``size`` at a time per event loop."""

    def __init__(self, size: int = DEFAULT_STORE_CONCURRENCY) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigurationError(f"store_concurrency must be an integer >= 1, got {size!r}")
        self.size = size
        self._limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def _limiter(self) -> anyio.CapacityLimiter:
        loop = asyncio.get_running_loop()
        limiter = self._limiters.get(loop)
        if limiter is None:
            limiter = self._limiters[loop] = anyio.CapacityLimiter(self.size)
        return limiter

    async def run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``func(*args, **kwargs)`` in a worker thread once a slot is free."""
        return await anyio.to_thread.run_sync(
            functools.partial(func, *args, **kwargs), limiter=self._limiter()
        )
