"""Request body limits: the checks the request gate (``flowmem.api.gate``) makes on a body.

A body is refused before any route runs when it is larger than ``MAX_BODY_BYTES``
(413, checked against ``Content-Length`` first and then counted while streaming),
not JSON-typed (415), has more than ``MAX_VALUES`` values (413 ``too_many_values``),
is nested ``MAX_DEPTH`` levels deep or more (400 ``body_too_deep``), is not valid
UTF-8 JSON (400 ``invalid_json``) or is not an object or an array at the top (400
``invalid_body``); text anywhere in it that cannot be stored — a lone surrogate,
``"\\ud800"`` — is 422 ``invalid_text`` (``flowmem.core.check_storable``, the same
decision the services make); a query parameter given twice is 422 (every
parameter of this API is a single value).

Every check is linear in the body's size and made by a few whole-buffer C calls
(``bytes.replace``, ``bytes.count``, ``bytes.split``, ``bytes.translate``): no
per-byte Python loop, no regular expression, no recursion. The value cap bounds
the work of ``json.loads`` and of validation, which create one Python object per
value and hold the interpreter lock while they do (a thread does not help them).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import Message, Receive

from flowmem.core import check_storable
from flowmem.core.storable import json_text_may_hold_surrogates
from flowmem.errors import InvalidTextError

MAX_BODY_BYTES = 8 * 1024 * 1024
BODY_TIMEOUT = 30.0  # seconds a whole request body may take to arrive (408 after)
TOO_SLOW = (408, "request_timeout", "the request body did not arrive in time")
MAX_DEPTH = 64  # a body nested this deep or deeper is refused
MAX_VALUES = 100_000  # commas and opening brackets outside strings, see ``value_count``
INLINE_BODY_BYTES = 64 * 1024  # a larger body is parsed and validated in a thread
TOO_LARGE = (413, "payload_too_large", f"the body is larger than {MAX_BODY_BYTES} bytes")
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


def parse_body(body: bytes, content_type: str | None) -> tuple[tuple[Any, ...] | None, Any]:
    """Return (refusal, None) for a body that must be refused, else (None, its JSON document).

    A refusal is (status, code, message) or, for a 422, (status, code, message,
    details). An empty body is accepted with document None. Linear in the body's size.
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
