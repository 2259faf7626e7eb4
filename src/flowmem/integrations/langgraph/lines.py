"""A message channel stored as *lines*: rows of the thread's session buffers (decision 0040).

A checkpoint's message list is stored as a reference ``(buffer key, row count)``: the
first ``count`` rows of that buffer. A step that adds messages at the end of the list
the line's buffer ends with appends just those rows; a list that is not such an
extension (a fork from an older checkpoint, ``RemoveMessage``, a message replaced by
id) starts a new line, one full copy for that checkpoint, and the steps after it extend
the new line. Lines only grow, so every reference stays exact.

``LineHeads`` remembers, per thread, namespace and channel, the last line state this
process wrote or read with the very message objects LangGraph holds: the next step's
list is recognised as an extension by identity (``is``), without serializing the
messages it already stored.
"""

from __future__ import annotations

import base64
import hashlib
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from flowmem.core import Message, prepare
from flowmem.integrations.langchain import message_to_row, row_to_message
from flowmem.store.checkpoints import LINE_PREFIX, ROWS_TYPE

MAX_KEY = 255
PROVEN = frozenset({AIMessage, HumanMessage, SystemMessage, ToolMessage})
"""Classes whose rows give back an equal message, proven by the LangChain adapter's property
tests (tests/integrations/test_langchain_lossless.py): not converted back to check."""
SERDE_KEY = "langgraph_serde"
"""Row metadata holding LangGraph's own serialization of a message that rows cannot hold."""


def is_message_list(value: object) -> bool:
    """True for a non-empty list of LangChain messages: a channel stored as a line."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, BaseMessage) for item in value)
    )


def message_lists(values: Mapping[str, Any], lines: Collection[str]) -> list[list[BaseMessage]]:
    """The message lists among a checkpoint's channel values, in the values' order.

    ``lines``: the channels the same ``put`` just stored as lines, proven message lists
    there (their stored prefix by identity, the rest by ``is_message_list``); they are not
    scanned again, which at 2,000 messages cost 0.5 ms a step (``isinstance`` through
    pydantic's ABC metaclass). Equal to ``[v for v in values.values() if is_message_list(v)]``
    (tests/integrations/langgraph/test_lines.py).
    """
    return [v for c, v in values.items() if c in lines or is_message_list(v)]


def base_key(ns: str, channel: str) -> str:
    """The buffer key of a channel's first line: ``langgraph``, ``langgraph/<channel>``, …

    A namespace or channel too long for a 255-character key is named by its hash.
    """
    parts = [LINE_PREFIX]
    if ns:
        parts.append("ns=" + ns)
    if channel != "messages":
        parts.append(channel)
    key = "/".join(parts)
    if len(key) + 40 > MAX_KEY:  # room for a later line's "#<checkpoint id>"
        digest = hashlib.sha256(json.dumps([ns, channel]).encode()).hexdigest()[:32]
        key = f"{LINE_PREFIX}/h={digest}"
    return key


def branch_key(base: str, checkpoint_id: str) -> str:
    """The buffer key of a line started by checkpoint ``checkpoint_id``."""
    return f"{base}#{checkpoint_id}"[:MAX_KEY]


def reference(key: str, count: int) -> tuple[str, bytes]:
    """A channel value stored as the first ``count`` rows of line ``key``."""
    return ROWS_TYPE, json.dumps({"key": key, "count": count}).encode()


def dereference(blob: bytes) -> tuple[str, int]:
    """The (line key, row count) a reference names."""
    ref = json.loads(blob)
    return str(ref["key"]), int(ref["count"])


def to_rows(messages: Sequence[BaseMessage], serde: Any, now: int) -> list[Message]:
    """Stored rows of ``messages``: each gives back an equal message (``from_rows``).

    A message flowmem's LangChain rows cannot give back equal (a class of its own, a
    field that is not JSON) keeps LangGraph's serialization of it in its row's metadata.
    """
    flat = []
    for message in messages:
        row = None
        try:
            row = message_to_row(message)
            if type(message) not in PROVEN and row_to_message(row) != message:
                row = None
        except Exception:  # any message LangChain rows cannot hold: keep LangGraph's bytes
            row = None
        if row is None:
            kind, data = serde.dumps_typed(message)
            text = message.content if isinstance(message.content, str) else ""
            row = {
                "role": _role(message),
                "content": text,
                SERDE_KEY: [kind, base64.b64encode(data).decode()],
            }
        flat.append(row)
    rows = prepare(flat, now)
    for row, source in zip(rows, flat, strict=True):
        if SERDE_KEY in source:
            row["metadata"][SERDE_KEY] = source[SERDE_KEY]
            row.pop(SERDE_KEY, None)
    return rows


def _role(message: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}.get(
        message.type, "user"
    )


def from_rows(rows: Sequence[Message], serde: Any) -> list[BaseMessage]:
    """The messages stored rows hold (``to_rows`` backwards)."""
    messages = []
    for row in rows:
        kept = row.get("metadata", {}).get(SERDE_KEY)
        if kept is not None:
            messages.append(serde.loads_typed((kept[0], base64.b64decode(kept[1]))))
        else:
            messages.append(row_to_message(row))
    return messages


@dataclass(frozen=True)
class LineHead:
    """A line as this process last saw it: key, row count, and the messages those rows are."""

    key: str
    count: int
    messages: tuple[BaseMessage, ...]

    def extended_by(self, messages: Sequence[BaseMessage]) -> bool:
        """True when ``messages`` starts with exactly this line's message objects."""
        if len(messages) < self.count:
            return False
        # map stops at the shorter iterable, ``self.messages``: no slice of the list copied
        return all(map(operator.is_, self.messages, messages))


class LineHeads:
    """The last line state per (thread, namespace, channel), for the most recent threads."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._heads: OrderedDict[tuple[str, str, str], LineHead] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread_id: str, ns: str, channel: str) -> LineHead | None:
        """The remembered head, or None."""
        with self._lock:
            head = self._heads.get((thread_id, ns, channel))
            if head is not None:
                self._heads.move_to_end((thread_id, ns, channel))
            return head

    def remember(self, thread_id: str, ns: str, channel: str, head: LineHead) -> None:
        """Remember a head, forgetting the least recently used past ``capacity``."""
        with self._lock:
            self._heads[(thread_id, ns, channel)] = head
            self._heads.move_to_end((thread_id, ns, channel))
            while len(self._heads) > self.capacity:
                self._heads.popitem(last=False)

    def forget(self, thread_id: str) -> None:
        """Forget every head of a thread (deleted, pruned, or written by someone else)."""
        with self._lock:
            for key in [k for k in self._heads if k[0] == thread_id]:
                del self._heads[key]
