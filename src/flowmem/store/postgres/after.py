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

from collections.abc import Sequence
from typing import Any

from flowmem.store.known import MAX_KNOWN_OPEN, Known


def known_after(known: Known, writes: Sequence[tuple[str, Sequence[Any]]]) -> Known | None:
    """The buffer's facts after ``writes`` ran on a buffer whose facts were ``known``.

    ``header_update`` sets count, last major and bytes and increments the version;
    a declared call (``call_insert``) is open unless an answer to its id is among the
    writes (``answer_insert``: the call's insert or ``calls_answered`` marks it, in
    either order); an answered open call closes. None: more open calls than kept.
    """
    version, count, last_major, size = known.version, known.count, known.last_major, known.bytes
    declared: list[str] = []
    answered: set[str] = set()
    for name, params in writes:
        if name == "header_update":
            count, last_major, size = int(params[0]), int(params[1]), int(params[2])
            version += 1
        elif name == "call_insert":
            declared.append(str(params[1]))
        elif name == "answer_insert":
            answered.add(str(params[1]))
    still_open = (known.open | frozenset(declared)) - answered
    if len(still_open) > MAX_KNOWN_OPEN:
        return None
    return Known(known.buffer_id, version, count, last_major, size, still_open)
