"""Calls run in worker threads one at a time, in the order they were made (decision 0152).

A worker thread cannot be stopped: ``asyncio.to_thread`` gives its caller
``CancelledError`` at once and leaves the call running. An adapter's next call, in a
thread of its own, can then overtake it: a session's next user message stored before
the model turn whose run was cancelled (a tripped guardrail, a timeout) while that turn
was being written. ``InOrder`` queues an adapter's calls: each starts after the one
made before it ended, even one whose caller left, and a call whose caller left
before it started is never made.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class InOrder:
    """One queue of calls, run one at a time in a worker thread of the caller's loop, in order."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._lock = threading.Lock()
        self._draining = False

    async def run(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Return ``func(*args, **kwargs)`` run in a worker thread once every earlier call has ended.

        As ``asyncio.to_thread`` (the caller's context variables go with it), except the
        order: cancelled while queued, the call is dropped; cancelled while running,
        it goes on and the next call waits for it.
        """
        call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
        done: Future[Any] = Future()
        with self._lock:
            self._queue.append((done, call))
            start, self._draining = not self._draining, True
        if start:
            try:
                asyncio.get_running_loop().run_in_executor(None, self._drain)
            except RuntimeError as exc:  # the loop's executor is shut down: fail what waits, not hang
                self._fail_queued(exc)
        return await asyncio.wrap_future(done)  # cancelling it cancels ``done`` unless running

    def _fail_queued(self, exc: BaseException) -> None:
        """Raise ``exc`` to every queued call: no thread will run them."""
        with self._lock:
            queued, self._draining = list(self._queue), False
            self._queue.clear()
        for waiting, _ in queued:
            if waiting.set_running_or_notify_cancel():
                waiting.set_exception(exc)

    def _drain(self) -> None:
        """Run the queued calls until none is left (one worker thread at a time)."""
        while True:
            with self._lock:
                if not self._queue:
                    self._draining = False
                    return
                done, call = self._queue.popleft()
            if not done.set_running_or_notify_cancel():
                continue  # its caller left before it started
            try:
                done.set_result(call())
            except BaseException as exc:  # the caller's to raise, whatever it is
                done.set_exception(exc)


__all__ = ["InOrder"]
