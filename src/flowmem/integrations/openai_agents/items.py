"""Stored rows as the SDK's Responses items, tool pairing repaired (MEM-5 rule 3)."""

from __future__ import annotations

from typing import Any

from flowmem.core import Message, entry_id, normalize, result_id
from flowmem.core.messages import raw_tool_calls
from flowmem.formats import row_to_items, to_responses


def items_of(rows: list[Message], limit: int | None = None) -> list[dict[str, Any]]:
    """Return rows as Responses items, tool pairing repaired, the last ``limit`` items when given.

    Nothing is reordered (a system item stays where it was added: the Responses API
    takes it there, DESIGN §5); a call whose output has not arrived gets its
    interrupted placeholder (MEM-5 rule 3). ``limit`` works as in the SDK's own
    sessions: ``None`` or a negative number is every item, ``0`` none, ``N`` the
    last N exactly, wherever the cut falls (the Runner drops an output whose call
    the cut left out, as it does for ``SQLiteSession``; docs/decisions/0050).
    """
    items = repaired_items(rows)[0]
    if limit is None or limit < 0:
        return items
    return items[-limit:] if limit else []


def repaired_items(rows: list[Message]) -> tuple[list[dict[str, Any]], int]:
    """Return ``(items, dropped)``: the rows' Responses items in place, and what repair removed."""
    repaired = normalize(rows, keep_content=True, systems_first=False)
    return to_responses(repaired.messages, systems_first=False), repaired.dropped


def output_item(row: Message, rows: list[Message]) -> dict[str, Any]:
    """Return the item of a ``tool`` row, spelled for the kind of the call it answers."""
    answered = result_id(row)
    for turn in reversed(rows):
        for call in raw_tool_calls(turn) if turn.get("role") == "assistant" else []:
            if entry_id(call) == answered:
                pair = [{"role": "assistant", "content": "", "tool_calls": [call]}, row]
                items = to_responses(pair)
                if len(items) >= 2 and "role" not in items[-1]:
                    return items[-1]
    return row_to_items(row)[-1]
