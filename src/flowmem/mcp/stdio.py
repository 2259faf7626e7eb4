"""``flowmem mcp`` over stdio on a local database: every call acts as the process's user.

The client starts the process (its ``command`` configuration); the process opens the
database (``--database`` or ``$FLOWMEM_DATABASE_URL``, as every command does) and
serves the tools on stdin/stdout until the client closes them. Store work runs in
worker threads, so calls of one client run side by side as requests of
``flowmem serve`` do; several processes on one database are serialized by the
store (MEM-12), as several servers are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from flowmem.mcp.caller import Caller, Services, local_principal
from flowmem.mcp.server import FlowmemMCP, build_server
from flowmem.service import MemoryService
from flowmem.sessions import SessionService
from flowmem.store.base import Store


async def in_thread(work: Callable[[], Any]) -> Any:
    """Run blocking store work in a worker thread."""
    return await anyio.to_thread.run_sync(work)


def local_server(store: Store, user: str) -> FlowmemMCP:
    """The server over ``store`` whose every call acts as ``user`` (who may create sessions)."""
    memory = MemoryService(store)
    caller = Caller(local_principal(user), Services(memory, SessionService(store, memory)), in_thread)
    return build_server(lambda _ctx: caller)


def serve_stdio(store: Store, user: str) -> None:
    """Serve the tools on stdin/stdout until the client closes them, then close ``store``."""
    server = local_server(store, user)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        store.close()
