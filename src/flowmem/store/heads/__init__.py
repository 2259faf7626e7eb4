"""A session's buffers and the heads of its lines, read for many sessions at once: ``SessionBuffers``.

What ``GET /v1/sessions`` and ``GET /v1/sessions/{id}`` need to name the buffer that
holds a session's conversation (decision 0110; the choice itself is made above the
store, in ``flowmem.service.conversation``). The store gives facts only:

- ``buffers``: every buffer of one session, in key order, at most ``limit``;
- ``counts``: the row count and creation order of named buffers;
- ``newest``: per session, the buffer that is not a framework's line, non-empty
  first, then the one created last;
- ``graph_lines``: per LangGraph thread, the lines its latest root-namespace
  checkpoint references (a channel's first-line key -> the line it is on now);
- ``conversation_lines``: per pydantic-ai conversation, the line its head entry ends.

Each method of the SQL backends is one query whatever the number of sessions asked
(at most ``MAX_SESSIONS``); nothing reads a buffer's rows. ``born`` orders buffers
by creation (SQLite's ``born``, PostgreSQL's never-reused ``id``, the memory store's
insertion order): comparable between buffers of one store only.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowmem.errors import ConfigurationError, InvalidInputError
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


_FOUND: weakref.WeakKeyDictionary[Any, SessionBuffers] = weakref.WeakKeyDictionary()


def session_buffers_of(store: Any) -> SessionBuffers:
    """The ``SessionBuffers`` of a store: itself when it has one, else this package's for its backend.

    ConfigurationError for a store of another kind.
    """
    if all(hasattr(store, name) for name in ("buffers", "newest", "graph_lines")):
        return store  # type: ignore[no-any-return]
    found = _FOUND.get(store)
    if found is None:
        found = _FOUND[store] = _backend(store)
    return found


def _backend(store: Any) -> SessionBuffers:
    from flowmem.store.memory import MemoryStore

    if isinstance(store, MemoryStore):
        from flowmem.store.heads.memory import MemoryBuffers

        return MemoryBuffers(store)
    # a module not imported yet cannot have made this store: never import a driver here
    sqlite = sys.modules.get("flowmem.store.sqlite")
    if sqlite is not None and isinstance(store, sqlite.SqliteStore):
        from flowmem.store.heads.sqlite import SqliteBuffers

        return SqliteBuffers(store)
    postgres = sys.modules.get("flowmem.store.postgres")
    if postgres is not None and isinstance(store, postgres.PostgresStore):
        from flowmem.store.heads.postgres import PostgresBuffers

        return PostgresBuffers(store)
    raise ConfigurationError(
        f"{type(store).__name__} cannot list a session's buffers: use a MemoryStore, "
        "SqliteStore or PostgresStore, or a store implementing flowmem.store.heads.SessionBuffers"
    )


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
    "session_buffers_of",
]
