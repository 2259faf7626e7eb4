"""One result per call in a pydantic-ai conversation: a result for a call already answered is not stored again.

A conversation's line holds each call's first result: the tool's, or MEM-3's placeholder
when the call was interrupted and the user went on. A result arriving later for the same
call (a tool that finished after its process was given up, a history saved again with
it) is a duplicate (MEM-1): it is dropped from the message that carries it, and a
message left with nothing is not stored. MEM-10's replacement in place is not applied
here: the placeholder is followed by the turns the model answered after seeing it, and
moving the late result before them would reorder the conversation's entries
(decision 0099). A call id a later response declares again is a new call (decision
0051): its result is stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart

from flowmem.integrations.pydantic_ai.rows import is_result


def _track(message: ModelMessage, answered: dict[str, bool]) -> None:
    """Record the calls ``message`` declares (open) or answers (answered)."""
    if isinstance(message, ModelResponse):
        for declared in message.parts:
            if isinstance(declared, ToolCallPart):
                answered[declared.tool_call_id] = False
        return
    for part in message.parts:
        if is_result(part) and part.tool_call_id in answered:
            answered[part.tool_call_id] = True


def carries_results(entries: Sequence[ConversationEntry]) -> bool:
    """Whether any entry's message answers a tool call (only then is the stored line read)."""
    return any(
        isinstance(entry.message, ModelRequest) and any(is_result(p) for p in entry.message.parts)
        for entry in entries
    )


def once_per_call(
    history: Sequence[ModelMessage], entries: Sequence[ConversationEntry]
) -> list[ConversationEntry]:
    """``entries`` without the results of calls ``history`` (or an earlier entry) already answered.

    Implements MEM-1 for results saved after a call's first result, MEM-3's placeholder
    included: each dropped part goes, a message left with no part goes, and the entries
    kept are chained again after the first one's parent.
    """
    answered: dict[str, bool] = {}
    for message in history:
        _track(message, answered)
    kept: list[ConversationEntry] = []
    parent = entries[0].parent_id if entries else None
    for entry in entries:
        message = entry.message
        if isinstance(message, ModelRequest):
            parts = [
                p for p in message.parts if not (is_result(p) and answered.get(p.tool_call_id) is True)
            ]
            if not parts and message.parts:
                continue
            if len(parts) != len(message.parts):
                message = dataclasses.replace(message, parts=parts)
        _track(message, answered)
        kept.append(dataclasses.replace(entry, parent_id=parent, message=message))
        parent = entry.id
    return kept


__all__ = ["carries_results", "once_per_call"]
