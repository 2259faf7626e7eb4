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

from typing import Any

from flowmem.store.heads import facts
from flowmem.store.heads.facts import *  # noqa: F403 (the facts are this package's names)
from flowmem.store.heads.facts import SessionBuffers
from flowmem.store.values import PerBackend


def _is_own(store: Any) -> bool:
    return all(hasattr(store, name) for name in ("buffers", "newest", "graph_lines"))


session_buffers_of = PerBackend[SessionBuffers](
    "flowmem.store.heads", "Buffers", "SessionBuffers", "list a session's buffers", _is_own
)
"""The ``SessionBuffers`` of a store: itself when it has one, else this package's for its backend.

ConfigurationError for a store of another kind.
"""


__all__ = [*facts.__all__, "session_buffers_of"]
