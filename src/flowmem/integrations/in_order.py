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
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Coroutine, Hashable, Iterable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)


class _Call:
    """One queued call: its future, the call, and who must hear of its failure (``InOrder.write``)."""

    __slots__ = ("call", "done", "failed", "left", "what")

    def __init__(self, done: Future[Any], call: Callable[[], Any], what: str | None) -> None:
        self.done, self.call, self.what = done, call, what
        self.left = False  # its caller was cancelled while it ran
        self.failed = False  # it raised


class InOrder:
    """One queue of calls, run one at a time in a worker thread of the caller's loop, in order."""

    lean = True
    """The seam of the queue's start (decision 0170): True hands the worker to the loop's
    executor itself (``_submit``: the loop woken once per call, by its answer); False, the
    plain path, through ``loop.run_in_executor``, whose future wakes the loop a second time
    when the worker ends (nothing awaits it). The same calls, order and errors either way."""

    def __init__(self) -> None:
        self._queue: deque[_Call] = deque()
        self._lock = threading.Lock()
        self._draining = False
        self._drainer: int | None = None  # the thread running the queue, while one does

    @property
    def busy(self) -> bool:
        """Whether a call is queued or running: a read made now would not see what it writes."""
        return self._draining

    async def run(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Return ``func(*args, **kwargs)`` run in a worker thread once every earlier call has ended.

        As ``asyncio.to_thread`` (the caller's context variables go with it), except the
        order: cancelled while queued, the call is dropped; cancelled while running,
        it goes on and the next call waits for it.
        """
        return await self._run(None, func, args, kwargs)

    async def write(self, what: str, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``run`` for a write: if its caller is cancelled while it runs and it then fails, log it.

        The caller that would have seen the failure (a revision refusal, a store error)
        is gone, so the write's loss is logged at ERROR on this module's logger, naming
        ``what`` (the write and what it carried) and the error, once.
        """
        return await self._run(what, func, args, kwargs)

    def queued(self, what: str, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        """``write``'s call queued (and its worker started) now; the coroutine returned awaits its answer.

        For a caller with work of its own to do while the call runs (decision 0170). It
        must await that coroutine before it awaits anything else: only then is it the
        call's caller (cancelled while queued, the call is dropped; a loss logged).
        """
        return self._answer(self._queued(what, func, args, kwargs))

    async def _run(self, what: str | None, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        return await self._answer(self._queued(what, func, args, kwargs))

    def _queued(self, what: str | None, func: Callable[..., Any], args: Any, kwargs: Any) -> _Call:
        """The call queued, its queue's worker started when none runs it."""
        call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
        entry = _Call(Future(), call, what)
        with self._lock:
            self._queue.append(entry)
            start, self._draining = not self._draining, True
        if start:
            try:
                loop = asyncio.get_running_loop()
                if not (self.lean and _submit(loop, self._drain)):
                    loop.run_in_executor(None, self._drain)
            except RuntimeError as exc:  # the loop's executor is shut down: fail what waits, not hang
                self._fail_queued(exc)
        return entry

    async def _answer(self, entry: _Call) -> Any:
        """The queued call's answer, once it ran; cancelled, the call is dropped unless it runs."""
        try:
            return await asyncio.wrap_future(entry.done)  # cancelling it cancels ``done`` unless running
        except asyncio.CancelledError:
            with self._lock:
                entry.left = True
                failed = entry.failed  # it failed before the caller could hear of it
            if failed:
                _report(entry, entry.done.exception())
            raise

    def run_here(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Return ``func(*args, **kwargs)`` for a synchronous caller, after the calls made before it.

        Nothing queued or running (or called from inside a queued call): it runs here at
        once. Else it joins the queue and waits for its turn: a write whose async caller
        left while it ran is not overtaken by a synchronous call made after. When the
        queue's worker thread has not started yet (the executor's threads may all be
        callers waiting here), this thread runs the queue itself, to its end.
        """
        me = threading.get_ident()
        with self._lock:
            steal = False
            if not self._draining or self._drainer == me:
                entry = None
            else:
                call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
                entry = _Call(Future(), call, None)
                self._queue.append(entry)
                steal = self._drainer is None
                if steal:
                    self._drainer = me
        if entry is None:
            return func(*args, **kwargs)
        if steal:
            self._run_queue()
        return entry.done.result()

    def _fail_queued(self, exc: BaseException) -> None:
        """Raise ``exc`` to every queued call: no thread will run them (unless one claimed the queue)."""
        with self._lock:
            if self._drainer is not None:
                return  # a synchronous caller runs the queue (``run_here``)
            queued, self._draining = list(self._queue), False
            self._queue.clear()
        for waiting in queued:
            if waiting.done.set_running_or_notify_cancel():
                waiting.done.set_exception(exc)

    def _drain(self) -> None:
        """Run the queued calls until none is left, unless a thread runs them already (``run_here``)."""
        with self._lock:
            if self._drainer is not None:
                return  # that thread runs the queue to its end
            self._drainer = threading.get_ident()
        self._run_queue()

    def _run_queue(self) -> None:
        """Run the queued calls until none is left (one thread at a time: the one that claimed it).

        The queue is marked idle before the last call's caller is woken, so a read that
        caller makes next sees ``busy`` False and runs where it is, instead of joining a
        queue whose worker has not yet been scheduled to see it empty (a thread hop).
        """
        with self._lock:
            if not self._queue:
                self._draining, self._drainer = False, None
                return
            entry = self._queue.popleft()
        while True:
            ran = entry.done.set_running_or_notify_cancel()  # False: its caller left before it started
            failure: BaseException | None = None
            result: Any = None
            if ran:
                try:
                    result = entry.call()
                except BaseException as exc:  # the caller's to raise, whatever it is
                    failure = exc
            with self._lock:
                left = entry.left
                if failure is not None:
                    entry.failed = True
                following = self._queue.popleft() if self._queue else None
                if following is None:
                    self._draining, self._drainer = False, None
            if failure is not None:
                entry.done.set_exception(failure)
                if left:
                    _report(entry, failure)
            elif ran:
                entry.done.set_result(result)
            if following is None:
                return
            entry = following


class Queues:
    """One ``InOrder`` per key (a session, a conversation), kept while a call of it waits or runs, or one is held."""

    def __init__(self) -> None:
        self._queues: weakref.WeakValueDictionary[Hashable, InOrder] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def of(self, key: Hashable) -> InOrder:
        """The key's queue, made on first use."""
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = InOrder()
            return queue

    def busy(self, key: Hashable) -> bool:
        """Whether a call of the key is queued or running: a read made now would not see what it writes."""
        queue = self._queues.get(key)
        return queue is not None and queue.busy

    async def after(self, keys: Iterable[Hashable] | None = None) -> None:
        """Return once every call made before on any of ``keys`` (None: on any key) has ended.

        For a call that touches several keys (a LangGraph copy or prune of threads, a
        delete of runs whose threads are not known until their late writes land): it
        starts after what was made before on each; calls made after it on those keys
        are not held for it. At once when none of them is busy.
        """
        with self._lock:
            if keys is None:
                queues = [q for q in self._queues.values() if q.busy]
            else:
                queues = [q for q in (self._queues.get(k) for k in keys) if q is not None and q.busy]
        for queue in queues:
            await queue.run(_nothing)


def _submit(loop: asyncio.AbstractEventLoop, work: Callable[[], None]) -> bool:
    """Give ``work`` to the loop's default executor as ``run_in_executor`` would, without its asyncio future.

    That future, which no one awaits, would wake the loop again when ``work`` ends.
    False, leaving it to ``run_in_executor``, where the loop is not asyncio's own, runs in
    debug mode, has no executor yet (``run_in_executor`` makes it) or had it shut down
    (``run_in_executor`` raises); RuntimeError from an executor shut down otherwise.
    """
    if not isinstance(loop, asyncio.BaseEventLoop) or loop.get_debug():
        return False
    executor = getattr(loop, "_default_executor", None)
    if executor is None or getattr(loop, "_executor_shutdown_called", True) or loop.is_closed():
        return False
    executor.submit(work)
    return True


def _nothing() -> None:
    """A call that does nothing: its turn is the point (``Queues.after``)."""


def _report(entry: _Call, exc: BaseException | None) -> None:
    """Log a write whose caller left while it ran and that then failed: no one else hears of it."""
    if entry.what is None:
        return
    log.error(
        "%s: its caller was cancelled while it ran, and it then failed (%s: %s), so it was "
        "not stored and no caller was told; what it carried is lost unless the caller writes "
        "it again",
        entry.what,
        type(exc).__name__,
        exc,
    )


__all__ = ["InOrder", "Queues"]
