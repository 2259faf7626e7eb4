"""pydantic-ai messages as flowmem rows, and back, exactly (``ModelMessagesTypeAdapter``).

A ``ModelResponse`` is one ``assistant`` row declaring its ``ToolCallPart``s (MEM-11's
``tool_calls``); a ``ModelRequest`` is one ``tool`` row per tool result it carries (a
``ToolReturnPart``, or a ``RetryPromptPart`` bound to a tool), then one row for the rest:
``user`` when it holds a ``UserPromptPart``, else ``system``. Every row keeps its parts
as the adapter dumps them, their indices in the message and the message's own fields
under ``metadata.pydantic_ai``, so the message is rebuilt equal from its rows even when
the buffer rules dropped some (MEM-1). A row's ``content`` is its text for people and
for the API (a list of ``provider`` parts naming what it holds when it has none).

A healed placeholder (MEM-3) reads as pydantic-ai would write one: a ``ModelRequest``
of ``ToolReturnPart``s stating the call was interrupted, stamped with the declaring
response's time, so the same history reads the same whichever way it was healed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeGuard, cast

from pydantic import ValidationError
from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from flowmem.core import (
    HEALED_CONTENT,
    Dangling,
    ListEditor,
    Message,
    heal,
    is_healed,
    result_id,
)
from flowmem.integrations.pydantic_ai.entries import entry
from flowmem.integrations.pydantic_ai.validated import Validated
from flowmem.store.conversations import META, entry_of
from flowmem.store.conversations.lines import placeholder_owner

HEALED_METADATA = {"healed": True, "pydantic_ai_synthesized_tool_return": True}
"""The metadata of a placeholder's ``ToolReturnPart`` (flowmem's mark, and pydantic-ai's)."""


def message_json(message: ModelMessage) -> str:
    """The message as ``ModelMessagesTypeAdapter`` writes it, kept beside its rows (decision 0131).

    Without its ``None`` fields (a third less to read back) when that reads back to the
    very same JSON; whole otherwise.
    """
    full = ModelMessagesTypeAdapter.dump_json([message])
    lean = ModelMessagesTypeAdapter.dump_json([message], exclude_none=True)
    if lean != full:
        try:
            same = ModelMessagesTypeAdapter.dump_json(ModelMessagesTypeAdapter.validate_json(lean)) == full
        except ValidationError:
            same = False
        lean = lean if same else full
    return lean[1:-1].decode()


def messages_of(
    found: Sequence[tuple[str, str]],
    limit: int | None,
    validated: Validated | None = None,
    proof: object | None = None,
) -> list[ConversationEntry]:
    """The entries of a history read as messages (newest first, one more than ``limit``), in order.

    One ``validate_json`` of the joined array, as a JSON history is read; with
    ``validated``, of the messages it did not validate before (decision 0141), kept by
    ``proof`` when given (decision 0183). The entry before the first kept (read past
    ``limit``) is its parent.
    """
    chosen = list(reversed(found))
    parent: str | None = None
    if limit is not None and len(chosen) > limit:
        cut = len(chosen) - limit
        parent, chosen = chosen[cut - 1][0], chosen[cut:]
    if not chosen:
        return []
    if validated is not None:
        messages = validated.messages(chosen, proof)
    else:
        messages = ModelMessagesTypeAdapter.validate_json("[" + ",".join(m for _, m in chosen) + "]")
    return entries_from([entry_id for entry_id, _ in chosen], messages, parent)


def entries_from(
    ids: Sequence[str], messages: Sequence[ModelMessage], parent: str | None = None
) -> list[ConversationEntry]:
    """The entries of ``messages`` with these ids, in order, each the parent of the next (the first's: ``parent``)."""
    entries: list[ConversationEntry] = []
    for entry_id, message in zip(ids, messages, strict=True):
        entries.append(entry(entry_id, parent, message))
        parent = entry_id
    return entries


def _dump(message: ModelMessage) -> dict[str, Any]:
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    return dumped


