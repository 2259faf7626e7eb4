"""Structured request logs: one JSON line per request on the ``flowmem.http`` logger."""

from __future__ import annotations

import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("flowmem.http")


class RequestLogMiddleware:
    """Log method, path, status, duration and the token id of every HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time the request and log one line when its response has started."""
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            state = scope.get("state") or {}
            log.info(
                json.dumps(
                    {
                        "event": "request",
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status,
                        "ms": round((time.perf_counter() - started) * 1000, 2),
                        "token_id": state.get("token_id"),
                        "client": (scope.get("client") or [None])[0],
                    },
                    separators=(",", ":"),
                )
            )
