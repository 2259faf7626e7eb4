"""What a provider would reject in a message list (``check_sendable``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowmem.core.fast import fast_entry_id
from flowmem.core.messages import (
    ROLES,
    UNTEXTABLE_KINDS,
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
    """One reason a provider would reject a history: where, a stable code, a sentence.

    ``call``, for a violation about one tool call (``unanswered_call``,
    ``duplicate_call_id``, ``invalid_call_id``), is that call's position in its
    turn's ``tool_calls``; a format whose calls are entries of their own (a
    Responses ``function_call`` item) reports the call's own position with it.
    It is not part of the violation's identity (equality, hash) nor of ``to_dict``.
    """

    index: int
    code: str
    message: str
    call: int | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the violation as a plain dict."""
        return {"index": self.index, "code": self.code, "message": self.message}


_new = object.__new__


def _violation(index: int, code: str, detail: str = "", call: int | None = None) -> Violation:
    """``Violation(index, code, sentence)``, made without the frozen ``__init__``.

    A history can hold a violation per few messages; a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` (a quarter of
    ``check_sendable``'s time on bench/core.py's histories). Filling the instance's
    ``__dict__`` at once makes the same object: equal, same hash and repr
    (tests/core/test_validate.py).
    """
    violation: Violation = _new(Violation)
    violation.__dict__.update(
        index=index,
        code=code,
        message=CODES[code] + (f" ({detail})" if detail else ""),
        call=call,
    )
    return violation


def check_sendable(messages: object, *, systems_first: bool = True) -> list[Violation]:
    """Return every violation a provider would reject, in list order.

    Implements the check that MEM-5's output meets: ``normalize`` (in either mode)
    always produces a list with none of these violations. Reads flat and stored
    rows alike; content may be a string or a list of parts. One scan, one check
    per clause of MEM-5 (each method of ``_Checker`` names its clause):

    - step 1: an entry that is not a message with a known role;
    - step 2: a system row after a non-system row;
    - step 3: a tool row that does not answer a call of the assistant turn whose
      result run it sits in; a call with no result in that run (a ``computer`` or
      ``mcp_approval`` call answered only by a healed text placeholder has none,
      decision 0021); a call id declared twice; a result given twice; a call
      without a usable id;
    - step 4: a tool row leading the list.

    ``systems_first=False`` leaves step 2 out: a system row anywhere is fine, as
    OpenAI's Chat Completions and Responses APIs take system and developer
    messages anywhere (``flowmem.formats.check_payload`` checks each format this
    way; docs/decisions/0049).
    """
    rows = messages if isinstance(messages, (list, tuple)) else ()
    check = _Checker()
    check.systems_anywhere = not systems_first
    result, declarations = check.result, check.declarations  # bound once: called per row
    for index, row in enumerate(rows):
        role = row.get("role") if type(row) is dict else None
        if type(role) is not str or role not in _ROLE_SET:  # not the common case: read it fully
            role = _known_role(row)
        if role is None:
            check.report(index, "invalid_message")
        elif role == "tool":
            result(index, row)
        else:
            if check.open_calls:  # any other row ends the result run
                check.end_run()
            if role == "system":
                check.system(index)
            else:
                check.seen_other = True
                if role == "assistant":
                    declarations(index, row)
    check.end_run()
    check.found.sort(key=lambda violation: violation.index)
    return check.found


def _known_role(row: object) -> str | None:
    """Return a row's role when it is a map with a known role, else None (MEM-5 step 1)."""
    if type(row) is not dict and not isinstance(row, Mapping):
        return None
    role = row.get("role")
    return role if isinstance(role, str) and role in _ROLE_SET else None


class _Checker:
    """The state of one ``check_sendable`` scan and the violations found so far."""

    __slots__ = (
        "answered",
        "declared",
        "found",
        "open_calls",
        "open_turn",
        "seen_other",
        "systems_anywhere",
        "untextable",
    )

    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.seen_other = False  # a non-system row has been seen
        self.declared: set[str] = set()  # every call id declared so far
        self.answered: set[str] = set()  # every call id answered so far
        self.open_calls: dict[str, int] = {}  # calls of ``open_turn`` still waiting: id -> position
        self.open_turn = -1  # the assistant turn whose result run the scan is in
        self.untextable: dict[str, str] = {}  # call id -> kind, for kinds text cannot answer
        self.systems_anywhere = False  # step 2 left out (``systems_first=False``)

    def report(self, index: int, code: str, detail: str = "", call: int | None = None) -> None:
        """Record one violation."""
        self.found.append(_violation(index, code, detail, call))

    def system(self, index: int) -> None:
        """MEM-5 step 2: system messages lead the list."""
        if self.seen_other and not self.systems_anywhere:
            self.report(index, "system_after_non_system")

    def declarations(self, index: int, turn: Mapping[str, Any]) -> None:
        """MEM-5 step 3: each call has a usable id (MEM-11) and "the first declaration owns the pairing".

        The calls declared here open the turn's result run.
        """
        self.open_turn = index
        calls = turn.get("tool_calls")
        if calls is None and "metadata" in turn:
            calls = raw_tool_calls(turn)
        if not isinstance(calls, list):
            return
        declared, open_calls = self.declared, self.open_calls
        for position, call in enumerate(calls):
            cid = fast_entry_id(call)
            if cid is None:
                self.report(index, "invalid_call_id", "", position)
            elif cid in declared:
                self.report(index, "duplicate_call_id", f"id {cid!r}", position)
            else:
                declared.add(cid)
                open_calls[cid] = position
                # call_kind read inline for a dict (one call fewer per declaration): a
                # kind that is not a non-empty string is "function", never untextable
                kind = call.get("kind") if type(call) is dict else call_kind(call)
                if type(kind) is str and kind in UNTEXTABLE_KINDS:
                    self.untextable[cid] = kind

    def result(self, index: int, row: Mapping[str, Any]) -> None:
        """MEM-5 steps 3 and 4: a result answers an open call of its run, once; none leads.

        A healed placeholder cannot answer a call whose kind text cannot answer
        (decision 0021): that call counts as unanswered.
        """
        self.seen_other = True
        if index == 0:
            self.report(index, "tool_leading")
            return
        rid = row.get("tool_call_id")
        if type(rid) is str:  # usable_call_id read inline for the common case, a string
            rid = rid.strip()
            rid = rid if rid and rid != "0" else None
        else:
            rid = usable_call_id(rid)
        if rid is None and "metadata" in row:
            rid = result_id(row)
        open_calls = self.open_calls
        if rid is not None and rid in self.answered:
            self.report(index, "duplicate_result", f"id {rid!r}")
        elif rid is None or rid not in open_calls:
            self.report(index, "orphan_result", f"id {rid!r}")
        else:
            position = open_calls.pop(rid)
            self.answered.add(rid)
            if self.untextable and rid in self.untextable and is_healed(row):
                detail = f"id {rid!r}: a {self.untextable[rid]} call needs a real result"
                self.report(self.open_turn, "unanswered_call", detail, position)

    def end_run(self) -> None:
        """MEM-5 step 3: when a result run ends, each call still open there is unanswered."""
        if self.open_calls:
            for waiting, position in self.open_calls.items():
                self.report(self.open_turn, "unanswered_call", f"id {waiting!r}", position)
            self.open_calls.clear()
