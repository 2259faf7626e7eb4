"""Past sessions as read-only resources: ``flowmem://sessions/{session_id}``.

A client that browses resources lists the caller's newest sessions (``LISTED``) and
attaches one: its JSON is the session (id, name, times) and the end of its
conversation within ``BUDGET`` tokens, a call never without its result
(``read_session``). Nothing is written through a resource.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import Resource

from flowmem.errors import FlowmemError, NotFoundError
from flowmem.mcp import sessions
from flowmem.mcp.answers import explain
from flowmem.mcp.caller import Caller

TEMPLATE = "flowmem://sessions/{session_id}"
BUDGET = 16_000
"""The token budget of a session resource's messages."""
LISTED = 50
"""The most sessions a resource listing names (newest first)."""


def uri_of(session_id: str) -> str:
    """The resource URI of a session."""
    return TEMPLATE.format(session_id=session_id)


def session_json(caller: Caller, session_id: str) -> str:
    """The JSON text of a session resource."""
    record = caller.services.sessions.load(caller.principal, session_id, "view")
    window = sessions.read_session(caller, record.id, BUDGET)
    return json.dumps(
        {**window, "name": record.name, "created_at": record.created_at, "updated_at": record.updated_at},
        ensure_ascii=False,
    )


def listed(caller: Caller) -> list[Resource]:
    """The caller's newest sessions as resources."""
    page = sessions.list_sessions(caller, LISTED, 0, None, None)["sessions"]
    return [
        Resource(
            uri=uri_of(s["id"]),
            name=s["name"] or s["id"],
            description=f"session {s['id']}: {s['messages']} messages",
            mime_type="application/json",
        )
        for s in page
    ]


def register(server: MCPServer, caller_of: Callable[[Any], Caller]) -> None:
    """Add the session resource template to ``server``."""

    @server.resource(
        TEMPLATE,
        name="session",
        title="A past session",
        description="A session of yours: its newest messages within 16,000 tokens, as JSON.",
        mime_type="application/json",
    )
    async def session_resource(session_id: str, ctx: Context) -> str:
        caller = caller_of(ctx)
        try:
            text: str = await caller.call(lambda: session_json(caller, session_id))
        except NotFoundError as exc:
            raise ResourceNotFoundError(explain(exc)) from exc
        except FlowmemError as exc:
            raise ResourceError(explain(exc)) from exc
        return text

    del session_resource
