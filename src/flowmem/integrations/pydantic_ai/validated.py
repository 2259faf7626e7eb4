"""The histories a store validated, kept as pickled copies so a load validates only what is new (decision 0141).

A load of a line kept whole reads every message's JSON (decision 0131) and validated
all of it, turn after turn, though only the last turn's messages were new. ``Validated``
keeps, per history (keyed by its first entry id), the messages it validated as
*segments*: the entry ids and JSON texts a segment was validated from, and the
validated messages pickled. A load takes the longest run of leading segments whose ids
and texts are exactly the ones read now, unpickles them (a fresh copy each time: the
caller may change what it gets, pickle restores each object's state as validation left
it, about 2.7 times faster than validating), validates the rest in one
``validate_json`` and keeps it as a new segment. A save adds the messages it wrote
after a kept history as a segment too, when it validated each from the very text it
stored (``extend``, decision 0145): the next load then validates nothing. Only bytes
pickled here, in this process, are ever unpickled. Past ``MAX_SEGMENTS`` the segments are merged into one.
At most ``max_bytes`` (texts and pickles) are kept, the least recently loaded histories
going first; a history larger than that is not kept.
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest

MAX_BYTES = 32 * 1024 * 1024
"""How many bytes of kept texts and pickles a store holds at most, by default."""
MAX_SEGMENTS = 8
"""How many segments a history keeps before they are merged into one."""


@dataclass(frozen=True)
class _Segment:
    """Messages validated from these entries' JSON texts, pickled."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    blob: bytes
    size: int
    """Its texts' characters and its pickle's bytes."""


def _pickled(ids: Sequence[str], texts: Sequence[str], messages: list[ModelMessage]) -> _Segment | None:
    try:
        blob = pickle.dumps(messages, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a message pickle cannot copy: validated on every load, as before
        return None
    return _Segment(tuple(ids), tuple(texts), blob, len(blob) + sum(len(text) for text in texts))


def _share_instructions(messages: list[ModelMessage]) -> None:
    """Point requests with equal ``instructions`` at one string, as ``ModelMessagesTypeAdapter`` does."""
    shared: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ModelRequest) and message.instructions is not None:
            message.instructions = shared.setdefault(message.instructions, message.instructions)


class Validated:
    """The histories this store validated, per first entry id, as pickled segments (at most ``max_bytes``)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lines: OrderedDict[str, list[_Segment]] = OrderedDict()
        self._tails: dict[str, str] = {}  # the last entry id of each history kept, to its key
        self._bytes = 0
        self._lock = threading.Lock()  # loads of PostgreSQL run in worker threads

    def messages(self, chosen: Sequence[tuple[str, str]]) -> list[ModelMessage]:
        """The messages of ``chosen`` (entry id and JSON text, oldest first), as ``validate_json`` gives them."""
        if not chosen:
            return []
        key = chosen[0][0]
        segments = self._take(key)
        ids = [entry_id for entry_id, _ in chosen]
        texts = [text for _, text in chosen]
        messages: list[ModelMessage] = []
        kept: list[_Segment] = []
        for segment in segments:
            end = len(messages) + len(segment.ids)
            if segment.ids != tuple(ids[len(messages) : end]) or segment.texts != tuple(texts[len(messages) : end]):
                break
            messages.extend(pickle.loads(segment.blob))
            kept.append(segment)
        start = len(messages)
        if start < len(chosen):
            new = ModelMessagesTypeAdapter.validate_json("[" + ",".join(texts[start:]) + "]")
            made = _pickled(ids[start:], texts[start:], new)
            messages.extend(new)
            if made is None:
                return _shared(messages)
            kept.append(made)
        if len(kept) > MAX_SEGMENTS:
            merged = _pickled(ids, texts, messages)
            kept = [] if merged is None else [merged]
        self._keep(key, kept)
        return _shared(messages)

    def extend(self, parent: str | None, written: Sequence[tuple[str, str, ModelMessage | None]]) -> None:
        """Keep messages a save wrote after ``parent`` (id, JSON text, what it validates to) as a new segment.

        Only after a kept history ending at ``parent``, and only when every message was
        validated from its very text; a load still matches the segment by ids and texts.
        """
        if parent is None or not written or any(message is None for _, _, message in written):
            return
        with self._lock:
            key = self._tails.get(parent)
        if key is None:
            return
        segments = self._take(key)
        if not segments or segments[-1].ids[-1] != parent or len(segments) >= MAX_SEGMENTS:
            self._keep(key, segments)
            return
        messages = [message for _, _, message in written if message is not None]
        made = _pickled([entry_id for entry_id, _, _ in written], [text for _, text, _ in written], messages)
        self._keep(key, segments if made is None else [*segments, made])

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
            replaced = self._lines.pop(key, [])  # a concurrent load of the same history kept it
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


def _shared(messages: list[ModelMessage]) -> list[ModelMessage]:
    _share_instructions(messages)
    return messages


__all__ = ["MAX_BYTES", "MAX_SEGMENTS", "Validated"]
