"""The formats' speed twin: the rows every ``to_X`` converts, without repair when none is needed.

Nothing here is a rule of its own. ``provider_rows`` returns exactly what
``_common.normalized`` returns (MEM-5 with ``keep_content=True``, decision 0021),
and is kept for speed only (issue 26 §4, docs/performance.md): a history that
needs no repair (the common case: what a store hands back was repaired on the way
in) is read in one scan that builds each row as step 1 would and checks that
steps 2 to 4 would change nothing; any other history goes through ``normalized``.
Oracle: ``tests/formats/test_fast.py`` (hypothesis properties: the same rows, and
every ``to_X`` equal to ``flowmem.formats.plain``'s on every history).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowmem.core import UNTEXTABLE_KINDS, Message
from flowmem.core.fast import fast_entry_id
from flowmem.formats._common import normalized


def provider_rows(messages: object, systems_first: bool = True) -> list[Message]:
    """``normalized(messages, systems_first)``, in one scan when the history needs no repair."""
    if type(messages) is list:
        rows = sendable_rows(messages, systems_first)
        if rows is not None:
            return rows
    return normalized(messages, systems_first)


def sendable_rows(entries: list[Any], systems_first: bool = True) -> list[Message] | None:
    """Return the flat rows of a history normalization would not change, or None for any other.

    Each row is built as MEM-5 step 1 builds it under ``keep_content`` (content,
    ``extra``, ``is_error``, the call entries in a new list, the caller's own
    entries). None as soon as a step would act: an entry that is not a plain dict
    with a known role, content that is neither text nor a list of parts, a system
    row after the conversation began (with ``systems_first``), a call without a
    usable id or declared twice, a call of a kind text cannot answer, a result
    outside its turn's run or answering nothing, an unanswered call, an assistant
    turn with nothing in it.
    """
    scan = _Scan(systems_first)
    out: list[Message] = []
    for entry in entries:
        row = scan.row(entry)
        if row is None:
            return None
        out.append(row)
    return None if scan.pending else out


def _content(content: object) -> Any:
    """Content as step 1 keeps it (text, or a new list of the same parts); None when step 1 would coerce it."""
    if type(content) is str:
        return content
    if type(content) is not list:
        return None
    for part in content:
        if type(part) is not dict or type(part.get("type")) is not str:
            return None
    return list(content)


class _Scan:
    """One scan of a history: the calls declared so far and the open turn's, read row by row."""

    __slots__ = ("began", "declared", "pending", "systems_first")

    def __init__(self, systems_first: bool) -> None:
        self.systems_first = systems_first
        self.declared: set[str] = set()
        self.pending: set[str] | None = None  # the open turn's calls still unanswered
        self.began = False  # a row other than a system row has been read

    def row(self, entry: object) -> Message | None:
        """Return the row of one entry, or None when normalization would act on it."""
        if type(entry) is not dict:
            return None
        meta = entry.get("metadata")
        if meta is not None and type(meta) is not dict:
            return None
        content = _content(entry.get("content"))
        role = entry.get("role")
        if content is None or type(role) is not str:
            return None
        if role == "tool":
            return self._result(entry, meta, content)
        if self.pending:
            return None  # a call left unanswered: repair heals it
        self.pending = None
        read = _READERS.get(role)
        if read is None:
            return None
        row: Message = {"role": role, "content": content}
        _kept_fields(entry, meta, row, False)
        return read(self, entry, meta, row)

    def _result(self, entry: dict[str, Any], meta: dict[str, Any] | None, content: Any) -> Message | None:
        rid = entry.get("tool_call_id")
        if rid is None and meta is not None:
            rid = meta.get("tool_call_id")
        if not self.pending or type(rid) is not str or rid not in self.pending:
            return None
        self.pending.discard(rid)
        row: Message = {"role": "tool", "content": content, "tool_call_id": rid}
        _kept_fields(entry, meta, row, True)
        return row

    def _turn(self, entry: dict[str, Any], meta: dict[str, Any] | None, row: Message) -> Message | None:
        self.began = True
        calls = entry.get("tool_calls")
        if calls is None and meta is not None:
            calls = meta.get("tool_calls")
        if calls:
            self.pending = _declared(calls, self.declared)
            if self.pending is None:
                return None
            row["tool_calls"] = list(calls)
        elif (calls is not None and calls != []) or row["content"] in ("", []):
            return None
        return row

    def _user(self, entry: dict[str, Any], meta: dict[str, Any] | None, row: Message) -> Message | None:
        self.began = True
        return row

    def _system(self, entry: dict[str, Any], meta: dict[str, Any] | None, row: Message) -> Message | None:
        return None if self.systems_first and self.began else row


_READERS: dict[str, Callable[[_Scan, dict[str, Any], dict[str, Any] | None, Message], Message | None]] = {
    "assistant": _Scan._turn,
    "user": _Scan._user,
    "system": _Scan._system,
}
"""The reader of each role but ``tool`` (a role not here is unreadable: step 1 drops it)."""


def _declared(calls: object, declared: set[str]) -> set[str] | None:
    """The ids of a turn's calls, each recorded as declared; None if repair would change the turn."""
    if type(calls) is not list:
        return None
    ids: set[str] = set()
    for call in calls:
        if type(call) is not dict:
            return None
        cid = fast_entry_id(call)
        if cid is None or cid in declared:
            return None
        kind = call.get("kind")
        if type(kind) is str and kind in UNTEXTABLE_KINDS:
            return None
        declared.add(cid)
        ids.add(cid)
    return ids


def _kept_fields(entry: dict[str, Any], meta: dict[str, Any] | None, row: Message, tool: bool) -> None:
    """Copy ``extra`` and, on a tool row, ``is_error`` as step 1 does (top level first, else metadata)."""
    extra = entry.get("extra")
    if extra is None and meta is not None:
        extra = meta.get("extra")
    if extra is not None and isinstance(extra, Mapping):
        row["extra"] = dict(extra)
    if tool:
        flag = entry.get("is_error")
        if flag is None and meta is not None:
            flag = meta.get("is_error")
        if type(flag) is bool:
            row["is_error"] = flag


def plain_call(call: object) -> tuple[str, str, Any] | None:
    """Return ``(id, name, args)`` of a plain function call entry without extras, or None for any other.

    ``read_entry`` read inline for the common entry (a dict with a string id and
    name, ``args``, no ``kind`` but ``function``, no ``extra``), so a converter can
    write it without looking for kinds, custom inputs or provider fields. Oracle:
    ``tests/formats/test_fast.py`` (equal to ``read_entry`` wherever it answers).
    """
    if type(call) is not dict or call.get("extra") is not None or "args" not in call:
        return None
    kind = call.get("kind")
    if kind is None:
        if call.get("type") == "custom":
            return None
    elif kind != "function":
        return None
    name = call.get("name")
    cid = fast_entry_id(call)
    if type(name) is not str or cid is None:
        return None
    args = call["args"]
    return cid, name, {} if args is None else args
