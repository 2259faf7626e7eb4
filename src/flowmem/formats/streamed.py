"""A provider-format read written page by page (issue 38 §2, decision 0113): ``rows_to_X`` a page at a time.

A provider read normalizes the whole buffer (MEM-5, ``keep_content``) and converts
it (``write_document``). Normalization is global: system rows move to the front and
repair pairs every call with its result across the whole list. A stored buffer was
repaired on the way in, so normalization usually only moves system rows: when a
first pass over every row (``Sendable``: the fast path's scan, ``fast._Scan``, over
the system rows, then over the others, each fed on its own) finds nothing else it
would change, the normalized rows are the system rows, then every other row, each
built alone; any other buffer (``Sendable.rows`` says None) is written by the
caller with ``core.normalize_pages`` (the repair scan in two passes) instead of ``Rows``.

The conversion then runs a page of rows at a time (``PageWriter``) with what it
carries from one row to the next: the ids of the calls seen (their kinds, names,
the ones left out) and, for Anthropic and Gemini, which merge neighbouring turns of
one side into one message, the last message: held until the next row says whether
it merges, then written as it grows (a run of user rows is one message there).
The system rows are held (the first pass keeps them: Anthropic's ``system`` and
Gemini's ``system_instruction`` are one value written before the messages). The
messages are those ``rows_to_X`` writes for the whole list; oracle:
``tests/api/test_provider_pages.py`` (the same bytes as the whole read, for random
histories and small pages).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flowmem.core import Message
from flowmem.formats import anthropic, gemini, openai_chat, responses
from flowmem.formats._common import extra_of, note
from flowmem.formats.fast import _Scan
from flowmem.formats.gemini_parts import FMT as GEMINI
from flowmem.formats.gemini_parts import write_camel


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


Render = Callable[[object], bytes]


class PageWriter:
    """``rows_to_X`` of format ``fmt`` a page of normalized rows at a time, as the ``messages`` array's bytes.

    ``render`` writes JSON as the API does. A message Anthropic or Gemini may still
    merge the next row into is held until a row starts another one; once a row
    merges into it, its opening and its blocks so far are written and each next
    row's blocks follow as they come, so a run of same-side turns is never held.
    ``not_carried``: what the format left out, by kind, in the order the whole
    conversion counts it (the system rows' last, ``end``).
    """

    def __init__(self, fmt: str, systems: list[Message], render: Render) -> None:
        self.fmt = fmt
        self.render = render
        self.not_carried: dict[str, int] = {}
        self._skipped: dict[str, str] = {}
        self._kinds: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self._unnamed: set[str] = set()
        self._system_notes: dict[str, int] = {}
        self._written = False  # a message of the array was written
        self._open: dict[str, Any] | None = None  # the last message, Anthropic's or Gemini's, not written
        self._streaming = False  # its opening and items were written: only more items may follow
        self._items = 0  # the items written in its array
        self.system: Any = None
        self.lead = b""  # OpenAI, Responses: the system rows' messages, first
        if fmt == "anthropic":
            self.system = anthropic._system(systems, self._system_notes)
        elif fmt == "gemini":
            self.system = gemini._system_instruction(systems, self._system_notes)
        else:
            self.lead = self.page(systems)

    def page(self, rows: list[Message]) -> bytes:
        """The bytes of what the next rows write (Anthropic, Gemini: the last message may stay open)."""
        dropped = self.not_carried
        if self.fmt == "openai":
            written = (openai_chat._ROW_TO[row["role"]](row, dropped, self._skipped) for row in rows)
            return self._whole([message for message in written if message is not None])
        if self.fmt == "responses":
            return self._whole([item for row in rows for item in responses._row_items(row, self._kinds, dropped)])
        out: list[bytes] = []
        for row in rows:
            if self.fmt == "anthropic":
                self._anthropic(out, row)
            else:
                self._gemini(out, row)
        return b"".join(out)

    def end(self) -> bytes:
        """The message still open; then the system rows' notes join ``not_carried``, last."""
        out: list[bytes] = []
        self._close(out)
        for kind, count in self._system_notes.items():
            self.not_carried[kind] = self.not_carried.get(kind, 0) + count
        self._system_notes = {}
        return b"".join(out)

    def _whole(self, messages: list[Any]) -> bytes:
        if not messages:
            return b""
        text = self.render(messages)[1:-1]
        comma = self._written
        self._written = True
        return b"," + text if comma else text

    def _close(self, out: list[bytes]) -> None:
        """Write the open message: whole, or the end of its array when it was being written."""
        if self._open is None:
            return
        if self._streaming:
            out.append(b"]}")
        else:
            out.append(self._whole([self._finished(self._open)]))
        self._open, self._streaming, self._items = None, False, 0

    def _finished(self, message: dict[str, Any]) -> Any:
        return gemini._finished(message) if self.fmt == "gemini" else message

    def _merge(self, out: list[bytes], key: str, items: list[Any]) -> None:
        """Add ``items`` to the open message's array ``key``, writing its opening on the first merge."""
        message = self._open
        assert message is not None
        if not self._streaming:
            held = message[key]
            shell = self._finished({**message, key: []})
            out.append(self._whole([shell])[:-2])  # up to the open array: ``…"key":[``
            self._streaming, self._items = True, 0
            self._open = {k: v for k, v in message.items() if k != key}
            self._add(out, held, message)
        self._add(out, items, message)

    def _add(self, out: list[bytes], items: list[Any], message: dict[str, Any]) -> None:
        if not items:
            return
        if self.fmt == "gemini" and message.get(gemini._CAMEL) is True:
            items = write_camel(items)
        text = self.render(items)[1:-1]
        out.append(b"," + text if self._items else text)
        self._items += len(items)

    def _push(self, out: list[bytes], role: str, content: Any) -> None:
        """``anthropic._push``: merge into the open message of the same role, else start one."""
        if self._open is not None and self._open["role"] == role:
            if not self._streaming and isinstance(self._open["content"], str):
                text = self._open["content"]
                self._open["content"] = [{"type": "text", "text": text}] if text else []
            more = ([{"type": "text", "text": content}] if content else []) if isinstance(content, str) else content
            self._merge(out, "content", more)
            return
        self._close(out)
        self._open = {"role": role, "content": content}

    def _anthropic(self, out: list[bytes], row: Message) -> None:
        """One non-system row of ``anthropic.rows_to_anthropic``'s loop."""
        dropped, skipped = self.not_carried, self._skipped
        role, content = row["role"], row["content"]
        if role == "user":
            body = content if isinstance(content, str) else anthropic._blocks(content, dropped)
            if body not in ("", []):
                self._push(out, "user", body)
        elif role == "assistant":
            turn = anthropic._assistant_content(row, dropped, skipped)
            if turn is not None:
                self._push(out, "assistant", turn)
        elif row["tool_call_id"] in skipped:
            note(dropped, f"{skipped[row['tool_call_id']]}_result")
        else:
            self._push(out, "user", [anthropic._tool_result(row, dropped)])

    def _gemini(self, out: list[bytes], row: Message) -> None:
        """One non-system row of ``gemini.rows_to_gemini``'s loop, ``gemini._place`` included."""
        dropped, skipped = self.not_carried, self._skipped
        role = row["role"]
        if role == "assistant":
            parts = gemini._model_parts(row, dropped, skipped, self._unnamed, self._names)
        elif role == "user":
            parts = gemini._blocks(row["content"], dropped)
        elif row["tool_call_id"] in skipped:
            note(dropped, f"{skipped[row['tool_call_id']]}_result")
            return
        else:
            parts = [gemini._response_part(row, self._names, dropped, self._unnamed)]
        if not parts:
            return
        extra = gemini._NO_EXTRA if row.get("extra") is None else extra_of(row, GEMINI)
        default = "model" if role == "assistant" else "user"
        if self._open is not None and gemini._joins(extra, self._open, default):
            self._merge(out, "parts", parts)
            return
        self._close(out)
        self._open = gemini._new_content(extra, default, parts)


__all__ = ["PageWriter", "Rows", "Sendable"]
