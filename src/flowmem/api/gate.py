"""The request gate (ASGI middleware): protocol checks, authentication, then the body.

Every HTTP request passes here before any route, in this order:

1. framing: two ``Authorization`` headers (400 ``duplicate_header``), or
   ``Transfer-Encoding`` together with ``Content-Length`` (400
   ``ambiguous_length``: the two can frame different bodies, which is how
   requests are smuggled past a proxy) are refused, and the connection closed;
2. authentication: except on the open paths (``errors.OPEN_PATHS``: health,
   OpenAPI, docs) the bearer token is looked up before the body is read, and a
   request without a valid one is answered 401 with its body unread. The
   principal is left in the request state (``principal``, ``token_id``), so the
   routes do not look the token up again. With a store whose calls are local
   (``StorePool.inline``) the lookup runs on the event loop, else in a store
   thread;
3. the query (a parameter given twice is 422) and the body (``flowmem.api.limits``,
   all checks linear in its size). A body larger than ``limits.INLINE_BODY_BYTES``
   is checked and parsed in a thread, and its route validates it in a thread too
   (``LARGE_BODY``), so the event loop keeps answering meanwhile; the parsed
   document is left in the scope (``PARSED_BODY``) for the routes that read their
   body themselves (``flowmem.api.fast.route``).

A ``HEAD`` request is served as the ``GET`` of the same path without the body.
A refused request never reaches a route, so it changes nothing.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem.access import Principal
from flowmem.api.errors import OPEN_PATHS, error_body, status_for
from flowmem.api.limits import (
    BODY_TIMEOUT,
    INLINE_BODY_BYTES,
    MAX_BODY_BYTES,
    TOO_LARGE,
    TOO_SLOW,
    parse_body,
    receive_by,
    repeated_query_key,
)
from flowmem.auth import authenticate, bearer_token
from flowmem.errors import AuthenticationError, FlowmemError
from flowmem.store.base import Store

if TYPE_CHECKING:
    from flowmem.api.deps import Services

log = logging.getLogger("flowmem.http")

PARSED_BODY = "flowmem.body"  # scope key: the JSON document of an accepted, non-empty body
LARGE_BODY = "flowmem.large_body"  # scope key: True when that body is validated off the loop

DUPLICATE_AUTHORIZATION = (400, "duplicate_header", "the Authorization header is given twice")
AMBIGUOUS_LENGTH = (
    400,
    "ambiguous_length",
    "Transfer-Encoding and Content-Length must not both be given",
)


async def send_error(
    send: Send,
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    *,
    close: bool = True,
) -> None:
    """Answer with the JSON error envelope (``close``: and end the connection after it)."""
    payload = json.dumps(error_body(code, message, details)).encode("utf-8")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode("ascii")),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _without_body(send: Send) -> Send:
    """Wrap ``send`` so a response keeps its status and headers but sends no body (HEAD)."""

    async def head(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return head


def request_principal(request: Request, token: str, store: Store) -> Principal:
    """The principal the gate found for ``request``, else look ``token`` up in ``store`` (blocking).

    Without the gate (an app assembled otherwise) the lookup runs here, in the
    route's own store call, and its principal is left in the request state.
    Raise AuthenticationError when the token is unknown or revoked.
    """
    found = getattr(request.state, "principal", None)
    if isinstance(found, Principal):
        return found
    principal = authenticate(store, token)
    request.state.token_id = principal.token_id
    request.state.principal = principal
    return principal


class GateMiddleware:
    """Refuse bad framing, authenticate, then check and parse the body; replay it after."""

    def __init__(
        self, app: ASGIApp, services: Services, body_timeout: float | None = BODY_TIMEOUT
    ) -> None:
        """Gate the requests to ``app``; tokens are looked up in ``services.store``.

        The whole body must arrive within ``body_timeout`` seconds (408
        ``request_timeout`` and the connection closed after; None or 0: no bound).
        """
        self.app = app
        self.services = services
        self.body_timeout = body_timeout

    async def _principal(self, token: str) -> Principal:
        """Look the token up: on the loop for an inline store, else in a store thread."""
        return await self.services.pool.read(authenticate, self.services.store, token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a refused request here; pass an accepted one on with its body replayed."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = scope["method"] == "HEAD"
        if head:
            send = _without_body(send)  # refusals included
        authorization = declared = content_type = None
        authorizations = 0
        chunked = False
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                authorization = value
                authorizations += 1
            elif name == b"content-length":
                declared = value
            elif name == b"content-type":
                content_type = value
            elif name == b"transfer-encoding":
                chunked = True
        if authorizations > 1:
            await send_error(send, *DUPLICATE_AUTHORIZATION)
            return
        if chunked and declared is not None:
            await send_error(send, *AMBIGUOUS_LENGTH)
            return
        has_body = chunked or (declared is not None and declared.strip() not in (b"", b"0"))
        if scope["path"] not in OPEN_PATHS:
            try:
                header = None if authorization is None else authorization.decode("latin-1")
                principal = await self._principal(bearer_token(header))
            except AuthenticationError as exc:
                await send_error(send, 401, exc.code, exc.message, close=has_body)
                return
            except FlowmemError as exc:  # e.g. the store is down
                status, said = status_for(exc), exc.message
                if status >= 500:
                    log.error("authentication failed: %s", exc.message, exc_info=exc)
                    said = "the server could not complete the request"
                await send_error(send, status, exc.code, said)
                return
            state = scope.setdefault("state", {})
            state["principal"] = principal
            state["token_id"] = principal.token_id
        repeated = repeated_query_key(scope.get("query_string", b""))
        if repeated is not None:
            text = f"query parameter {repeated!r} is given more than once"
            details = [{"field": f"query.{repeated}", "message": text}]
            await send_error(send, 422, "invalid_input", text, details, close=has_body)
            return
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await send_error(send, 400, "invalid_body", "Content-Length is not a number")
                return
            if length > MAX_BODY_BYTES:
                await send_error(send, *TOO_LARGE)
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        deadline = time.monotonic() + self.body_timeout if self.body_timeout else None
        while more:
            received = await (receive() if deadline is None else receive_by(receive, deadline))
            if received is None:
                await send_error(send, *TOO_SLOW)
                return
            message = received
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await send_error(send, *TOO_LARGE)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        media = content_type.decode("latin-1") if content_type else None
        large = len(body) > INLINE_BODY_BYTES
        if large:
            refusal, document = await run_in_threadpool(parse_body, body, media)
        else:
            refusal, document = parse_body(body, media)
        if refusal is not None:
            await send_error(send, *refusal)
            return
        if head:
            scope = {**scope, "method": "GET"}  # a copy: the outer layers log HEAD
        if body:
            scope[PARSED_BODY] = document  # parsed once: a route may take it from here
            if large:
                scope[LARGE_BODY] = True
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
