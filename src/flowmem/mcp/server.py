"""``build_server``: the flowmem MCP server, its tools and resources, for one way of finding the caller.

The transports differ only in how a call's ``Caller`` is found (``caller_of``): the
``flowmem mcp`` process's own user over a local database (``stdio``), or the Bearer
token's principal that the HTTP gate left on the request (``http``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import (
    CallToolResult,
    InputRequiredResult,
    ListResourcesResult,
    PaginatedRequestParams,
)
from pydantic import ValidationError

from flowmem import __version__
from flowmem.errors import FlowmemError
from flowmem.mcp import graph_tools, records, resources, session_tools
from flowmem.mcp.answers import arguments_refused
from flowmem.mcp.caller import Caller

INSTRUCTIONS = """flowmem keeps your memory across sessions and clients.
- remember / recall / list_memories / forget: facts under keys, in your user memory or one session's.
- list_sessions / search_sessions / read_session: past conversations (read_session fits a token budget).
- append_messages: record messages in a session (a repeat is stored once); check_messages: what a provider would refuse.
- create_entities … open_nodes: a knowledge graph (the reference memory server's tools)."""

CallerOf = Callable[[Any], Caller]
"""Given a tool's ``Context`` (or the request context of a listing), the call's ``Caller``."""


class FlowmemMCP(MCPServer[Any]):
    """An ``MCPServer`` whose resource listing names the caller's own sessions."""

    def __init__(self, caller_of: CallerOf, tools: Sequence[Tool] = ()) -> None:
        # the SDK configures the root logger (``logging.basicConfig`` with its own handler):
        # the host's logging (``flowmem serve``'s) is put back as it was
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        super().__init__(
            name="flowmem",
            title="flowmem memory",
            version=__version__,
            instructions=INSTRUCTIONS,
            log_level="WARNING",
            tools=list(tools),
        )
        root.handlers[:] = handlers
        root.setLevel(level)
        self.caller_of = caller_of

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; arguments its schema refuses are a tool error naming each one (``invalid_arguments``)."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return arguments_refused(name, exc.__cause__)
            raise

    async def _handle_list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        """The static resources (none) and the caller's newest sessions."""
        found = await self.list_resources()
        try:
            caller = self.caller_of(ctx)
            found += await caller.call(lambda: resources.listed(caller))
        except FlowmemError:
            pass  # a caller without sessions to list (a service token) lists none
        return ListResourcesResult(resources=found)


def request_of(ctx: Any) -> Any:
    """The transport's request object of a tool ``Context`` or a ``ServerRequestContext`` (None on stdio)."""
    if isinstance(ctx, Context):
        ctx = ctx.request_context
    return getattr(ctx, "request", None)


def build_server(caller_of: CallerOf) -> FlowmemMCP:
    """The server with every tool (records, sessions, the knowledge graph) and the session resources."""
    server = FlowmemMCP(caller_of, _tools())
    resources.register(server, caller_of)
    return server


def _caller_of_the_server(ctx: Any) -> Caller:
    """A tool call's ``Caller``, as the server the call came to finds it (its ``caller_of``)."""
    server: FlowmemMCP = ctx.mcp_server
    return server.caller_of(ctx)


@functools.cache
def _tools() -> tuple[Tool, ...]:
    """Every tool, built once per process and shared by every server (``build_server``).

    Building them (a pydantic model and a JSON schema per tool) was nine tenths of
    ``create_app``'s time, paid again by every app a process made (each test's). A
    shared tool asks the server of its call for the ``Caller`` (``ctx.mcp_server``),
    so it acts for that server's transport and services alone.
    """
    prototype = FlowmemMCP(_caller_of_the_server)
    for part in (records, session_tools, graph_tools):
        part.register(prototype, _caller_of_the_server)
    return tuple(prototype._tool_manager.list_tools())  # noqa: SLF001 (the SDK lists Tool objects only here)
