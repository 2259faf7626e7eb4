"""Structured request logs, and request counts: one JSON line per request on ``flowmem.http``.

The same middleware times each request for the metrics (``flowmem.metrics.request``:
method, route template, status, seconds) when the app counts (``create_app(metrics=True)``).
What a client chose is bounded in both (issue 38 §1): the method is one of
``flowmem.metrics.METHODS`` or ``other``, the route a template of the app or
``unrouted``, the status three digits; in the log line the path is cut at
``MAX_LOGGED_PATH`` characters and the client is an IP address or ``other``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem import metrics

log = logging.getLogger("flowmem.http")
UNROUTED = "unrouted"  # a request answered before routing (a 401 of the gate, a 429, a 404)
MAX_LOGGED_PATH = 512  # characters of a request's path a log line keeps


def logged_path(path: object) -> str | None:
    """The path as a log line shows it: at most ``MAX_LOGGED_PATH`` characters, then how many were cut."""
    if not isinstance(path, str):
        return None
    if len(path) <= MAX_LOGGED_PATH:
        return path
    return f"{path[:MAX_LOGGED_PATH]}…(+{len(path) - MAX_LOGGED_PATH} chars)"


def logged_client(scope: Scope) -> str | None:
    """The client's address as a log line shows it: an IP address, ``other`` for any other text.

    Behind a trusted proxy uvicorn takes it from ``X-Forwarded-For``: a header the
    client writes.
    """
    client = scope.get("client")
    if not client:
        return None
    host = client[0]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return metrics.OTHER


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
                            "method": metrics.method_label(scope.get("method")),
                            "path": logged_path(scope.get("path")),
                            "status": status,
                            "ms": round(seconds * 1000, 2),
                            "token_id": state.get("token_id"),
                            "client": logged_client(scope),
                        },
                        separators=(",", ":"),
                    )
                )
