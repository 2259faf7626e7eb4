"""``/mcp`` in ``flowmem serve``: the tools over streamable HTTP, as the Bearer token's principal.

The app's request gate (``flowmem.api.gate``) authenticates every request to ``/mcp``
before anything else runs (401 without a valid token, its body unread), applies the
body limits, and the rate limits come before it, as for every REST route. The
principal it leaves in the request state is the principal of every tool call the
request carries: one user's client reaches only that user's memory and sessions.

The transport is stateless (a JSON answer per POST, no server-side MCP session), so
any worker of a multi-worker server answers any request, and nothing is kept
between requests but what the store keeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from flowmem.access import Principal
from flowmem.errors import AuthenticationError
from flowmem.mcp.caller import Caller, Services
from flowmem.mcp.server import build_server, request_of

PATH = "/mcp"

Runner = Callable[[Callable[[], Any]], Awaitable[Any]]


def principal_of(ctx: Any) -> Principal:
    """The principal the gate left on the call's HTTP request; AuthenticationError when there is none."""
    request = request_of(ctx)
    found = None if request is None else request.scope.get("state", {}).get("principal")
    if not isinstance(found, Principal):
        raise AuthenticationError("no authenticated principal on this request: send a Bearer token")
    return found


class MCPEndpoint:
    """The ASGI app served at ``/mcp`` and the lifespan its session manager needs."""

    def __init__(self, services: Services, run: Runner) -> None:
        self.server = build_server(lambda ctx: Caller(principal_of(ctx), services, run))
        self._new_manager()

    def _new_manager(self) -> None:
        """A new session manager (one runs once: an app whose lifespan runs again needs another)."""
        # the gate and the REST API's own checks guard the host: the SDK's DNS-rebinding
        # check would refuse every Host but localhost
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        # builds the session manager; its own Starlette app (routing, lifespan) is not used
        self.server.streamable_http_app(json_response=True, stateless_http=True, transport_security=security)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run a session manager while the app runs (its lifespan holds it)."""
        self._new_manager()
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request to ``/mcp`` (POST a JSON-RPC message; GET and DELETE as the protocol says)."""
        await self.server.session_manager.handle_request(scope, receive, send)
