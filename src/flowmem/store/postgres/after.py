"""What a buffer holds after an append decided on known facts, worked out from its writes.

A speed twin (decision 0066): its oracle is ``buffer_known``, the statement that
reads the same from the server after the writes, which an append on known facts
no longer sends when its facts held (one statement less per append). Its test
(tests/store/test_postgres_known.py) reads ``buffer_known`` after every append of
random histories and compares.

Only the writes an append on known facts may make (``flowmem.store.known.FORESEEABLE``)
come here, with the parameters ``SqlBufferEditor`` gives them; they all ran,
since the facts held.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flowmem.store.known import MAX_KNOWN_OPEN, Known
from flowmem.store.rows import utf8_size


def known_after(known: Known, writes: Sequence[tuple[str, Sequence[Any]]]) -> Known | None:
    """The buffer's facts after ``writes`` ran on a buffer whose facts were ``known``.

    ``header_update`` sets count, last major and bytes and increments the version;
    ``header_listed`` does too and sets the header's list of unanswered calls (its
    fifth parameter, decision 0153), which the open calls are read from. None: more
    open calls than kept. Without a header write (decision 0195) each ``row_insert``
    (``(buffer, position, role, body, tokens, …)``) lengthens the tail: count, last
    major and bytes advance, the version stays the stored header's.
    """
    version, count, last_major, size = known.version, known.count, known.last_major, known.bytes
    listed, still_open = known.listed, known.open
    rows, tail_bytes, tokens = known.tail_rows, known.tail_bytes, known.tail_tokens
    for name, params in writes:
        if name == "row_insert":
            body = utf8_size(str(params[3]))
            count, last_major, size = count + 1, int(params[1]) >> 20, size + body
            rows, tail_bytes, tokens = rows + 1, tail_bytes + body, tokens + int(params[4])
        if name in ("header_update", "header_listed"):
            count, last_major, size = int(params[0]), int(params[1]), int(params[2])
            version += 1
            rows = tail_bytes = tokens = 0
        if name == "header_listed":
            listed = str(params[4])
            still_open = open_of(listed)
    if len(still_open) > MAX_KNOWN_OPEN:
        return None
    tail = (rows, tail_bytes, tokens, known.room)
    return Known(known.buffer_id, version, count, last_major, size, still_open, listed, *tail)


def room_passed(known: Known, writes: Sequence[tuple[str, Sequence[Any]]]) -> bool:
    """Whether ``writes`` write an owned buffer's header past the room ``known`` read (decision 0199).

    The reservation trigger then grants (or checks) the reservation again, which
    ``known_after`` does not work out: the append reads ``buffer_known`` back instead.
    """
    room = known.room
    if room is None:
        return False
    for name, params in writes:
        if name in ("header_update", "header_listed") and (room < 0 or int(params[2]) > room):
            return True
    return False


def open_of(listed: str) -> frozenset[str]:
    """The call ids a header's list of unanswered calls names (``[[call id, position, order], …]``)."""
    if listed == "[]":
        return frozenset()
    return frozenset(str(entry[0]) for entry in json.loads(listed))
