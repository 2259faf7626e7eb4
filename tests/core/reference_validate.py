"""The first, plain ``check_sendable``, kept as an oracle for the optimized core.

``test_validate_reference`` checks on generated histories that both report the
same violations (index, code and sentence), in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowmem.core.messages import ROLES, entry_id, raw_tool_calls, result_id
from flowmem.core.validate import CODES, Violation


def _violation(index: int, code: str, detail: str = "") -> Violation:
    sentence = CODES[code] + (f" ({detail})" if detail else "")
    return Violation(index, code, sentence)


def check_sendable(messages: object) -> list[Violation]:
    """Return every violation a provider would reject, in list order.

    Reads flat and stored rows alike. Checks: entries that are not messages; a system
    row after a non-system row; a tool row leading the list; a tool row that does not
    answer a call of the assistant turn whose result run it sits in; a call with no
    result in that run; a call id declared twice; a result given twice; a call
    without a usable id. ``normalize`` always produces a list with none of these.
    """
    rows = list(messages) if isinstance(messages, (list, tuple)) else []
    found: list[Violation] = []
    seen_other = False
    declared: set[str] = set()
    answered: set[str] = set()
    open_calls: dict[str, int] = {}  # ids of the current turn still waiting for a result
    open_turn = -1

    def close_run() -> None:
        for cid in open_calls:
            found.append(_violation(open_turn, "unanswered_call", f"id {cid!r}"))
        open_calls.clear()

    for index, row in enumerate(rows):
        if not isinstance(row, Mapping) or row.get("role") not in ROLES:
            found.append(_violation(index, "invalid_message"))
            continue
        role = row["role"]
        if role != "tool":
            close_run()
        if role == "system":
            if seen_other:
                found.append(_violation(index, "system_after_non_system"))
            continue
        seen_other = True
        if role == "assistant":
            open_turn = index
            for call in raw_tool_calls(row):
                cid = entry_id(call)
                if cid is None:
                    found.append(_violation(index, "invalid_call_id"))
                elif cid in declared:
                    found.append(_violation(index, "duplicate_call_id", f"id {cid!r}"))
                else:
                    declared.add(cid)
                    open_calls[cid] = index
        elif role == "tool":
            _check_result(index, row, found, answered, open_calls)
    close_run()
    found.sort(key=lambda violation: violation.index)
    return found


def _check_result(
    index: int,
    row: Mapping[str, Any],
    found: list[Violation],
    answered: set[str],
    open_calls: dict[str, int],
) -> None:
    if index == 0:
        found.append(_violation(index, "tool_leading"))
        return
    rid = result_id(row)
    if rid is not None and rid in answered:
        found.append(_violation(index, "duplicate_result", f"id {rid!r}"))
    elif rid is None or rid not in open_calls:
        found.append(_violation(index, "orphan_result", f"id {rid!r}"))
    else:
        del open_calls[rid]
        answered.add(rid)
