"""The session tools' names, argument schemas and descriptions (``flowmem.mcp.sessions`` does the work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from flowmem.formats import DETECTED
from flowmem.mcp import sessions
from flowmem.mcp.answers import answered, tool_errors
from flowmem.mcp.caller import Caller
from flowmem.mcp.records import RequestId

SessionId = Annotated[
    str,
    Field(description="A session id (list_sessions gives yours; a new id starts a session on its first append)."),
]
Time = Annotated[
    float | str | None,
    Field(description="Epoch seconds or an ISO-8601 time, e.g. 2026-12-06T10:00:00Z."),
]
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def register(server: MCPServer, caller_of: Callable[[Any], Caller]) -> None:
    """Add the session tools to ``server``."""

    @server.tool(name="list_sessions", annotations=READ)
    @tool_errors
    async def list_sessions(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
        since: Time = None,
        until: Time = None,
    ) -> CallToolResult:
        """List your past sessions, newest first (optionally only those active between since and until)."""
        return await answered(caller_of(ctx), lambda caller: sessions.list_sessions(caller, limit, offset, since, until))

    @server.tool(name="search_sessions", annotations=READ)
    @tool_errors
    async def search_sessions(
        query: Annotated[str, Field(description="Text to find in the sessions' messages (any case).")],
        ctx: Context,
        since: Time = None,
        until: Time = None,
        limit: Annotated[int, Field(ge=1, le=50, description="The most sessions returned.")] = 10,
    ) -> CallToolResult:
        """Find your past sessions whose messages contain some text; each with the matching messages."""
        return await answered(caller_of(ctx), lambda caller: sessions.search_sessions(caller, query, since, until, limit))

    @server.tool(name="read_session", annotations=READ)
    @tool_errors
    async def read_session(
        session: SessionId,
        ctx: Context,
        max_tokens: Annotated[
            int, Field(ge=1, le=1_000_000, description="The token budget of the messages returned.")
        ] = 4000,
    ) -> CallToolResult:
        """Read the most recent part of a session that fits a token budget (a tool call always with its result)."""
        return await answered(caller_of(ctx), lambda caller: sessions.read_session(caller, session, max_tokens))

    @server.tool(
        name="append_messages",
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True, open_world_hint=False),
    )
    @tool_errors
    async def append_messages(
        session: SessionId,
        messages: Annotated[
            list[dict[str, Any]],
            Field(
                description="Messages in order: {role: user|assistant|system|tool, content, tool_calls?, tool_call_id?}."
            ),
        ],
        ctx: Context,
        request_id: RequestId = None,
    ) -> CallToolResult:
        """Append messages to a session (a new id starts one). A tool result or a turn appended twice is kept once."""
        return await answered(caller_of(ctx), lambda caller: sessions.append_messages(caller, session, messages, request_id))

    @server.tool(name="check_messages", annotations=READ)
    @tool_errors
    async def check_messages(
        messages: Annotated[
            list[Any] | dict[str, Any],
            Field(description="A message list, or a provider's request body (OpenAI, Anthropic, Gemini, Responses)."),
        ],
        ctx: Context,
        format: Annotated[
            str | None,
            Field(description=f"The format, one of {', '.join(DETECTED)}; detected when omitted."),
        ] = None,
    ) -> CallToolResult:
        """Check a history for what a provider would refuse (an unanswered tool call, a misplaced result…)."""
        return await answered(caller_of(ctx), lambda caller: sessions.check_messages(messages, format))

    del list_sessions, search_sessions, read_session, append_messages, check_messages
