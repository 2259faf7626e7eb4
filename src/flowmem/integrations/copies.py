"""Histories an adapter validated, kept as pickled copies so a read validates only what is new (decisions 0141, 0155).

An adapter whose reads validate stored JSON texts into its framework's objects
(pydantic-ai's messages, ADK's events) validated every text on every read, though
only the last turn's were new. ``KeptCopies`` keeps, per history (keyed by its first
id), what it validated as *segments*: the ids and JSON texts a segment was validated
from, and the validated objects pickled. A read takes the longest run of leading
segments whose ids and texts are exactly the ones read now, unpickles them (a fresh
copy each time: the caller may change what it gets; pickle restores each object's
state as validation left it, about 2.7 times faster than validating), validates the
rest in one call and keeps it as a new segment. A write may add what it validated
from the very texts it stored after a kept history (``extend``). Only bytes pickled
here, in this process, are ever unpickled. Past ``MAX_SEGMENTS`` the segments are
merged into one. At most ``max_bytes`` (texts and pickles) are kept, the least
recently read histories going first; a history larger than that is not kept.
"""

from __future__ import annotations

import gc
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")

MAX_BYTES = 32 * 1024 * 1024
"""How many bytes of kept texts and pickles a store holds at most, by default."""
MAX_SEGMENTS = 8
"""How many segments a history keeps before they are merged into one."""


@dataclass(frozen=True)
class _Segment:
    """Objects validated from these ids' JSON texts, pickled."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    blob: bytes
    size: int
    """Its texts' characters and its pickle's bytes."""


def _pickled(ids: Sequence[str], texts: Sequence[str], objects: list[Any]) -> _Segment | None:
    try:
        blob = pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an object pickle cannot copy: validated on every read, as before
        return None
    return _Segment(tuple(ids), tuple(texts), blob, len(blob) + sum(len(text) for text in texts))


def unpickled(blob: bytes) -> list[Any]:
    """``pickle.loads(blob)`` with the garbage collector paused while it runs.

    A copy of 1,000 ADK events makes some 30,000 container objects: with the collector
    on, their allocations started about forty young-generation passes and, every few
    reads, a full pass over the whole process's heap (80-100 ms of a 20 ms read,
    measured). Paused, the new objects are looked at once, by the first pass after.
    The objects and the collector's state after are the same (tests/integrations/test_copies.py).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return cast("list[Any]", pickle.loads(blob))
    finally:
        if enabled:
            gc.enable()


def _unchanged(objects: list[T]) -> list[T]:
    return objects


class KeptCopies(Generic[T]):
    """The histories validated here, per first id, as pickled segments (at most ``max_bytes``).

    ``validate``: the objects of JSON texts, in order, as one call validates them;
    ``finish``: applied to every list a read hands out (what one validation would have
    shared between objects, shared again across segments).
    """

    def __init__(
        self,
        validate: Callable[[Sequence[str]], list[T]],
        finish: Callable[[list[T]], list[T]] = _unchanged,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.validate = validate
        self.finish = finish
        self.max_bytes = max_bytes
        self._lines: OrderedDict[str, list[_Segment]] = OrderedDict()
        self._tails: dict[str, str] = {}  # the last id of each history kept, to its key
        self._bytes = 0
        self._lock = threading.Lock()  # reads of PostgreSQL run in worker threads

    def objects(self, chosen: Sequence[tuple[str, str]]) -> list[T]:
        """The objects of ``chosen`` (id and JSON text, oldest first), as ``validate`` gives them."""
        if not chosen:
            return []
        key = chosen[0][0]
        segments = self._take(key)
        ids = [entry_id for entry_id, _ in chosen]
        texts = [text for _, text in chosen]
        found: list[T] = []
        kept: list[_Segment] = []
        for segment in segments:
            end = len(found) + len(segment.ids)
            if segment.ids != tuple(ids[len(found) : end]) or segment.texts != tuple(
                texts[len(found) : end]
            ):
                break
            found.extend(unpickled(segment.blob))
            kept.append(segment)
        start = len(found)
        if start < len(chosen):
            new = self.validate(texts[start:])
            made = _pickled(ids[start:], texts[start:], new)
            found.extend(new)
            if made is None:
                return self.finish(found)
            kept.append(made)
        if len(kept) > MAX_SEGMENTS:
            merged = _pickled(ids, texts, found)
            kept = [] if merged is None else [merged]
        self._keep(key, kept)
        return self.finish(found)

    def extend(self, parent: str | None, written: Sequence[tuple[str, str, T | None]]) -> None:
        """Keep objects a write stored after ``parent`` (id, JSON text, what it validates to) as a new segment.

        Only after a kept history ending at ``parent``, and only when every object was
        validated from its very text; a read still matches the segment by ids and texts.
        """
        if parent is None or not written or any(made is None for _, _, made in written):
            return
        with self._lock:
            key = self._tails.get(parent)
        if key is None:
            return
        segments = self._take(key)
        if not segments or segments[-1].ids[-1] != parent or len(segments) >= MAX_SEGMENTS:
            self._keep(key, segments)
            return
        objects = [made for _, _, made in written if made is not None]
        segment = _pickled(
            [entry_id for entry_id, _, _ in written], [text for _, text, _ in written], objects
        )
        self._keep(key, segments if segment is None else [*segments, segment])

    def _take(self, key: str) -> list[_Segment]:
        with self._lock:
            segments = self._lines.pop(key, [])
            self._bytes -= sum(segment.size for segment in segments)
            if segments:
                self._untail(key, segments)
        return segments

    def _keep(self, key: str, segments: list[_Segment]) -> None:
        size = sum(segment.size for segment in segments)
        if not segments or size > self.max_bytes:
            return
        with self._lock:
            replaced = self._lines.pop(key, [])  # a concurrent read of the same history kept it
            self._bytes += size - sum(segment.size for segment in replaced)
            if replaced:
                self._untail(key, replaced)
            self._lines[key] = segments
            self._tails[segments[-1].ids[-1]] = key
            while self._bytes > self.max_bytes:
                gone, dropped = self._lines.popitem(last=False)
                self._bytes -= sum(segment.size for segment in dropped)
                self._untail(gone, dropped)

    def _untail(self, key: str, segments: list[_Segment]) -> None:
        """Forget where the history ``key`` kept as ``segments`` ended (the lock held)."""
        tail = segments[-1].ids[-1]
        if self._tails.get(tail) == key:
            del self._tails[tail]

    @property
    def size(self) -> int:
        """The bytes kept (texts and pickles)."""
        return self._bytes


__all__ = ["MAX_BYTES", "MAX_SEGMENTS", "KeptCopies", "unpickled"]
