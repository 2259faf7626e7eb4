"""ADK events as flowmem rows, and back, exactly (decision 0053).

An event becomes one row, or one row per ``function_response`` part:

- an event with ``function_response`` parts: a ``tool`` row per response, whose
  ``metadata.tool_call_id`` is the response's id (MEM-1 deduplicates by it; a real
  result replaces a healed placeholder, MEM-10); the event's other parts go with
  its first row;
- an event with a user message (content role ``user``, or no role and author
  ``user``): a ``user`` row (MEM-3 heals the calls left unanswered before it);
- any other event (a model turn, an event with no content): an ``assistant`` row, its
  ``function_call`` parts declared in ``metadata.tool_calls`` (MEM-2), except the
  calls the event marks long-running: ADK waits for their answer across user turns,
  so they are not healed.

A row's content is its parts: a plain text part as a ``text`` part (a row holding
just one non-empty one as a string), every other part verbatim as a ``provider`` part
of provider ``adk``. ``metadata.adk`` keeps the rest of the event (ids, author,
invocation id, branch, timestamp, actions, custom metadata, usage …), the indices of
the row's parts in the event, and a token naming the event, so ``events_of`` gives
back an equal ``Event``. A healed placeholder (a row the buffer rules wrote) is read
as a ``function_response`` event answering its call with an error, authored like the
call, as ADK seals an aborted call.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.adk.events import Event
from google.genai import types
from pydantic import TypeAdapter

from flowmem.core import HEALED_CONTENT, Message, is_healed, result_id

PROVIDER = "adk"
NO_CONTENT: dict[str, Any] = {"type": "provider", "provider": PROVIDER, "block": {"no_content": True}}
"""The content of a row whose event has no part (a state change, an abort, a transfer)."""
HEALED_PREFIX = "flowmem-healed-"
"""The id of the event a healed placeholder is read as: this, then the call id."""
HEALED_MARK = "flowmem_healed"
"""The ``custom_metadata`` key set on such an event."""


def _dump(event: Event) -> dict[str, Any]:
    data: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
    return data


def _part_entry(part: Mapping[str, Any]) -> dict[str, Any]:
    if set(part) == {"text"} and isinstance(part["text"], str):
        return {"type": "text", "text": part["text"]}
    return {"type": "provider", "provider": PROVIDER, "block": dict(part)}


def _content(parts: Sequence[Mapping[str, Any]], indices: Sequence[int]) -> str | list[Any]:
    entries = [_part_entry(parts[i]) for i in indices]
    if len(entries) == 1 and entries[0]["type"] == "text" and entries[0]["text"]:
        return str(entries[0]["text"])
    return entries or [dict(NO_CONTENT)]


def _is_user_message(content: Mapping[str, Any], author: str) -> bool:
    role = content.get("role")
    return role == "user" or (role is None and author == "user")


def _envelope(data: Mapping[str, Any]) -> dict[str, Any]:
    """The event's dump with its content's parts left out (they go in the rows)."""
    envelope = dict(data)
    content = data.get("content")
    if content is not None:
        envelope["content"] = {k: ([] if k == "parts" else v) for k, v in content.items()}
    return envelope


def _response_rows(parts: Sequence[Mapping[str, Any]]) -> list[tuple[list[int], dict[str, Any]]]:
    """A ``tool`` row's part indices and metadata per ``function_response`` part (none without).

    The event's other parts go with its first row.
    """
    responses = [i for i, p in enumerate(parts) if "function_response" in p]
    others = [i for i in range(len(parts)) if i not in responses]
    rows = []
    for n, i in enumerate(responses):
        answered = parts[i]["function_response"].get("id")
        meta = {"tool_call_id": answered} if answered else {}
        rows.append((sorted([i, *others]) if n == 0 else [i], meta))
    return rows


def _declared_calls(parts: Sequence[Mapping[str, Any]], waiting: set[str]) -> list[dict[str, Any]]:
    """The ``function_call`` parts as ``metadata.tool_calls`` (MEM-2), long-running ones left out."""
    return [
        {"tool_call_id": call["id"], "name": call.get("name", ""), "args": call.get("args", {})}
        for p in parts
        if (call := p.get("function_call")) is not None and call.get("id") and call["id"] not in waiting
    ]


def event_rows(event: Event, token: str) -> list[Message]:
    """The rows an event is stored as; ``token`` names the event in every one of them."""
    data = _dump(event)
    content = data.get("content")
    parts: list[dict[str, Any]] = list(content.get("parts") or []) if content else []
    envelope = _envelope(data)
    stamp = int(event.timestamp)

    def row(role: str, indices: list[int], meta: dict[str, Any]) -> Message:
        adk = {"event": envelope, "parts": indices, "of": token}
        return {
            "role": role,
            "content": _content(parts, indices),
            "metadata": {**meta, "adk": adk},
            "timestamp": stamp,
        }

    responses = _response_rows(parts)
    if responses:
        return [row("tool", indices, meta) for indices, meta in responses]
    indices = list(range(len(parts)))
    if parts and _is_user_message(content or {}, event.author):
        return [row("user", indices, {})]
    calls = _declared_calls(parts, set(event.long_running_tool_ids or ()))
    return [row("assistant", indices, {"tool_calls": calls} if calls else {})]


def _parts_of(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    found: list[dict[str, Any]] = []
    for entry in content if isinstance(content, list) else []:
        if not isinstance(entry, Mapping):
            continue
        if entry.get("type") == "text":
            found.append({"text": entry.get("text", "")})
        elif entry.get("type") == "provider" and entry.get("provider") == PROVIDER:
            found.append(dict(entry.get("block") or {}))
    return found


class _Group:
    """The rows of one event read so far: its envelope and its parts by index."""

    def __init__(self, envelope: Mapping[str, Any]) -> None:
        self.envelope = envelope
        self.parts: dict[int, dict[str, Any]] = {}

    def event(self) -> Event:
        data = copy.deepcopy(dict(self.envelope))
        content = data.get("content")
        if isinstance(content, dict) and "parts" in content:
            content["parts"] = [self.parts[i] for i in sorted(self.parts)]
        return Event.model_validate(data)


def healed_event(call_id: str, call: Event | Mapping[str, Any], name: str | None) -> Event:
    """The event a healed placeholder answering ``call_id`` is read as (MEM-3).

    ``call`` is the event that declared the call (or its stored envelope): the
    answer carries its invocation, author, branch, isolation scope and time, so it
    pairs with the call in the caller's own view, as ADK's own abort answers do.
    """
    source = call if isinstance(call, Mapping) else _dump(call)
    return Event(
        id=HEALED_PREFIX + call_id,
        invocation_id=source.get("invocation_id", ""),
        author=source.get("author", ""),
        branch=source.get("branch"),
        isolation_scope=source.get("isolation_scope"),
        timestamp=source.get("timestamp", 0.0),
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call_id, name=name, response={"error": HEALED_CONTENT}
                    )
                )
            ],
        ),
        custom_metadata={HEALED_MARK: True},
    )


def call_name(event: Event, call_id: str) -> str | None:
    """The name of the call ``call_id`` an event declares (None when it declares none)."""
    for call in event.get_function_calls():
        if call.id == call_id:
            name: str | None = call.name
            return name
    return None


def events_of(rows: Iterable[Message]) -> list[Event]:
    """The events a session buffer's rows hold, in the order of their first row.

    Rows that are neither an event's nor a healed placeholder of a declared call
    (written to the buffer by something else) are skipped.
    """
    groups: dict[str, _Group] = {}
    order: list[tuple[str, str]] = []
    declared: dict[str, tuple[Mapping[str, Any], str | None]] = {}
    for row in rows:
        meta = row.get("metadata") if isinstance(row, Mapping) else None
        adk = meta.get("adk") if isinstance(meta, Mapping) else None
        if isinstance(adk, Mapping) and isinstance(adk.get("of"), str):
            token = adk["of"]
            group = groups.get(token)
            if group is None:
                group = groups[token] = _Group(adk.get("event") or {})
                order.append(("event", token))
            parts = _parts_of(row.get("content"))
            for index, part in zip(adk.get("parts") or [], parts, strict=False):
                group.parts[int(index)] = part
                call = part.get("function_call")
                if isinstance(call, Mapping) and call.get("id"):
                    declared[str(call["id"])] = (group.envelope, call.get("name"))
        elif is_healed(row) and (answered := result_id(row)) in declared:
            order.append(("healed", answered))
    events = []
    for kind, key in order:
        if kind == "event":
            events.append(groups[key].event())
        else:
            envelope, name = declared[key]
            events.append(healed_event(key, envelope, name))
    return events


EVENTS: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


def kept_json(rows: Sequence[Message]) -> str:
    """The event one event's rows give back (``events_of``), as JSON: kept beside them (decision 0133)."""
    event = events_of(rows)[0]
    return event.model_dump_json(exclude_none=True)


def events_of_json(texts: Sequence[str]) -> list[Event]:
    """The events kept as JSON, in order: one ``validate_json`` of the joined array."""
    return EVENTS.validate_json("[" + ",".join(texts) + "]") if texts else []


__all__ = [
    "EVENTS",
    "HEALED_MARK",
    "HEALED_PREFIX",
    "NO_CONTENT",
    "PROVIDER",
    "call_name",
    "event_rows",
    "events_of",
    "events_of_json",
    "healed_event",
    "kept_json",
]
