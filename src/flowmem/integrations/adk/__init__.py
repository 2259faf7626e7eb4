"""Google ADK integration (the ``adk`` extra): a session service whose sessions are flowmem's.

``FlowmemSessionService`` is a ``google.adk.sessions.BaseSessionService``, built like
ADK's ``DatabaseSessionService``: ``FlowmemSessionService("sqlite:///adk.db")``,
``FlowmemSessionService("postgresql://…")`` or ``FlowmemSessionService(memory_service)``.
Its events are rows of the session's buffer ``adk`` under the buffer rules (MEM-1,
MEM-3), app and user state are shared as ADK shares them, and an append from a stale
session object raises ``StaleSessionError`` (docs/integrations.md, decision 0053).
"""

from __future__ import annotations

from flowmem.integrations import require

require("google.adk", "adk")

from flowmem.integrations.adk.service import FlowmemSessionService  # noqa: E402

__all__ = ["FlowmemSessionService"]
