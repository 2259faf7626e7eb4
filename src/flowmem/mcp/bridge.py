"""``flowmem mcp`` with ``$FLOWMEM_URL``: a stdio server that passes every call to a flowmem server's ``/mcp``.

A client that can only start a command (Claude Desktop) reaches a shared ``flowmem
serve``: the process opens one streamable HTTP connection to ``<url>/mcp`` with the
Bearer token and forwards the tool and resource requests as they come, answering
with what the server answered. Every call acts as the token's user there, under the
server's limits; nothing is stored locally.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from flowmem import __version__

TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults: 30 s to connect and send, 300 s for an answer."""


def endpoint_of(url: str) -> str:
    """The ``/mcp`` endpoint of a server URL (given with or without it)."""
    base = url.rstrip("/")
    return base if base.endswith("/mcp") else base + "/mcp"


def forwarding_server(remote: ClientSession, instructions: str | None) -> Server[Any]:
    """A server whose tool and resource requests are answered by ``remote``."""

    async def list_tools(ctx: Any, params: Any) -> Any:
        return await remote.list_tools(params=params)

    async def call_tool(ctx: Any, params: Any) -> Any:
        return await remote.call_tool(params.name, params.arguments or {})

    async def list_resources(ctx: Any, params: Any) -> Any:
        return await remote.list_resources(params=params)

    async def list_templates(ctx: Any, params: Any) -> Any:
        return await remote.list_resource_templates(params=params)

    async def read_resource(ctx: Any, params: Any) -> Any:
        return await remote.read_resource(params.uri)

    return Server(
        "flowmem",
        version=__version__,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


async def bridge(url: str, token: str) -> None:
    """Serve stdio until the client closes it, forwarding to ``url``'s ``/mcp`` as ``token``."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
    async with (
        http,
        streamable_http_client(endpoint_of(url), http_client=http) as (read, write),
        ClientSession(read, write) as remote,
    ):
        info = await remote.initialize()
        server = forwarding_server(remote, info.instructions)
        async with stdio_server() as (stdin, stdout):
            await server.run(stdin, stdout, server.create_initialization_options())


def serve_bridge(url: str, token: str) -> None:
    """Run ``bridge`` (blocking)."""
    anyio.run(bridge, url, token)
