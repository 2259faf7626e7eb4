"""Sessions as tools: list and search past sessions, read one as a token window, append, check.

A session is a flowmem session (its id, owner, timestamps) and its conversation: the
buffer ``flowmem.service.conversation`` finds (``chat_history`` for a session these
tools started). The caller sees the sessions it may view (its own; any with
``sessions:view_any``) and writes to those it may drive; an id that names no session
starts one, owned by the caller, with the first append (MEM-8).

- ``read_session`` is the longest sendable end of the conversation within a token
  budget: a tool result is never kept without the call that asked for it, nor a call
  without its result (``MemoryService.load(max_tokens=…)``, issue 28).
- ``append_messages`` goes through the buffer rules: a tool result appended twice is
  stored once (MEM-1), an assistant turn whose calls are all known is a duplicate
  (MEM-2), a user turn heals the calls left unanswered (MEM-3); a ``request_id``
  makes a retried call store nothing twice, whatever its messages.
- ``search_sessions`` reads the newest ``SEARCH_SESSIONS`` sessions' conversations and
  keeps the messages whose JSON contains the text (any case).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from flowmem.errors import InvalidInputError
from flowmem.formats import check_payload
from flowmem.mcp.caller import Caller
from flowmem.mcp.keyed import check_request_id, fingerprint, once
from flowmem.results import BufferResult
from flowmem.service.conversation import DEFAULT_BUFFER, conversations
from flowmem.store.base import Idempotency, SessionRecord

SEARCH_SESSIONS = 200
"""The most sessions (newest first) one search reads."""
MATCHES_PER_SESSION = 5
SNIPPET = 200  # characters of a matched message shown around the match
PAGE = 100


def when(value: object, name: str) -> float | None:
    """A time argument as epoch seconds: a number, or ISO-8601 text (``2026-12-06T10:00:00Z``)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise InvalidInputError(
        f"{name} must be epoch seconds or an ISO-8601 time such as 2026-12-06T10:00:00Z, got {value!r}",
        argument=name,
    )


def _shown(session: SessionRecord, buffer: str, messages: int) -> dict[str, Any]:
    return {
        "id": session.id,
        "name": session.name,
        "owner": session.owner,
        "status": session.status,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "conversation": buffer,
        "messages": messages,
    }


def _visible(caller: Caller, since: float | None, until: float | None) -> Iterator[SessionRecord]:
    """The caller's sessions, newest first, updated within [since, until]."""
    sessions = caller.services.sessions
    offset = 0
    while True:
        page = sessions.list_sessions(caller.principal, PAGE, offset)
        for session in page.sessions:
            if since is not None and session.updated_at < since:
                continue
            if until is not None and session.updated_at > until:
                continue
            yield session
        offset += PAGE
        if offset >= page.total or not page.sessions:
            return


def list_sessions(
    caller: Caller, limit: int, offset: int, since: object, until: object
) -> dict[str, Any]:
    """A page of the caller's sessions, newest first, with their conversation's size."""
    low, high = when(since, "since"), when(until, "until")
    found: list[SessionRecord] = []
    for n, session in enumerate(_visible(caller, low, high)):
        if n >= offset + limit + 1:
            break
        if n >= offset:
            found.append(session)
    page, more = found[:limit], len(found) > limit
    where = conversations(caller.services.memory.store, [s.id for s in page])
    shown = [_shown(s, where[s.id].buffer, where[s.id].messages) for s in page]
    return {"sessions": shown, "has_more": more}


def _snippet(text: str, needle: str) -> str:
    at = text.casefold().find(needle)
    start = max(0, at - SNIPPET // 2)
    return text[start : start + SNIPPET]


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else json.dumps(message, ensure_ascii=False)


def search_sessions(
    caller: Caller, query: str, since: object, until: object, limit: int
) -> dict[str, Any]:
    """The caller's sessions with a message containing ``query``, newest first, and the matches."""
    needle = query.casefold() if isinstance(query, str) else ""
    if not needle.strip():
        raise InvalidInputError("query must be non-empty text", argument="query")
    low, high = when(since, "since"), when(until, "until")
    memory = caller.services.memory
    hits: list[dict[str, Any]] = []
    read = 0
    for session in _visible(caller, low, high):
        if read >= SEARCH_SESSIONS or len(hits) >= limit:
            break
        read += 1
        buffer = conversations(memory.store, [session.id])[session.id]
        rows = memory.load_raw("session", session.id, buffer.buffer).messages
        matches = []
        for index, message in enumerate(rows):
            text = _text(message)
            if needle in text.casefold() or needle in json.dumps(message, ensure_ascii=False).casefold():
                role = message.get("role") if isinstance(message, dict) else None
                matches.append({"index": index, "role": role, "text": _snippet(text, needle)})
                if len(matches) >= MATCHES_PER_SESSION:
                    break
        if matches:
            hits.append({**_shown(session, buffer.buffer, len(rows)), "matches": matches})
    return {"sessions": hits, "sessions_read": read}


def read_session(caller: Caller, session: str, max_tokens: int) -> dict[str, Any]:
    """The end of a session's conversation within ``max_tokens``, never a call without its result."""
    context = caller.session_read(session)
    memory = caller.services.memory
    record = caller.services.sessions.find(session)
    buffer = DEFAULT_BUFFER if record is None else conversations(memory.store, [record.id])[record.id].buffer
    result = memory.load("session", buffer, context, max_tokens=max_tokens)
    window = None if result.window is None else result.window.to_dict()
    return {
        "session": session,
        "conversation": buffer,
        "messages": result.messages,
        "count": result.count,
        "window": window,
    }


def append_messages(
    caller: Caller, session: str, messages: list[Any], request_id: str | None
) -> dict[str, Any]:
    """Append messages to a session's conversation under the buffer rules (MEM-1, MEM-2, MEM-3)."""
    rid = check_request_id(request_id)
    memory = caller.services.memory
    mark = fingerprint("append_messages", {"session": session, "messages": messages})

    def write(idem: Idempotency | None) -> dict[str, Any]:
        context, guard = caller.session_write(session)

        def answer(result: BufferResult) -> dict[str, Any]:
            return {
                "session": session,
                "conversation": DEFAULT_BUFFER,
                "appended": result.appended,
                "count": result.count,
            }

        keyed = None if idem is None else idem.mapped(answer)
        result = memory.append("session", DEFAULT_BUFFER, messages, context, guard=guard, idempotency=keyed)
        return answer(result)

    return once(memory, caller.user, rid, mark, write)


def check_messages(messages: Any, format: str | None) -> dict[str, Any]:
    """What a provider would refuse in a history (``flowmem check``): each violation, in order."""
    found, violations = check_payload(messages, format, "messages")
    return {
        "format": found,
        "sendable": not violations,
        "violations": [v.to_dict() for v in violations],
    }
