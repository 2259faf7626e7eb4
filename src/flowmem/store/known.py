"""What a store process knows of a buffer after its own last append (decision 0039).

PostgreSQL appends in one round trip when the facts the rules will ask about are
known before anything is sent: the buffer's header as this process last wrote or
read it (with its version, which every header write increments) and the ids of
its unanswered calls. The rules then run first, against those facts
(``foresee``); the writes they chose go to the server with the lock and one
statement that checks the facts still hold, and run only if they do. A fact that
did not hold costs nothing but that round trip: no write ran, and the same round
trip brought the buffer's current facts back for the next try.

Nothing here decides a rule: ``apply_append`` decides, on an editor seeded with
facts, exactly as on the facts a query fetched. This module only says which
facts are known, and refuses (``Unforeseen``) an append whose rules would ask
about anything else: a window eviction, the healing of open calls (their
positions), a replacement. An id that is not among the open calls is assumed
new; if it was declared, answered or evicted before, the server's check says so
and nothing is written.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from flowmem.core import AppendOutcome, Message, apply_append
from flowmem.errors import BufferFullError
from flowmem.store.base import Address
from flowmem.store.editor import CARRIED_ROW, SqlBufferEditor
from flowmem.store.rows import check_buffer_bytes

DEFAULT_KNOWN_BUFFERS = 4096  # buffers a store remembers (oldest forgotten first)
# open call declarations a remembered buffer may have: the read for the next append
# stops one past it, and a buffer with more is not remembered (its appends take
# the plain path), so neither that read nor the memory grows with a buffer's calls
MAX_KNOWN_OPEN = 64
# the room the known check asks for when none was read (a buffer owned by nobody, or under a
# quota its reservation was not checked against): the lowest BIGINT, so any room holds
ANY_ROOM = -(1 << 63)

# the editor's writes an append of known facts may make (each has a variant that
# runs only when the facts held); anything else is not foreseen
FORESEEABLE = frozenset(
    {"row_insert", "call_insert", "answer_insert", "answer_carry", "header_update", "header_listed"}
)


class Unforeseen(Exception):
    """The rules would ask about something the known facts do not say."""


@dataclass(frozen=True)
class Known:
    """A buffer's header and unanswered call ids, as they were when this process last saw them.

    ``listed``: the header's list of them as stored (``[[call id, position, order], …]``,
    JSON; decision 0153), which the editor changes and writes with the header.

    Since decision 0195 ``count``, ``last_major`` and ``bytes`` are the buffer's, derived
    with the header's tail (the rows appended since its last write: ``tail_rows``, their
    ``tail_bytes`` and ``tail_tokens``); ``version`` is the stored header's; ``room``: what
    the buffer may grow to with its header unwritten (None: owned by nobody).
    """

    buffer_id: int
    version: int
    count: int
    last_major: int
    bytes: int
    open: frozenset[str]
    listed: str = "[]"
    tail_rows: int = 0
    tail_bytes: int = 0
    tail_tokens: int = 0
    room: int | None = -1

    def stored(self) -> tuple[int, int, int, int]:
        """The header's count, last major, bytes and room as stored: the buffer's less its tail's.

        The tail is whole majors after the header's (each row appended at the next one).
        The room (its reservation less its log's bytes) when one was read (decision 0199:
        the check refuses a lower one, which another process's give-back leaves), else
        ``ANY_ROOM`` (every room is at least it: the check needs no NULL's ``COALESCE``).
        """
        return (
            self.count - self.tail_rows,
            self.last_major - self.tail_rows,
            self.bytes - self.tail_bytes,
            ANY_ROOM if self.room is None or self.room < 0 else self.room,
        )


class Foreseen(NamedTuple):
    """An append decided on known facts: its outcome, its writes, and the ids assumed new.

    A tuple, not a frozen dataclass: made on every append on known facts (decision 0163).
    """

    outcome: AppendOutcome
    writes: list[tuple[str, Sequence[Any]]]
    fresh: list[str]


class KnownBuffers:
    """A bounded, thread-safe map of address -> ``Known`` (the oldest entry goes first)."""

    def __init__(self, size: int = DEFAULT_KNOWN_BUFFERS) -> None:
        self.size = size
        self._known: dict[Address, Known] = {}
        self._lock = threading.Lock()

    def get(self, address: Address) -> Known | None:
        """What is known of ``address`` (None: nothing)."""
        return self._known.get(address)

    def remember(self, address: Address, known: Known | None) -> None:
        """Record (or, with None, forget) what is known of ``address``."""
        if self.size <= 0:
            return
        with self._lock:
            self._known.pop(address, None)
            if known is None:
                return
            if len(self._known) >= self.size:
                del self._known[next(iter(self._known))]
            self._known[address] = known


class Unasked:
    """The questions of a ``SqlRunner`` on remembered facts: none is foreseen (``Unforeseen``).

    A subclass says what becomes of the writes (its ``run``).
    """

    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """No question is foreseen."""
        raise Unforeseen(name)

    def all(self, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """No question is foreseen."""
        raise Unforeseen(name)


class _Recorder(Unasked):
    """A ``SqlRunner`` that answers no question but the header's list of open calls, and records the writes."""

    def __init__(self, listed: str) -> None:
        self.writes: list[tuple[str, Sequence[Any]]] = []
        self.listed = listed

    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """The known list of open calls (checked by the header's version); no other question."""
        if name == "open_list":
            return (self.listed,)
        raise Unforeseen(name)

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Record a foreseeable write; refuse any other."""
        if name not in FORESEEABLE:
            raise Unforeseen(name)
        self.writes.append((name, params))


def foresee(
    known: Known,
    address: Address,
    rows: list[Message],
    ids: list[str],
    heals: bool,
    max_messages: int,
    max_bytes: int,
) -> Foreseen:
    """Run the append rules on the known facts; ``Unforeseen`` when they would ask for more.

    ``ids``: the call ids the rows name; ``heals``: a user turn is among them. An id
    among the known open calls is declared and unanswered; any other is assumed
    new (not declared, not answered), which the server checks before any write.
    A user turn is foreseen only when no call is open (healing needs positions),
    and a buffer-size refusal is left to the plain path, which decides it on facts
    it read itself.
    """
    if heals and known.open:
        raise Unforeseen("open calls to heal")
    recorder = _Recorder(known.listed)
    # an answer's row carries its declaration (PostgreSQL's migration 34, decision 0190)
    head = (known.buffer_id, known.count, known.last_major, known.bytes, known.listed, CARRIED_ROW)
    tail = (known.tail_rows, known.tail_tokens, known.room)  # decision 0195
    editor = SqlBufferEditor(recorder, address, (*head, *tail))
    editor.skips = True
    # no id is taken as evicted: for an open id it would change nothing (it is
    # declared), and a fresh one is checked by the server before any write
    editor.know(
        {cid: cid in known.open for cid in ids},
        dict.fromkeys(ids),
        [] if heals else None,
        evicted=dict.fromkeys(ids, False),
    )
    outcome = apply_append(editor, rows, max_messages)
    if outcome.logged:  # the repair log is written on the plain path (issue 37 §2)
        raise Unforeseen("a repair to log")
    try:
        check_buffer_bytes(address, editor.bytes_before, editor.bytes, max_bytes)
    except BufferFullError as exc:
        raise Unforeseen("over the buffer size limit") from exc
    editor.flush()
    fresh = [cid for cid in ids if cid not in known.open]
    return Foreseen(outcome, recorder.writes, fresh)


__all__ = [
    "ANY_ROOM",
    "DEFAULT_KNOWN_BUFFERS",
    "MAX_KNOWN_OPEN",
    "Foreseen",
    "Known",
    "KnownBuffers",
    "Unasked",
    "Unforeseen",
    "foresee",
]
