"""Request body limits, enforced before any route runs (ASGI middleware).

A body is refused before any work when it is larger than ``MAX_BODY_BYTES`` (413,
checked against ``Content-Length`` first and then counted while streaming), not
JSON-typed (415), not valid UTF-8 JSON (400 ``invalid_json``), nested
``MAX_DEPTH`` levels deep or more (400 ``body_too_deep``, checked without
recursion), or not an object or an array at the top (400 ``invalid_body``); text anywhere in
it that cannot be stored — a lone surrogate, ``"\\ud800"`` — is 422
``invalid_text`` (``flowmem.core.check_storable``, the same decision the services
make); a query parameter given twice is 422 (every parameter of this API is a
single value).
A refused request never reaches a route, so it changes nothing. An accepted
body's parsed JSON is left in the scope (``PARSED_BODY``) for the routes that
read their body themselves (``flowmem.api.direct``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem.api.errors import error_body
from flowmem.core import check_storable
from flowmem.core.storable import json_text_may_hold_surrogates
from flowmem.errors import InvalidTextError

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64  # a body nested this deep or deeper is refused
TOO_LARGE = (413, "payload_too_large", f"the body is larger than {MAX_BODY_BYTES} bytes")

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")  # depth does not depend on the bracket kind
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth_at_least(body: bytes, limit: int) -> bool:
    """True when the JSON text ``body`` nests ``limit`` levels or deeper.

    Strings are blanked with a regular expression, braces become brackets and
    everything else is deleted; then each pass removes every innermost ``[]`` pair
    (one non-overlapping scan), so a balanced text of depth d is empty after
    exactly d passes. No recursion, and at most ``limit`` linear passes, all in C.
    """
    brackets = _STRING.sub(b"", body).translate(_AS_SQUARE, _NOT_BRACKETS)
    passes = 0
    while brackets:
        if passes >= limit or b"[" * (limit - passes) in brackets:
            return True  # a run of opening brackets that long nests at least that deep
        reduced = brackets.replace(b"[]", b"")
        if reduced == brackets:
            return False  # unbalanced: the JSON parser reports it
        brackets = reduced
        passes += 1
    return passes >= limit


def _is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


PARSED_BODY = "flowmem.body"  # scope key: the JSON document of an accepted, non-empty body


def parse_body(body: bytes, content_type: str | None) -> tuple[tuple[Any, ...] | None, Any]:
    """Return (refusal, None) for a body that must be refused, else (None, its JSON document).

    A refusal is (status, code, message) or, for a 422, (status, code, message,
    details). An empty body is accepted with document None.
    """
    if len(body) > MAX_BODY_BYTES:
        return TOO_LARGE, None
    if not body:
        return None, None
    if content_type is None or not _is_json_type(content_type):
        return (
            415,
            "unsupported_media_type",
            "the body must be JSON (Content-Type: application/json)",
        ), None
    # a text nested MAX_DEPTH deep has at least that many brackets on each side
    if len(body) >= 2 * MAX_DEPTH and nesting_depth_at_least(body, MAX_DEPTH):
        return (400, "body_too_deep", f"the body is nested {MAX_DEPTH} levels deep or more"), None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return (400, "invalid_json", "the body is not valid JSON"), None
    if not isinstance(document, (dict, list)):
        return (400, "invalid_body", "the body must be a JSON object or array"), None
    unstorable = unstorable_text(body, document)
    if unstorable is not None:
        field = str(unstorable.details.get("field", "body"))
        details = [{"field": field, "message": unstorable.message}]
        return (422, unstorable.code, unstorable.message, details), None
    return None, document


def unstorable_text(body: bytes, document: Any) -> InvalidTextError | None:
    """Return the refusal of a parsed body holding text flowmem cannot store, else None.

    The raw text is scanned first (``json_text_may_hold_surrogates``: one linear pass
    in C); only a body that may hold a lone surrogate is walked, by the one decision
    ``check_storable``.
    """
    if not json_text_may_hold_surrogates(body):
        return None
    try:
        check_storable(document, "body")
    except InvalidTextError as exc:
        return exc
    return None


def repeated_query_key(query: bytes) -> str | None:
    """Return a query parameter given more than once (this API has none that repeat)."""
    if b"&" not in query:
        return None
    seen: set[str] = set()
    for key, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if key in seen:
            return key
        seen.add(key)
    return None


async def _send_error(
    send: Send,
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
) -> None:
    payload = json.dumps(error_body(code, message, details)).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode("ascii")),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class BodyLimitMiddleware:
    """Check the query and the body before the app sees them; replay the body after."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an unacceptable body with its status; pass an acceptable one on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        repeated = repeated_query_key(scope.get("query_string", b""))
        if repeated is not None:
            text = f"query parameter {repeated!r} is given more than once"
            details = [{"field": f"query.{repeated}", "message": text}]
            await _send_error(send, 422, "invalid_input", text, details)
            return
        declared = content_type = None
        for name, value in scope.get("headers", ()):
            name = name.lower()
            if name == b"content-length":
                declared = value
            elif name == b"content-type":
                content_type = value
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await _send_error(send, 400, "invalid_body", "Content-Length is not a number")
                return
            if length > MAX_BODY_BYTES:
                await _send_error(send, *TOO_LARGE)
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await _send_error(send, *TOO_LARGE)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        refusal, document = parse_body(
            body, content_type.decode("latin-1") if content_type else None
        )
        if refusal is not None:
            await _send_error(send, *refusal)
            return
        if body:
            scope[PARSED_BODY] = document  # parsed once: a route may take it from here
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def json_depth(value: Any) -> int:
    """Return the nesting depth of a parsed JSON value, iteratively (used by tests)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest
