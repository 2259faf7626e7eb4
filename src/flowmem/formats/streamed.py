"""A provider-format read written page by page (issue 38 §2, decision 0113): ``rows_to_X`` a page at a time.

A provider read normalizes the whole buffer (MEM-5, ``keep_content``) and converts
it (``write_document``). Normalization is global: system rows move to the front and
repair pairs every call with its result across the whole list. A stored buffer was
repaired on the way in, so normalization usually only moves system rows: when a
first pass over every row (``Sendable``: the fast path's scan, ``fast._Scan``, over
the system rows, then over the others, each fed on its own) finds nothing else it
would change, the normalized rows are the system rows, then every other row, each
built alone; any other buffer is not written here (``Sendable.rows`` says None)
and is normalized whole by the caller.

The conversion then runs a page of rows at a time (``PageWriter``) with what it
carries from one row to the next: the ids of the calls seen (their kinds, names,
the ones left out) and, for Anthropic and Gemini, which merge neighbouring turns of
one side into one message, the last message, written once a row starts another.
The system rows are held (the first pass keeps them: Anthropic's ``system`` and
Gemini's ``system_instruction`` are one value written before the messages). The
messages are those ``rows_to_X`` writes for the whole list; oracle:
``tests/api/test_provider_pages.py`` (the same bytes as the whole read, for random
histories and small pages).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flowmem.core import Message
from flowmem.formats import anthropic, gemini, openai_chat, responses
from flowmem.formats._common import note
from flowmem.formats.fast import _Scan


class Sendable:
    """The first pass: every stored row, in order; ``rows`` says whether normalization only moves system rows."""

    def __init__(self) -> None:
        self._systems = _Scan(True)
        self._others = _Scan(True)
        self.systems: list[Message] = []
        self.ok = True

    def feed(self, entries: Iterable[Any]) -> None:
        """Take the next stored rows (parsed), in order."""
        for entry in entries:
            if not self.ok:
                return
            system = type(entry) is dict and entry.get("role") == "system"
            row = (self._systems if system else self._others).row(entry)
            if row is None:
                self.ok = False
            elif system:
                self.systems.append(row)

    def rows(self) -> list[Message] | None:
        """The normalized system rows (every other row is built alone, ``row``); None: normalize whole."""
        return self.systems if self.ok and not self._others.pending else None


class Rows:
    """The second pass: the normalized row of each stored row other than a system row, in order."""

    def __init__(self) -> None:
        self._scan = _Scan(True)

    def of(self, entries: Iterable[Any]) -> list[Message]:
        """The rows of the next stored rows (parsed), system rows left out (written first)."""
        out: list[Message] = []
        for entry in entries:
            if entry.get("role") == "system":
                continue
            row = self._scan.row(entry)
            if row is None:  # the first pass said none would be: the buffer changed under the read
                raise ValueError("a stored row the first pass read as sendable is not")
            out.append(row)
        return out


class PageWriter:
    """``rows_to_X`` of format ``fmt`` a page of normalized rows at a time (see the module docstring).

    ``not_carried``: what the format left out, by kind, in the order the whole
    conversion counts it (the system rows' last).
    """

    def __init__(self, fmt: str, systems: list[Message]) -> None:
        self.fmt = fmt
        self.not_carried: dict[str, int] = {}
        self._skipped: dict[str, str] = {}
        self._kinds: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self._unnamed: set[str] = set()
        self._out: list[dict[str, Any]] = []  # Anthropic, Gemini: the last message, still open
        self._system_notes: dict[str, int] = {}
        self.system: Any = None
        self.lead: list[dict[str, Any]] = []  # OpenAI, Responses: the system rows' messages, first
        if fmt == "anthropic":
            self.system = anthropic._system(systems, self._system_notes)
        elif fmt == "gemini":
            self.system = gemini._system_instruction(systems, self._system_notes)
        else:
            self.lead = self.page(systems)

    def page(self, rows: list[Message]) -> list[dict[str, Any]]:
        """The messages the next rows finish, in order (Anthropic, Gemini: the last one may stay open)."""
        dropped = self.not_carried
        if self.fmt == "openai":
            written = (openai_chat._ROW_TO[row["role"]](row, dropped, self._skipped) for row in rows)
            return [message for message in written if message is not None]
        if self.fmt == "responses":
            return [item for row in rows for item in responses._row_items(row, self._kinds, dropped)]
        out = self._out
        for row in rows:
            if self.fmt == "anthropic":
                _anthropic_row(out, row, dropped, self._skipped)
            else:
                _gemini_row(out, row, dropped, self._skipped, self._unnamed, self._names)
        return self._finished(out[:-1], out[-1:])

    def end(self) -> list[dict[str, Any]]:
        """The messages still open; then the system rows' notes join ``not_carried``, last."""
        last = self._finished(self._out, [])
        for kind, count in self._system_notes.items():
            self.not_carried[kind] = self.not_carried.get(kind, 0) + count
        self._system_notes = {}
        return last

    def _finished(self, done: list[dict[str, Any]], open_: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._out = open_
        return [gemini._finished(content) for content in done] if self.fmt == "gemini" else done


def _anthropic_row(out: list[dict[str, Any]], row: Message, dropped: dict[str, int], skipped: dict[str, str]) -> None:
    """One non-system row of ``anthropic.rows_to_anthropic``'s loop."""
    role, content = row["role"], row["content"]
    if role == "user":
        body = content if isinstance(content, str) else anthropic._blocks(content, dropped)
        if body not in ("", []):
            anthropic._push(out, "user", body)
    elif role == "assistant":
        turn = anthropic._assistant_content(row, dropped, skipped)
        if turn is not None:
            anthropic._push(out, "assistant", turn)
    elif row["tool_call_id"] in skipped:
        note(dropped, f"{skipped[row['tool_call_id']]}_result")
    else:
        anthropic._push(out, "user", [anthropic._tool_result(row, dropped)])


def _gemini_row(
    out: list[dict[str, Any]],
    row: Message,
    dropped: dict[str, int],
    skipped: dict[str, str],
    unnamed: set[str],
    names: dict[str, str],
) -> None:
    """One non-system row of ``gemini.rows_to_gemini``'s loop."""
    role = row["role"]
    if role == "assistant":
        parts = gemini._model_parts(row, dropped, skipped, unnamed, names)
    elif role == "user":
        parts = gemini._blocks(row["content"], dropped)
    elif row["tool_call_id"] in skipped:
        note(dropped, f"{skipped[row['tool_call_id']]}_result")
        return
    else:
        parts = [gemini._response_part(row, names, dropped, unnamed)]
    if parts:
        gemini._place(out, row, parts)


__all__ = ["PageWriter", "Rows", "Sendable"]
