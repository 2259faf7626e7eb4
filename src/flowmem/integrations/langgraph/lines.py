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
messages it already stored. The identities are compared as the objects' addresses, one
machine word each, read from a tuple of them in one pass (``addresses``, decision 0177):
the check costs about 1 ns a stored message instead of the ~20-50 ns of ``is`` called on
each, so a step's cost stays flat as the thread grows.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import json
import operator
import struct
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from flowmem.core import Message, prepare
from flowmem.integrations.langchain import message_to_row, row_to_message
from flowmem.integrations.langgraph.durable import open_after, open_calls
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


def message_lists(
    values: Mapping[str, Any],
    lines: Collection[str],
    head_of: Callable[[str], LineHead | None] | None = None,
) -> list[list[BaseMessage]]:
    """The message lists among a checkpoint's channel values, in the values' order (``message_channels``)."""
    return [value for value, _ in message_channels(values, lines, head_of)]


def message_channels(
    values: Mapping[str, Any],
    lines: Collection[str] | Mapping[str, LineHead],
    head_of: Callable[[str], LineHead | None] | None = None,
) -> list[tuple[list[BaseMessage], LineHead | None]]:
    """The message lists among a checkpoint's channel values, each with the head that answers for its start.

    ``lines``: the channels the same ``put`` just stored as lines, proven message lists
    there (their stored prefix by identity, the rest by ``is_message_list``); they are not
    scanned again, which at 2,000 messages cost 0.5 ms a step (``isinstance`` through
    pydantic's ABC metaclass). ``head_of``: a channel's remembered line head; a list that
    starts with a head's messages (proven messages, ``LineHead.all_messages``) is scanned
    only past them: an invoke's first checkpoint holds the list its read returned, not
    written again, and no longer costs a scan of the whole thread (decision 0177).
    Its lists are ``[v for v in values.values() if is_message_list(v)]``
    (tests/integrations/langgraph/test_lines.py). A list's head is None when it was
    scanned whole, else the head whose messages it starts with (for a channel of
    ``lines`` given as a mapping, the head the ``put`` made): ``open_calls_of`` reads
    only the rest.
    """
    found: list[tuple[list[BaseMessage], LineHead | None]] = []
    made = lines if isinstance(lines, Mapping) else None
    for channel, value in values.items():
        if channel in lines:
            found.append((value, None if made is None else made[channel]))
            continue
        if not isinstance(value, list) or not value:
            continue
        head = None if head_of is None else head_of(channel)
        if head is not None and head.all_messages and head.extended_by(value):
            rest = value[head.count :]
            if not rest or is_message_list(rest):
                found.append((value, head))
        elif is_message_list(value):
            found.append((value, None))
    return found


def open_calls_of(messages: Sequence[Any], head: LineHead | None) -> frozenset[str]:
    """``open_calls(messages)``; with the head ``messages`` starts with, only the messages past it read."""
    if head is None:
        return open_calls(messages)
    return open_after(head.open_calls(), messages[head.count :])


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


_ITEMS = tuple.__basicsize__
"""Where a tuple's items start, past its header (CPython's ``PyTupleObject``)."""
_WIDTH = tuple.__itemsize__
"""The bytes of one item: a pointer, the item's address (what ``id`` gives on CPython)."""


def _read_addresses(objects: tuple[object, ...]) -> bytes:
    """The addresses of a tuple's items, in order, read in one pass from the tuple itself."""
    return ctypes.string_at(id(objects) + _ITEMS, len(objects) * _WIDTH)


def _addresses_readable() -> bool:
    """True when ``_read_addresses`` gives what ``id`` says of each item on this interpreter.

    Checked once, on a probe tuple: CPython lays a tuple's items out as pointers after its
    header, ``id`` is the address, and ``struct``'s ``P`` packs one as a tuple holds it.
    Elsewhere (another interpreter, a layout that differs) identities are compared one by one.
    """
    if sys.implementation.name != "cpython":
        return False
    probe = (object(), object(), object(), None, 1)
    try:
        return _read_addresses(probe) == struct.pack(f"{len(probe)}P", *map(id, probe))
    except Exception:  # no ctypes, or a layout this check cannot read
        return False


ADDRESSES = _addresses_readable()
"""True where a line head's identities are compared as addresses (decision 0177)."""


def addresses(objects: tuple[object, ...]) -> bytes | None:
    """The items' addresses, one machine word each, or None where they cannot be read (``ADDRESSES``).

    Two tuples that hold their items alive start with the same objects exactly when their
    addresses start with the same bytes: a live object's address is its own, so equal
    addresses are the same object (identity, not ``==``).
    """
    if not ADDRESSES or type(objects) is not tuple:
        return None
    return _read_addresses(objects)


@dataclass(frozen=True)
class LineHead:
    """A line as this process last saw it: key, row count, and the messages those rows are.

    ``addresses``: the messages' addresses (``addresses``), kept so that the next step's
    check reads only the new list's; computed here when not given. ``all_messages``:
    every one of ``messages`` is a ``BaseMessage`` (proven where the head was made).
    ``open``: the tool calls the messages leave open, when the head's maker knew them.
    """

    key: str
    count: int
    messages: tuple[BaseMessage, ...]
    addresses: bytes | None = field(default=None, compare=False, repr=False)
    all_messages: bool = True
    open: frozenset[str] | None = field(default=None, compare=False, repr=False)
    """The tool calls its messages leave open (``open_calls``); None: not known yet."""

    def __post_init__(self) -> None:
        if self.addresses is None:
            object.__setattr__(self, "addresses", addresses(self.messages))

    def open_calls(self) -> frozenset[str]:
        """``open_calls(self.messages)``, read once and kept (the next head's from it, ``open_after``)."""
        found = self.open
        if found is None:
            found = open_calls(self.messages)
            object.__setattr__(self, "open", found)
        return found

    def extended_by(self, messages: Sequence[BaseMessage], read: bytes | None = None) -> bool:
        """True when ``messages`` starts with exactly this line's message objects.

        ``read``: ``addresses(messages)`` when the caller has it (``messages`` a tuple it
        holds). Else a list is copied to a tuple first (a snapshot: another thread's
        change to the list cannot fall between the copy and the comparison).
        """
        if len(messages) < self.count:
            return False
        mine = self.addresses
        if mine is not None:
            if read is None:
                objects = messages if type(messages) is tuple else tuple(messages)
                read = addresses(objects)
            if read is not None:
                return read.startswith(mine)
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
