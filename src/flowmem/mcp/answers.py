"""A tool's answer: its JSON result as text and structured content, or a tool error that says what to do.

A tool never lets an error reach the protocol: a flowmem error (bad input, an unknown
session, a refused scope, content over a limit) is an ``isError`` result whose text is
``<code>: <message>`` and what to do about it (``HINTS``); the server keeps serving.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ParamSpec

from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from flowmem.errors import FlowmemError, StoreError

if TYPE_CHECKING:
    from flowmem.mcp.caller import Caller

log = logging.getLogger("flowmem.mcp")

P = ParamSpec("P")

HINTS: dict[str, str] = {
    "not_found": "list_sessions shows the sessions you can read",
    "forbidden": "this belongs to another user: use a session id of your own",
    "message_too_large": "split the content into smaller messages",
    "record_too_large": "store a smaller value, or split it under several keys",
    "buffer_full": "this session is full: start a new session",
    "too_many_sessions": "append to one of your existing sessions instead",
    "quota_exceeded": "forget some memories first",
    "scope_refused": "name a session (the session argument) or use the user scope",
    "unauthenticated": "configure the client with a token of a user",
    "idempotency_key_reused": "use a new request_id for a different call",
    "idempotency_key_in_flight": "the first call with this request_id is still running: retry shortly",
    "conflict": "retry once the session's running turn has ended",
    "store_busy": "retry shortly",
    "store_locked": "retry shortly",
}


def text_of(data: Any) -> str:
    """JSON text of a result, as the reference server writes it (two-space indent)."""
    return json.dumps(data, ensure_ascii=False, indent=2)


def ok(structured: dict[str, Any], text: Any = None) -> CallToolResult:
    """A successful result: ``structured`` as structured content, ``text`` (default: the same) as JSON text."""
    shown = structured if text is None else text
    body = shown if isinstance(shown, str) else text_of(shown)
    return CallToolResult(
        content=[TextContent(type="text", text=body)], structured_content=structured
    )


async def answered(caller: Caller, work: Callable[[Caller], Any]) -> CallToolResult:
    """``ok`` of what ``work(caller)`` returns, run as ``caller`` (``Caller.call``: in a thread)."""
    return ok(await caller.call(lambda: work(caller)))


def failed(message: str) -> CallToolResult:
    """A tool error: ``isError`` with one text block saying what went wrong and what to do."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def explain(error: FlowmemError) -> str:
    """``<code>: <message>``, then what to do when the code has a hint the message lacks."""
    hint = "" if error.details.get("hinted") else HINTS.get(error.code, "")
    text = f"{error.code}: {error.message}"
    if hint and hint not in error.message:
        text = f"{text} ({hint})"
    return text


def tool_errors(
    func: Callable[P, Awaitable[CallToolResult]],
) -> Callable[P, Awaitable[CallToolResult]]:
    """Wrap a tool: a flowmem error becomes a tool error result (a store fault is logged)."""

    @functools.wraps(func)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await func(*args, **kwargs)
        except FlowmemError as exc:
            if isinstance(exc, StoreError):
                log.error("tool %s: store error %s: %s", func.__name__, exc.code, exc.message)
            return failed(explain(exc))

    return guarded


def arguments_refused(tool: str, error: ValidationError) -> CallToolResult:
    """The tool error of arguments the tool's input schema refuses: each argument and what is wrong."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {item['msg']}")
    return failed(
        f"invalid_arguments: {tool}: " + "; ".join(problems)
        + " (the tool's input schema in tools/list gives each argument's type)"
    )
