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
from typing import Any

from flowmem.errors import ConfigurationError
from flowmem.store.heads.facts import (
    CONVERSATION_LINE,
    GRAPH_LINE,
    MAX_SESSIONS,
    BufferCount,
    SessionBuffers,
    check_sessions,
    first_line,
    head_id,
    is_framework_line,
    pick_place,
)

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
