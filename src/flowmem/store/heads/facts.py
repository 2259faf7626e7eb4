"""The facts ``SessionBuffers`` gives and the protocol itself, shared by every backend's reader.

``flowmem.store.heads`` re-exports them beside ``session_buffers_of``, which picks a
backend's reader (``memory.py``, ``sql.py``); the readers import this module, not the
package, so the package's dispatch and its readers make no import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowmem.errors import InvalidInputError
from flowmem.store.checkpoints import LINE_PREFIX as GRAPH_LINE
from flowmem.store.conversations import LINE as CONVERSATION_LINE

MAX_SESSIONS = 100
"""The most sessions one call reads (a page of ``GET /v1/sessions``)."""


@dataclass(frozen=True)
class BufferCount:
    """A buffer of a session: its key, how many rows it holds, when it was created (``born``)."""

    key: str
    count: int
    born: int = 0


def is_framework_line(key: str) -> bool:
    """True for a buffer key a framework keeps lines in (``langgraph…``, ``pydantic_ai``, ``pydantic_ai#…``)."""
    return key.startswith(GRAPH_LINE) or key == CONVERSATION_LINE or key.startswith(
        CONVERSATION_LINE + "#"
    )


def check_sessions(session_ids: Sequence[str]) -> list[str]:
    """The distinct session ids asked, sorted; InvalidInputError past ``MAX_SESSIONS``."""
    ids = sorted(set(session_ids))
    if len(ids) > MAX_SESSIONS:
        raise InvalidInputError(f"at most {MAX_SESSIONS} sessions at once, got {len(ids)}")
    return ids


def first_line(key: str) -> str:
    """The first line's key of the family a line key belongs to (the key up to ``#``)."""
    return key.split("#", 1)[0]


class SessionBuffers(Protocol):
    """Facts about sessions' buffers and lines, for many sessions in a bounded number of reads."""

    def buffers(self, session_id: str, limit: int) -> list[BufferCount]:
        """Every buffer of the session's ``session`` scope in key order, at most ``limit``."""
        ...

    def counts(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], BufferCount]:
        """The buffers named by ``(session id, key)`` that exist."""
        ...

    def newest(self, session_ids: Sequence[str]) -> dict[str, BufferCount]:
        """Per session, among its buffers that are no framework line: a non-empty one first, then the newest."""
        ...

    def graph_lines(self, session_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Per LangGraph thread: first-line key -> line key, of its latest root-namespace checkpoint."""
        ...

    def conversation_lines(self, session_ids: Sequence[str]) -> dict[str, str]:
        """Per pydantic-ai conversation: the line its head entry ends (where the next save appends)."""
        ...


def pick_place(places: Sequence[tuple[str, int, int | None]]) -> str | None:
    """The line of an entry found at ``(key, position, line end)`` places: one it ends, else the first.

    As ``flowmem.store.conversations.lines.locate`` chooses the line a save continues.
    """
    ordered = sorted(places)
    for key, position, end in ordered:
        if end is not None and position == end:
            return key
    return ordered[0][0] if ordered else None


def head_id(record: Mapping[str, Any]) -> str | None:
    """The head entry id a pydantic-ai conversation record names, or None."""
    found = record.get("head_id")
    return found if isinstance(found, str) else None


__all__ = [
    "CONVERSATION_LINE",
    "GRAPH_LINE",
    "MAX_SESSIONS",
    "BufferCount",
    "SessionBuffers",
    "check_sessions",
    "first_line",
    "head_id",
    "is_framework_line",
    "pick_place",
]
