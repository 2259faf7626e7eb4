"""Structured request logs, and request counts: one JSON line per request on ``flowmem.http``.

The same middleware times each request for the metrics (``flowmem.metrics.request``:
method, route template, status, seconds) when the app counts (``create_app(metrics=True)``).
"""

from __future__ import annotations

import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem import metrics

log = logging.getLogger("flowmem.http")
UNROUTED = "unrouted"  # a request answered before routing (a 401 of the gate, a 429, a 404)


class RequestLogMiddleware:
    """Log method, path, status, duration and the token id of every HTTP request; count it."""

    def __init__(self, app: ASGIApp, count: bool = False) -> None:
        self.app = app
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time the request; once its response has started, log one line and count it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        logging_on = log.isEnabledFor(logging.INFO)
        if not (logging_on or self.count):
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
            seconds = time.perf_counter() - started
            if self.count:  # the route's template, never the raw path (bounded labels)
                route = getattr(scope.get("route"), "path", None) or UNROUTED
                metrics.request(scope["method"], route, status, seconds)
            if logging_on:
                state = scope.get("state") or {}
                log.info(
                    json.dumps(
                        {
                            "event": "request",
                            "method": scope.get("method"),
                            "path": scope.get("path"),
                            "status": status,
                            "ms": round(seconds * 1000, 2),
                            "token_id": state.get("token_id"),
                            "client": (scope.get("client") or [None])[0],
                        },
                        separators=(",", ":"),
                    )
                )
