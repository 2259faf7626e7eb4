"""Which checkpoints a ``FlowmemSaver`` knows to be stored: what the write-ahead waits for.

LangGraph's default durability (``"async"``) saves a step's checkpoint in a background
thread while the next step's tasks already run: a tool can start before the checkpoint
holding the model's call is stored, and a kill then loses the call (and, early in a
turn, the user's question). ``DurableCheckpoints`` records, per (thread, namespace,
checkpoint id), that a ``put`` stored it, that a read found it, or that its ``put``
failed; ``wait`` blocks until one of them happened to a checkpoint (decision 0097).

It also remembers, per checkpoint, the tool calls it left open and whether a task
waited for it, so that a run whose tools did not wait can be told once (``unguarded``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from flowmem.store.checkpoints.repairs import HEALED_ID_PREFIX as HEALED_ID_PREFIX  # one definition

Key = tuple[str, str, str]
"""(thread id, checkpoint namespace, checkpoint id)."""


def parent_checkpoint(conf: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (namespace, checkpoint id) a LangGraph task started from, from its configurable.

    A task's namespace is its parent's, then ``|`` (nested graphs), then ``node:task``;
    LangGraph's checkpoint map names each enclosing namespace's checkpoint. None outside
    a task (no map).
    """
    mapping = conf.get("checkpoint_map")
    if not isinstance(mapping, Mapping) or not mapping:
        return None
    task_ns = str(conf.get("checkpoint_ns", ""))
    ns = task_ns.rsplit("|", 1)[0] if "|" in task_ns else ""
    if ns in mapping:
        return ns, str(mapping[ns])
    ns, checkpoint_id = list(mapping.items())[-1]
    return str(ns), str(checkpoint_id)


def open_calls(messages: Sequence[Any]) -> frozenset[str]:
    """The call ids the newest ``AIMessage`` declares that no later ``ToolMessage`` answers."""
    return open_after(frozenset(), messages)


def open_after(before: frozenset[str], added: Sequence[Any]) -> frozenset[str]:
    """``open_calls(prefix + added)`` from ``before``, ``open_calls(prefix)``: only ``added`` read.

    Read backwards as ``open_calls`` reads: an AI message in ``added`` decides alone;
    else the prefix's open calls less those ``added`` answers (decision 0177).
    """
    answered: set[str] = set()
    for message in reversed(added):
        calls = getattr(message, "tool_calls", None)
        if calls is not None and getattr(message, "type", None) == "ai":
            return frozenset(c["id"] for c in calls if c.get("id") and c["id"] not in answered)
        call_id = getattr(message, "tool_call_id", None)
        if call_id:
            answered.add(call_id)
    return before - answered if answered else before


def ran_tools(messages: Sequence[Any], calls: frozenset[str], healed_prefix: str) -> bool:
    """True when a ``ToolMessage`` that is not a MEM-3 placeholder answers one of ``calls``."""
    for message in reversed(messages):
        call_id = getattr(message, "tool_call_id", None)
        if call_id in calls and not str(getattr(message, "id", "") or "").startswith(healed_prefix):
            return True
        declared = getattr(message, "tool_calls", None) if message.type == "ai" else None
        if declared and calls.intersection(c.get("id") for c in declared):
            return False  # back at the turn that declared them: no tool answered
    return False


class DurableCheckpoints:
    """Checkpoints known stored, failed or waited for in this process (bounded, thread-safe)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._changed = threading.Condition()
        self._stored: OrderedDict[Key, None] = OrderedDict()
        self._failed: OrderedDict[Key, BaseException] = OrderedDict()
        self._open: OrderedDict[Key, frozenset[str]] = OrderedDict()
        self._waited: OrderedDict[Key, None] = OrderedDict()

    def _bound(self, table: OrderedDict[Key, Any], key: Key, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.capacity:
            table.popitem(last=False)

    def stored(self, key: Key, calls: frozenset[str] = frozenset()) -> None:
        """A checkpoint is in the database (written or read); ``calls``: the calls it leaves open."""
        with self._changed:
            self._bound(self._stored, key, None)
            if calls:
                self._bound(self._open, key, calls)
            self._changed.notify_all()

    def read(self, key: Key) -> None:
        """A read found a checkpoint: stored, and a run that reads it starts its tasks after."""
        with self._changed:
            self._bound(self._stored, key, None)
            self._bound(self._waited, key, None)
            self._changed.notify_all()

    def failed(self, key: Key, error: BaseException) -> None:
        """A checkpoint's ``put`` raised: it will never be stored, a waiter gets ``error``."""
        with self._changed:
            self._bound(self._failed, key, error)
            self._changed.notify_all()

    def is_stored(self, key: Key) -> bool:
        """True when this process knows the checkpoint is stored; a task waits for it (noted)."""
        with self._changed:
            self._bound(self._waited, key, None)
            return key in self._stored

    def wait(self, key: Key, timeout: float, lookup: Callable[[], bool]) -> bool:
        """Block until ``key`` is stored (True) or ``timeout`` seconds passed (False).

        Raises the error of a failed ``put`` of it. ``lookup`` (the database, once)
        answers for a checkpoint this process neither wrote nor read.
        """
        with self._changed:
            self._bound(self._waited, key, None)
            if key in self._stored:
                return True
            if key in self._failed:
                raise self._failed[key]
        if lookup():
            self.stored(key)
            return True
        with self._changed:
            done = self._changed.wait_for(
                lambda: key in self._stored or key in self._failed, timeout
            )
            if key in self._failed:
                raise self._failed[key]
            return bool(done)

    def unguarded(self, parent: Key, messages: Iterable[Sequence[Any]], healed_prefix: str) -> bool:
        """True when tools answered the calls ``parent`` left open and no task waited for ``parent``."""
        with self._changed:
            calls = self._open.get(parent)
            if not calls or parent in self._waited:
                return False
        return any(ran_tools(m, calls, healed_prefix) for m in messages)
