"""``/mcp`` built on its first request: a server never asked for it never imports the ``mcp`` package.

Importing the SDK (its ~570 pydantic models) cost every server process ~0.4 s of CPU and
~26 MB at start, whether ``/mcp`` was used or not (decision 0157). ``OnDemandMCP``
stands at ``/mcp`` from the start; the first request to it imports the SDK in a worker
thread (the event loop keeps answering), builds the endpoint (``flowmem.mcp.http``) and
starts its session manager in a task group the app's lifespan holds, so the manager
runs, and stops, with the app as it did when the lifespan started it. Each run of the
lifespan starts its own manager (one runs once). An SDK that is found but fails to
import (a dependency of it missing) leaves ``/mcp`` answering 404, as an app without
the SDK does.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus
from starlette.exceptions import HTTPException
from starlette.types import Receive, Scope, Send

from flowmem.mcp.caller import Services

if TYPE_CHECKING:
    from flowmem.mcp.http import MCPEndpoint

Runner = Callable[[Callable[[], Any]], Awaitable[Any]]


def sdk_installed() -> bool:
    """Whether the ``mcp`` package can be imported (it is on the path), without importing it."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except ValueError:  # in sys.modules without a spec: imported already
        return sys.modules.get("mcp") is not None


def _endpoint_class() -> type[MCPEndpoint]:
    """``MCPEndpoint``, importing the SDK (run in a worker thread)."""
    from flowmem.mcp.http import MCPEndpoint

    return MCPEndpoint


async def _serve(endpoint: MCPEndpoint, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Run a session manager of ``endpoint`` until cancelled (the app's lifespan ends)."""
    async with endpoint.running():
        task_status.started()
        await anyio.sleep_forever()


class OnDemandMCP:
    """The ASGI app at ``/mcp``: the endpoint and its session manager made by the first request."""

    def __init__(self, services: Services, run: Runner) -> None:
        self._services, self._run = services, run
        self.endpoint: MCPEndpoint | None = None  # built by the first request
        self._absent = False  # the SDK failed to import: /mcp answers 404
        self._tasks: TaskGroup | None = None  # the running lifespan's: the session manager runs in it
        self._lock: anyio.Lock | None = None
        self._serving = False  # a session manager runs in this run of the lifespan

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Hold, while the app runs, the task group a request starts the session manager in."""
        async with anyio.create_task_group() as tasks:
            self._tasks, self._lock, self._serving = tasks, anyio.Lock(), False
            try:
                yield
            finally:
                self._tasks, self._serving = None, False
                tasks.cancel_scope.cancel()  # stops the session manager, if a request started one

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request to ``/mcp``, building and starting the endpoint first if it is the first."""
        endpoint = self.endpoint if self._serving else await self._start()
        assert endpoint is not None
        await endpoint(scope, receive, send)

    async def _start(self) -> MCPEndpoint:
        """The endpoint, built once and its session manager started once per run of the lifespan."""
        tasks, lock = self._tasks, self._lock
        if tasks is None or lock is None:
            raise RuntimeError("/mcp is served only while the app's lifespan runs")
        async with lock:  # concurrent first requests: one builds and starts, the others wait
            if self._absent:
                raise HTTPException(status_code=404)
            if self.endpoint is None:
                try:
                    endpoint_class = await anyio.to_thread.run_sync(_endpoint_class)
                except ImportError as exc:
                    if exc.name is None or exc.name.startswith("flowmem"):
                        raise
                    self._absent = True
                    raise HTTPException(status_code=404) from None
                self.endpoint = endpoint_class(self._services, self._run)
            if not self._serving:
                await tasks.start(_serve, self.endpoint)
                self._serving = True
            return self.endpoint
