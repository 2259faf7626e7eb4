"""Reading a request: the gate (ASGI middleware), with the limits on a body and how it is parsed.

Every HTTP request passes here before any route, in this order:

1. framing: two ``Authorization`` headers (400 ``duplicate_header``), or
   ``Transfer-Encoding`` together with ``Content-Length`` (400
   ``ambiguous_length``: the two can frame different bodies, which is how
   requests are smuggled past a proxy) are refused, and the connection closed;
2. authentication: except on the open paths (``errors.OPEN_PATHS``: health,
   OpenAPI, docs, the inspector's page and files) the bearer token is looked up before the body is read, and a
   request without a valid one is answered 401 with its body unread. The
   principal is left in the request state (``principal``, ``token_id``), so the
   routes do not look the token up again. With a store whose calls are local
   (``StorePool.inline``) the lookup runs on the event loop, else in a store
   thread;
3. the query (a parameter given twice is 422) and the body (``parse_body``, below;
   all checks linear in its size). A body larger than ``INLINE_BODY_BYTES``
   is checked and parsed in a thread, and its route validates it in a thread too
   (``LARGE_BODY``), so the event loop keeps answering meanwhile; the parsed
   document is left in the scope (``PARSED_BODY``) for the routes that read their
   body themselves (``flowmem.api.fast.route``).

**The body.** A body is refused before any route runs when it is larger than
the memory service's ``Limits.body_bytes`` (413, checked against ``Content-Length``
first and then counted while streaming; it follows ``FLOWMEM_MAX_MESSAGE_BYTES`` and
``FLOWMEM_MAX_RECORD_BYTES``, default ``MAX_BODY_BYTES``), does not arrive within ``BODY_TIMEOUT`` (408), is not JSON-typed
(415), has more than ``MAX_VALUES`` values (413 ``too_many_values``), is nested
``MAX_DEPTH`` levels deep or more (400 ``body_too_deep``), is not valid UTF-8 JSON
(400 ``invalid_json``) or is not an object or an array at the top (400
``invalid_body``); text anywhere in it that cannot be stored — a lone surrogate,
``"\\ud800"`` — is 422 ``invalid_text`` (``flowmem.core.check_storable``, the same
decision the services make).

Every body check is linear in the body's size and made by a few whole-buffer C
calls (``bytes.replace``, ``bytes.count``, ``bytes.split``, ``bytes.translate``):
no per-byte Python loop, no regular expression, no recursion. The value cap bounds
the work of ``json.loads`` and of validation, which create one Python object per
value and hold the interpreter lock while they do (a thread does not help them).

A ``HEAD`` request is served as the ``GET`` of the same path without the body.
A refused request never reaches a route, so it changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem.access import Principal
from flowmem.api.errors import (
    NAMED_CONDITIONS,
    OPEN_PATHS,
    OPEN_PREFIXES,
    SERVER_MESSAGE,
    SERVER_MESSAGES,
    error_body,
    record_store_fault,
    status_for,
    what_to_do,
)
from flowmem.api.principal import LARGE_BODY, PARSED_BODY
from flowmem.auth import authenticate, bearer_token, hash_token, well_formed
from flowmem.core import check_storable
from flowmem.core.storable import json_text_may_hold_surrogates
from flowmem.errors import AuthenticationError, FlowmemError, InvalidTextError, StoreError
from flowmem.limits import ENV, Limits

if TYPE_CHECKING:
    from flowmem.api.services import Services

log = logging.getLogger("flowmem.http")

MAX_BODY_BYTES = Limits().body_bytes  # the default: the largest default message + 1 MiB
BODY_TIMEOUT = 30.0  # seconds a whole request body may take to arrive (408 after)
TOO_SLOW = (408, "request_timeout", "the request body did not arrive in time")
MAX_DEPTH = 64  # a body nested this deep or deeper is refused
MAX_VALUES = 100_000  # commas and opening brackets outside strings, see ``value_count``
INLINE_BODY_BYTES = 64 * 1024  # a larger body is parsed and validated in a thread


def too_large(limit: int) -> tuple[int, str, str]:
    """The refusal of a body over ``limit`` bytes, saying which settings raise it."""
    return (
        413,
        "payload_too_large",
        f"the body is larger than {limit} bytes, the largest message or record the server "
        f"stores plus 1 MiB: raise ${ENV['message_bytes']} (or ${ENV['record_bytes']}) "
        "on the server, `flowmem serve --max-message-bytes N`",
    )


TOO_LARGE = too_large(MAX_BODY_BYTES)
TOO_MANY_VALUES = (413, "too_many_values", f"the body has more than {MAX_VALUES} JSON values")
TOO_DEEP = (400, "body_too_deep", f"the body is nested {MAX_DEPTH} levels deep or more")

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b"[]{},")
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")  # depth does not depend on the bracket kind


def _unescaped(body: bytes) -> bytes:
    """Drop every escape that could hide a quote, so each quote left opens or closes a string.

    A backslash escapes the byte after it (in valid JSON only inside a string):
    pairs of backslashes go first, left to right as a string reads them, then
    escaped quotes. Two linear passes.
    """
    if b"\\\\" in body:
        body = body.replace(b"\\\\", b"")
    return body.replace(b'\\"', b"")


def _outside_strings(text: bytes) -> bytes:
    """The bytes of an unescaped text outside its strings (an unterminated one runs to the end)."""
    return b"".join(text.split(b'"')[::2])


def structure(body: bytes) -> bytes:
    """Return the brackets and commas of the JSON text ``body`` that lie outside its strings.

    Linear: a few whole-buffer passes. For a text that is not valid JSON the
    result may be wrong, but the JSON parser refuses such a text anyway.
    """
    return _outside_strings(_unescaped(body)).translate(None, _NOT_STRUCTURE)


def value_count(shape: bytes) -> int:
    """Count the values of a ``structure``: its commas and opening brackets.

    Every array element and object member but the first of its container follows
    a comma, and every container opens with a bracket: within one of the count of
    values.
    """
    return shape.count(b",") + shape.count(b"[") + shape.count(b"{")


def depth_at_least(shape: bytes, limit: int) -> bool:
    """True when the brackets of ``shape`` nest ``limit`` levels or deeper.

    Each pass removes every innermost bracket pair (one non-overlapping scan), so
    a balanced text of depth d is empty after exactly d passes: at most ``limit``
    passes, each linear.
    """
    brackets = shape.translate(_AS_SQUARE, b",")
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


def nesting_depth_at_least(body: bytes, limit: int) -> bool:
    """True when the JSON text ``body`` nests ``limit`` levels or deeper (strings ignored)."""
    return depth_at_least(structure(body), limit)


def _is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def shape_refusal(body: bytes) -> tuple[int, str, str] | None:
    """Return the refusal of a body with too many values or too deep, else None (linear)."""
    opening = body.count(b"[") + body.count(b"{")
    if opening < MAX_DEPTH and opening + body.count(b",") <= MAX_VALUES:
        return None  # counted with the strings: cannot be over either limit without them
    text = _unescaped(body)
    # each string is a value or an object key, and there are no more keys than
    # values: more than 4 (MAX_VALUES + 1) quotes mean more than MAX_VALUES + 1
    # values (checked first: splitting at every quote costs an object per string)
    if text.count(b'"') > 4 * (MAX_VALUES + 1):
        return TOO_MANY_VALUES
    shape = _outside_strings(text).translate(None, _NOT_STRUCTURE)
    if value_count(shape) > MAX_VALUES:
        return TOO_MANY_VALUES
    if depth_at_least(shape, MAX_DEPTH):
        return TOO_DEEP
    return None


def parse_body(
    body: bytes, content_type: str | None, max_bytes: int = MAX_BODY_BYTES
) -> tuple[tuple[Any, ...] | None, Any]:
    """Return (refusal, None) for a body that must be refused, else (None, its JSON document).

    A refusal is (status, code, message) or, for a 422, (status, code, message,
    details). An empty body is accepted with document None. Linear in the body's size.
    ``max_bytes``: the body limit (0: none).
    """
    if max_bytes and len(body) > max_bytes:
        return too_large(max_bytes), None
    if not body:
        return None, None
    if content_type is None or not _is_json_type(content_type):
        return (
            415,
            "unsupported_media_type",
            "the body must be JSON (Content-Type: application/json)",
        ), None
    refusal = shape_refusal(body)
    if refusal is not None:
        return refusal, None
    try:
        # UTF-8 only (a leading BOM is ignored): ``json.loads`` would also take
        # UTF-16 and UTF-32 bytes, whose structure the scan above cannot read
        document = json.loads(body.decode("utf-8-sig"))
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


async def receive_by(receive: Receive, deadline: float) -> Message | None:
    """Return the next ASGI message, or None when ``deadline`` (monotonic) passes first.

    uvicorn has no timeout on reading a body: without this a client that sends a
    Content-Length and then stalls holds its connection and task forever.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    try:
        # a timer on the running task, not ``wait_for``'s extra task per message:
        # this runs for every request, and the task cost 60 us of an append's ~800
        async with asyncio.timeout(remaining):
            return await receive()
    except TimeoutError:
        return None


