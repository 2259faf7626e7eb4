"""What a provider would reject in a message list (``check_sendable``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowmem.core.messages import (
    ROLES,
    UNTEXTABLE_KINDS,
    _fast_entry_id,
    call_kind,
    is_healed,
    raw_tool_calls,
    result_id,
    usable_call_id,
)

_ROLE_SET = frozenset(ROLES)

# The stable violation codes, with the sentence each one stands for.
CODES: dict[str, str] = {
    "invalid_message": "entry is not a message object with a known role",
    "system_after_non_system": "a system message comes after a non-system message",
    "tool_leading": "a tool message leads the list",
    "orphan_result": "tool message does not answer a call of the assistant turn whose result run it sits in",
    "unanswered_call": "tool call has no result in the turn's result run",
    "duplicate_call_id": "tool call id is declared a second time",
    "duplicate_result": "tool call id is answered a second time",
    "invalid_call_id": "tool call has no usable id",
}


@dataclass(frozen=True)
class Violation:
    """One reason a provider would reject a history: where, a stable code, a sentence."""

    index: int
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        """Return the violation as a plain dict."""
        return {"index": self.index, "code": self.code, "message": self.message}


def _violation(index: int, code: str, detail: str = "") -> Violation:
    sentence = CODES[code] + (f" ({detail})" if detail else "")
    return Violation(index, code, sentence)


def check_sendable(messages: object) -> list[Violation]:
    """Return every violation a provider would reject, in list order.

    Reads flat and stored rows alike; content may be a string or a list of parts.
    Checks: entries that are not messages; a system row after a non-system row; a
    tool row leading the list; a tool row that does not answer a call of the
    assistant turn whose result run it sits in; a call with no result in that run
    (a ``computer`` or ``mcp_approval`` call answered only by a healed text
    placeholder has none); a call id declared twice; a result given twice; a call
    without a usable id. ``normalize`` (in either mode) always produces a list with
    none of these.
    """
    rows = messages if isinstance(messages, (list, tuple)) else ()
    found: list[Violation] = []
    seen_other = False
    declared: set[str] = set()
    answered: set[str] = set()
    open_calls: dict[str, int] = {}  # ids of the current turn still waiting for a result
    open_turn = -1
    untextable: dict[str, str] = {}  # call id -> its kind, for kinds a placeholder cannot answer
    for index, row in enumerate(rows):
        role = row.get("role") if type(row) is dict or isinstance(row, Mapping) else None
        if role not in _ROLE_SET if type(role) is str else not _is_role(role):
            found.append(_violation(index, "invalid_message"))
            continue
        if role == "tool":
            seen_other = True
            if index == 0:
                found.append(_violation(index, "tool_leading"))
                continue
            rid = usable_call_id(row.get("tool_call_id"))
            if rid is None and "metadata" in row:
                rid = result_id(row)
            if rid is not None and rid in answered:
                found.append(_violation(index, "duplicate_result", f"id {rid!r}"))
            elif rid is None or rid not in open_calls:
                found.append(_violation(index, "orphan_result", f"id {rid!r}"))
            else:
                del open_calls[rid]
                answered.add(rid)
                if untextable and rid in untextable and is_healed(row):
                    detail = f"id {rid!r}: a {untextable[rid]} call needs a real result"
                    found.append(_violation(open_turn, "unanswered_call", detail))
            continue
        if open_calls:  # a non-tool row ends the result run
            for waiting in open_calls:
                found.append(_violation(open_turn, "unanswered_call", f"id {waiting!r}"))
            open_calls.clear()
        if role == "system":
            if seen_other:
                found.append(_violation(index, "system_after_non_system"))
            continue
        seen_other = True
        if role != "assistant":
            continue
        open_turn = index
        calls = row.get("tool_calls")
        if calls is None and "metadata" in row:
            calls = raw_tool_calls(row)
        if not isinstance(calls, list):
            continue
        for call in calls:
            cid = _fast_entry_id(call)
            if cid is None:
                found.append(_violation(index, "invalid_call_id"))
            elif cid in declared:
                found.append(_violation(index, "duplicate_call_id", f"id {cid!r}"))
            else:
                declared.add(cid)
                open_calls[cid] = index
                kind = call_kind(call)
                if kind in UNTEXTABLE_KINDS:
                    untextable[cid] = kind
    for waiting in open_calls:
        found.append(_violation(open_turn, "unanswered_call", f"id {waiting!r}"))
    found.sort(key=lambda violation: violation.index)
    return found


def _is_role(role: object) -> bool:
    """Return True for a known role given as a ``str`` subclass (the rare case)."""
    return isinstance(role, str) and role in _ROLE_SET
