"""The checkpoints of runs a ``FlowmemSaver`` refused because another writer moved the thread (decision 0040)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from flowmem.errors import ThreadForkedError


class RefusedCheckpoints:
    """The checkpoints of runs refused with ``ThreadForkedError`` in this process (bounded).

    LangGraph saves a run's task writes in the background, beside its checkpoints; a
    run whose checkpoint was refused keeps running until it exits. Its writes for a
    refused checkpoint are refused too, and those that landed first are deleted with
    the refusal, under the thread's stripe lock, so none is left behind.
    """

    def __init__(self, capacity: int = 4096, stripes: int = 64) -> None:
        self.capacity = capacity
        self._ids: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._locks = [threading.Lock() for _ in range(stripes)]

    def holding(self, thread_id: str) -> threading.Lock:
        """The lock a thread's writes and refusals take turns under."""
        return self._locks[hash(thread_id) % len(self._locks)]

    def add(self, thread_id: str, ns: str, checkpoint_id: str, run: object) -> None:
        """Remember a refused checkpoint and the run it belongs to (its stripe lock held)."""
        self._ids[(thread_id, ns, checkpoint_id)] = None
        if run:
            self._ids[(thread_id, str(run))] = None
        while len(self._ids) > self.capacity:
            self._ids.popitem(last=False)

    def check(self, thread_id: str, ns: str, checkpoint_id: str, run: object) -> None:
        """Raise ``ThreadForkedError`` for a write of a refused run or checkpoint (lock held)."""
        if (thread_id, ns, checkpoint_id) in self._ids or (run and (thread_id, str(run)) in self._ids):
            raise ThreadForkedError(
                f"thread {thread_id!r}: this run's checkpoint was refused (another writer moved "
                "the thread); nothing more of it is stored. Run the turn again on "
                "the thread's latest state (docs/decisions/0040)",
                thread_id=thread_id,
            )


__all__ = ["RefusedCheckpoints"]