def _stub(parts: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Content for a row without text: what it holds, as ``provider`` parts (never empty)."""
    blocks = [{"part_kind": p.get("part_kind")} for p in parts] or [{"kind": kind}]
    return [{"type": "provider", "provider": "pydantic_ai", "block": b} for b in blocks]


def is_result(part: object) -> TypeGuard[ToolReturnPart | RetryPromptPart]:
    """Whether a request part answers a tool call (pydantic-ai's own test)."""
    if isinstance(part, ToolReturnPart):
        return True
    return isinstance(part, RetryPromptPart) and part.tool_name is not None


def _result_text(part: Any) -> str:
    if isinstance(part, RetryPromptPart):
        return part.model_response()
    return str(part.model_response_str())


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    texts = [item if isinstance(item, str) else item.content for item in part.content
             if isinstance(item, (str, TextContent))]
    return "\n".join(texts)


def _seconds(stamp: datetime | None) -> int | None:
    return None if stamp is None else int(stamp.timestamp())


def entry_rows(entry: ConversationEntry, dumped: dict[str, Any] | None = None) -> list[Message]:
    """The rows an entry's message becomes (tool call ids as pydantic-ai gave them).

    ``dumped``: the message's JSON-mode dump when the caller has it (``dumps.message_dumps``).
    """
    message = entry.message
    dumped = _dump(message) if dumped is None else dict(dumped)
    parts: list[dict[str, Any]] = dumped.pop("parts")
    stamp = _seconds(message.timestamp)

    def row(role: str, content: Any, indices: list[int], extra: dict[str, Any]) -> Message:
        meta = {
            **extra,
            META: {
                "entry": entry.id,
                "parent": entry.parent_id,
                "run": message.run_id,
                "message": dumped,
                "index": indices,
                "parts": [parts[i] for i in indices],
            },
        }
        made: Message = {"role": role, "content": content, "metadata": meta}
        if stamp is not None:
            made["timestamp"] = stamp
        return made

    if isinstance(message, ModelResponse):
        return [_response_row(message, parts, row)]
    return _request_rows(message, parts, row)


_Row = Callable[[str, Any, list[int], dict[str, Any]], Message]


def _response_row(message: ModelResponse, parts: list[dict[str, Any]], row: _Row) -> Message:
    """A response's one ``assistant`` row, declaring its tool calls (MEM-11)."""
    calls = [
        {"tool_call_id": p.tool_call_id, "name": p.tool_name, "args": parts[i].get("args"), "part": i}
        for i, p in enumerate(message.parts)
        if isinstance(p, ToolCallPart) and p.part_kind == "tool-call"
    ]
    text = "\n\n".join(p.content for p in message.parts if isinstance(p, TextPart))
    content: Any = text or ("" if calls else _stub(parts, "response"))
    return row("assistant", content, list(range(len(parts))), {"tool_calls": calls} if calls else {})


def _request_rows(message: ModelRequest, parts: list[dict[str, Any]], row: _Row) -> list[Message]:
    """A request's rows: a ``tool`` row per tool result, then ``user`` (or ``system``) for the rest."""
    rows: list[Message] = []
    rest: list[int] = []
    for i, part in enumerate(message.parts):
        if not is_result(part):
            rest.append(i)
            continue
        extra: dict[str, Any] = {"tool_call_id": part.tool_call_id}
        metadata = getattr(part, "metadata", None)
        if isinstance(metadata, dict) and metadata.get("healed") is True:
            extra["healed"] = True
        rows.append(row("tool", _result_text(part) or _stub([parts[i]], "result"), [i], extra))
    if rest or not rows:
        prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
        text = "\n\n".join(t for t in (_prompt_text(p) for p in prompts) if t)
        content = text or _stub([parts[i] for i in rest], "request")
        rows.append(row("user" if prompts else "system", content, rest, {}))
    return rows


def placeholder_request(response: ModelResponse, calls: Iterable[ToolCallPart]) -> ModelRequest:
    """The healed placeholder answering ``calls`` of ``response`` (MEM-3), in pydantic-ai's shape."""
    parts = [
        ToolReturnPart(
            tool_name=call.tool_name,
            content=HEALED_CONTENT,
            tool_call_id=call.tool_call_id,
            tool_kind=call.tool_kind,
            metadata=dict(HEALED_METADATA),
            timestamp=response.timestamp,
            outcome="interrupted",
        )
        for call in calls
    ]
    return ModelRequest(
        parts=parts,
        timestamp=response.timestamp,
        run_id=response.run_id,
        conversation_id=response.conversation_id,
    )


def entries_of(rows: Sequence[Message]) -> list[ConversationEntry]:
    """The entries a line's rows hold, in order, each message rebuilt from its rows.

    An entry's rows are put together at the place of its last row; healed placeholders
    (rows flowmem inserted) become ``placeholder_request``s; rows no conversation
    wrote are not part of it.
    """
    groups: dict[str, list[Message]] = {}
    last: dict[str, int] = {}
    for index, row in enumerate(rows):
        entry = entry_of(row)
        if entry is None:
            continue
        groups.setdefault(entry, []).append(row)
        last[entry] = index
    calls: dict[str, tuple[ToolCallPart, ModelResponse]] = {}
    built: dict[str, ModelMessage] = {}
    for entry, members in groups.items():
        if placeholder_owner(members[0]) is not None:
            continue
        message = _rebuilt(members)
        built[entry] = message
        if isinstance(message, ModelResponse):
            declared = members[0]["metadata"].get("tool_calls") or []
            for call in declared:
                part = message.parts[call["part"]]
                if isinstance(part, ToolCallPart):
                    calls[str(call["tool_call_id"])] = (part, message)
    for entry, members in groups.items():
        if entry in built:
            continue
        answered = [calls.get(str(m["metadata"].get("tool_call_id"))) for m in members]
        found = [pair for pair in answered if pair is not None]
        if found:
            built[entry] = placeholder_request(found[0][1], [call for call, _ in found])
    entries: list[ConversationEntry] = []
    parent: str | None = None
    for entry in sorted(built, key=last.__getitem__):
        entries.append(ConversationEntry(id=entry, parent_id=parent, message=built[entry]))
        parent = entry
    return entries


def _rebuilt(members: Sequence[Message]) -> ModelMessage:
    """The message of one entry from its rows (the parts they still hold, in order)."""
    data = members[0]["metadata"][META]
    parts: list[tuple[int, Any]] = []
    for member in members:
        held = member["metadata"][META]
        parts.extend(zip(held["index"], held["parts"], strict=True))
    message = {**data["message"], "parts": [part for _, part in sorted(parts, key=lambda p: p[0])]}
    rebuilt: ModelMessage = ModelMessagesTypeAdapter.validate_python([message])[0]
    return rebuilt


class _Resumed(ListEditor):
    """The rows from a conversation's last response on, whose calls a paused run waits on are not healed."""

    def __init__(self, rows: Iterable[Message], waiting: set[str]) -> None:
        super().__init__(rows)
        self.waiting = waiting

    def dangling(self) -> list[Dangling]:
        """The unanswered calls MEM-3 heals: every one but those a paused run waits on."""
        return [d for d in super().dangling() if d.call_id not in self.waiting]


def unanswered_tail(
    messages: Sequence[ModelMessage], waiting: set[str]
) -> tuple[ModelResponse, list[ToolCallPart]] | None:
    """The last response's calls MEM-3 heals (no later request answers them), but those a paused run waits on.

    Implements MEM-3 for a loaded conversation by the buffer rules' own ``heal``, over
    the rows of the last response and of the requests after it (``entry_rows``).
    """
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], ModelResponse)),
        None,
    )
    if last is None:
        return None
    response = cast(ModelResponse, messages[last])
    if not any(isinstance(p, ToolCallPart) and p.part_kind == "tool-call" for p in response.parts):
        return None  # it declares no call: nothing to heal
    tail = [ConversationEntry(id=str(i), parent_id=None, message=m) for i, m in enumerate(messages[last:])]
    editor = _Resumed([row for entry in tail for row in entry_rows(entry)], waiting)
    heal(editor)
    healed = {result_id(row) for row in editor.rows if is_healed(row)}
    open_calls = [
        part
        for part in response.parts
        if isinstance(part, ToolCallPart)
        and part.part_kind == "tool-call"
        and part.tool_call_id in healed
    ]
    return (response, open_calls) if open_calls else None


__all__ = [
    "HEALED_METADATA",
    "entries_from",
    "entries_of",
    "entry_rows",
    "is_result",
    "message_json",
    "messages_of",
    "placeholder_request",
    "unanswered_tail",
]
