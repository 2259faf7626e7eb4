"""Ids of Gemini function calls that have none, and how responses find their call (decision 0055).

Gemini may send a ``function_call`` without an ``id`` (the older API never sets
one); flowmem needs an id for every call (MEM-1, MEM-2, MEM-3 and MEM-11 all
pair by id). An absent id is derived from the history itself: the SHA-256 of
every content up to and including the call's (snake_case, nulls left out),
then the part's index, as ``gemini_<24 hex digits>``. The same history always
gives the same ids, and a history sent again with more turns keeps them; two
calls never share one within a payload. A ``function_response`` pairs with its
call by ``id`` when it has one, else with the oldest call of the same name not
yet answered in the payload.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from typing import Any

from flowmem.errors import InvalidMessageError
from flowmem.formats._common import required_call_id

DERIVED_PREFIX = "gemini_"


class CallIds:
    """The ids of one payload's function calls, given or derived, and their pending responses."""

    def __init__(self) -> None:
        self._chain = hashlib.sha256()
        self._pending: dict[str, deque[str]] = {}
        self.names: dict[str, str] = {}
        """The function name of every call read so far, by id."""

    def content(self, content: Any) -> None:
        """Add one content (snake_case, no nulls) to the history the derived ids hash."""
        text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        self._chain.update(text.encode("utf-8", "surrogatepass"))
        self._chain.update(b"\n")

    def call(self, given: object, name: str, index: int, where: str) -> tuple[str, bool]:
        """Return a call's id and whether it was derived; the call then waits for its response."""
        if given is None:
            digest = self._chain.copy()
            digest.update(f"#{index}".encode())
            cid, derived = DERIVED_PREFIX + digest.hexdigest()[:24], True
        else:
            cid, derived = required_call_id(given, where), False
        self._pending.setdefault(name, deque()).append(cid)
        self.names.setdefault(cid, name)
        return cid, derived

    def response(self, given: object, name: str, where: str) -> tuple[str, bool]:
        """Return the id of the call a response answers and whether it was found by name and order.

        A response without an id answers the oldest unanswered call of its name in
        this payload; when there is none it cannot be paired: ``InvalidMessageError``
        says to send the call in the same payload, or the ids.
        """
        if given is not None:
            cid = required_call_id(given, where)
            waiting = self._pending.get(self.names.get(cid, name))
            if waiting is not None and cid in waiting:
                waiting.remove(cid)
            return cid, False
        waiting = self._pending.get(name)
        if not waiting:
            raise InvalidMessageError(
                f"{where}: function_response {name!r} has no id and answers no function_call "
                "before it in this payload; send the call in the same payload, or give both an id"
            )
        return waiting.popleft(), True