# the requests that may take their principal from the token cache (decision 0034): memory
# reads, and the memory writes that re-check their token in their transaction (the
# append and the record write, decision 0014; a DELETE there does not, so it looks it up)
CACHED_PATHS = ("/v1/buffers/", "/v1/memory/")
CACHED_METHODS = ("GET", "HEAD", "POST", "PUT")



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


@dataclass(frozen=True)
class GateRefusal:
    """A request refused before any route: its status, code, message and details."""

    status: int
    code: str
    message: str
    details: list[dict[str, Any]] | None = None
    close: bool = True  # end the connection after the answer

    async def send(self, send: Send) -> None:
        """Answer with the JSON error envelope."""
        await send_error(send, self.status, self.code, self.message, self.details, close=self.close)


@dataclass(frozen=True)
class Head:
    """What the gate reads from a request's headers, and a framing refusal."""

    authorization: bytes | None
    declared: bytes | None  # Content-Length as sent
    content_type: bytes | None
    has_body: bool
    refusal: GateRefusal | None


def read_head(headers: Any) -> Head:
    """Scan the headers once; two ``Authorization`` headers or two framings are refused."""
    authorization = declared = content_type = None
    authorizations = 0
    chunked = False
    for name, value in headers:
        if name == b"authorization":
            authorization = value
            authorizations += 1
        elif name == b"content-length":
            declared = value
        elif name == b"content-type":
            content_type = value
        elif name == b"transfer-encoding":
            chunked = True
    refusal = None
    if authorizations > 1:
        refusal = GateRefusal(*DUPLICATE_AUTHORIZATION)
    elif chunked and declared is not None:
        refusal = GateRefusal(*AMBIGUOUS_LENGTH)
    has_body = chunked or (declared is not None and declared.strip() not in (b"", b"0"))
    return Head(authorization, declared, content_type, has_body, refusal)


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
        self.max_body = services.memory.limits.body_bytes  # 0: no bound
        self.too_large = too_large(self.max_body)

    async def _principal(self, token: str, method: str, path: str) -> Principal:
        """The principal: from the token cache (a memory read or guarded write), else looked up.

        The lookup runs on the loop for an inline store, else in a store thread; a
        valid token found is remembered (``Services.tokens``, decision 0034), one
        refused is forgotten.
        """
        cache = self.services.tokens
        if not well_formed(token):  # refused by the lookup, before any other work
            return await self.services.pool.read(authenticate, self.services.store, token)
        key = hash_token(token)
        if method in CACHED_METHODS and path.startswith(CACHED_PATHS):
            found = cache.get(key)
            if found is not None:
                return found
        since = cache.generation
        try:
            principal = await self.services.pool.read(authenticate, self.services.store, token)
        except AuthenticationError:
            cache.drop(key)
            raise
        cache.put(key, principal, since)
        return principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a refused request here; pass an accepted one on with its body replayed."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head_request = scope["method"] == "HEAD"
        if head_request:
            send = _without_body(send)  # refusals included
        head = read_head(scope.get("headers", ()))
        refusal = head.refusal
        path = scope["path"]
        if refusal is None and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES):
            refusal = await self._authenticate(scope, head)
        if refusal is None:
            refusal = self._query_or_length_refusal(scope, head)
        if refusal is not None:
            await refusal.send(send)
            return
        body = await self._read_body(receive, send)
        if body is None:  # refused (answered) or the client left
            return
        media = head.content_type.decode("latin-1") if head.content_type else None
        large = len(body) > INLINE_BODY_BYTES
        if large:
            refused, document = await run_in_threadpool(parse_body, body, media, self.max_body)
        else:
            refused, document = parse_body(body, media, self.max_body)
        if refused is not None:
            await send_error(send, *refused)
            return
        if head_request:
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

    async def _authenticate(self, scope: Scope, head: Head) -> GateRefusal | None:
        """Leave the token's principal in the request state; the refusal when there is none.

        401 for a missing, unknown or revoked token (the connection closed when a body
        follows, unread); a store that cannot answer is its own error, logged.
        """
        try:
            header = None if head.authorization is None else head.authorization.decode("latin-1")
            principal = await self._principal(bearer_token(header), scope["method"], scope["path"])
        except AuthenticationError as exc:
            return GateRefusal(401, exc.code, exc.message, close=head.has_body)
        except FlowmemError as exc:  # e.g. the store is down
            status, said = status_for(exc), exc.message
            if status >= 500:
                if exc.code in NAMED_CONDITIONS:
                    log.error("authentication refused (%s): %s%s", exc.code, exc.message, what_to_do(exc))
                else:
                    log.error("authentication failed: %s", exc.message, exc_info=exc)
                said = SERVER_MESSAGES.get(exc.code, SERVER_MESSAGE)
            if isinstance(exc, StoreError):  # counted; a damaged store fails readiness too
                record_store_fault(scope["app"], exc)
            return GateRefusal(status, exc.code, said)
        state = scope.setdefault("state", {})
        state["principal"] = principal
        state["token_id"] = principal.token_id
        return None

    def _query_or_length_refusal(self, scope: Scope, head: Head) -> GateRefusal | None:
        """A query parameter given twice (422), or a ``Content-Length`` unreadable (400) or past the limit (413)."""
        repeated = repeated_query_key(scope.get("query_string", b""))
        if repeated is not None:
            text = f"query parameter {repeated!r} is given more than once"
            details = [{"field": f"query.{repeated}", "message": text}]
            return GateRefusal(422, "invalid_input", text, details, close=head.has_body)
        if head.declared is None:
            return None
        try:
            length = int(head.declared)
        except ValueError:
            return GateRefusal(400, "invalid_body", "Content-Length is not a number")
        if self.max_body and length > self.max_body:
            return GateRefusal(*self.too_large)
        return None

    async def _read_body(self, receive: Receive, send: Send) -> bytes | None:
        """The whole body, within ``body_timeout`` and ``max_body``; None when refused or the client left."""
        chunks: list[bytes] = []
        size = 0
        more = True
        deadline = time.monotonic() + self.body_timeout if self.body_timeout else None
        while more:
            message = await (receive() if deadline is None else receive_by(receive, deadline))
            if message is None:
                await send_error(send, *TOO_SLOW)
                return None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if self.max_body and size > self.max_body:
                await send_error(send, *self.too_large)
                return None
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        return b"".join(chunks)
