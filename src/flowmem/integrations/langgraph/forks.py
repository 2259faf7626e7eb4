"""The checkpoints of runs a ``FlowmemSaver`` refused because another writer moved the thread (decision 0040)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from flowmem.errors import ThreadForkedError


class Turns:
    """Shared holds (writes) beside exclusive ones (refusals): one stripe of ``RefusedCheckpoints``.

    Writes hold it together, so a checkpoint's check never waits for a task's pending
    writes being committed (decision 0160); a refusal waits until no write holds it, and
    writes that come after wait for the refusal (it goes first: none starves it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._writes = 0
        self._refusing = False
        self._waiting = 0  # refusals waiting for the writes to end

    def writing(self) -> AbstractContextManager[None]:
        """Hold the stripe beside other writes, after any refusal made or waiting."""
        return _Writing(self)

    def hold_write(self) -> None:
        """Take a write's hold (``writing``): after any refusal made or waiting."""
        with self._lock:  # the condition's own lock: ``Condition(lock)`` takes no more
            while self._refusing or self._waiting:
                self._changed.wait()
            self._writes += 1

    def release_write(self) -> None:
        """End a write's hold; the last one wakes a refusal that waits for it (only then)."""
        with self._lock:
            self._writes -= 1
            if not self._writes and self._waiting:
                self._changed.notify_all()

    @contextmanager
    def refusing(self) -> Iterator[None]:
        """Hold the stripe alone: no write holds it meanwhile."""
        with self._changed:
            self._waiting += 1
            while self._refusing or self._writes:
                self._changed.wait()
            self._waiting -= 1
            self._refusing = True
        try:
            yield
        finally:
            with self._changed:
                self._refusing = False
                self._changed.notify_all()


class _Writing:
    """``Turns.writing``'s hold: a class, not a generator (decision 0212: 4 Python calls a write, not 12).

    Writes wait only for a refusal, which wakes them itself when it ends, so the end of a
    write wakes the waiters only when a refusal waits for the writes to end.
    """

    __slots__ = ("turns",)

    def __init__(self, turns: Turns) -> None:
        self.turns = turns

    def __enter__(self) -> None:
        self.turns.hold_write()

    def __exit__(self, *exc: object) -> None:
        self.turns.release_write()


class RefusedCheckpoints:
    """The checkpoints of runs refused with ``ThreadForkedError`` in this process (bounded).

    LangGraph saves a run's task writes in the background, beside its checkpoints; a
    run whose checkpoint was refused keeps running until it exits. Its writes for a
    refused checkpoint are refused too, and those that landed first are deleted with
    the refusal, under the thread's stripe held alone (``refusing``), so none is left
    behind: a write checks and stores under the stripe held beside other writes
    (``writing``), which a refusal waits for.
    """

    def __init__(self, capacity: int = 4096, stripes: int = 64) -> None:
        self.capacity = capacity
        self._ids: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._lock = threading.Lock()  # the ids, between stripes
        self._stripes = [Turns() for _ in range(stripes)]

    def _stripe(self, thread_id: str) -> Turns:
        return self._stripes[hash(thread_id) % len(self._stripes)]

    def writing(self, thread_id: str) -> AbstractContextManager[None]:
        """Hold the thread's stripe for a write's check (and its storing): beside other writes."""
        return _Writing(self._stripes[hash(thread_id) % len(self._stripes)])

    def refusing(self, thread_id: str) -> AbstractContextManager[None]:
        """Hold the thread's stripe for a refusal: alone."""
        return self._stripe(thread_id).refusing()

    def add(self, thread_id: str, ns: str, checkpoint_id: str, run: object) -> None:
        """Remember a refused checkpoint and the run it belongs to (its stripe held by ``refusing``)."""
        with self._lock:
            self._ids[(thread_id, ns, checkpoint_id)] = None
            if run:
                self._ids[(thread_id, str(run))] = None
            while len(self._ids) > self.capacity:
                self._ids.popitem(last=False)

    def check(self, thread_id: str, ns: str, checkpoint_id: str, run: object) -> None:
        """Raise ``ThreadForkedError`` for a write of a refused run or checkpoint (stripe held by ``writing``)."""
        with self._lock:
            refused = (thread_id, ns, checkpoint_id) in self._ids or (
                bool(run) and (thread_id, str(run)) in self._ids
            )
        if refused:
            raise ThreadForkedError(
                f"thread {thread_id!r}: this run's checkpoint was refused (another writer moved "
                "the thread); nothing more of it is stored. Run the turn again on "
                "the thread's latest state (docs/decisions/0040)",
                thread_id=thread_id,
            )


__all__ = ["RefusedCheckpoints", "Turns"]
