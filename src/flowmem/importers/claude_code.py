"""Claude Code's session transcripts (``~/.claude/projects/<project>/<session>.jsonl``) read as flowmem rows.

Pure: bytes in, rows out (no I/O). A transcript is JSON Lines, one entry a line,
each with a ``type``. What is read (docs/import.md, decision 0117):

- ``user`` and ``assistant`` entries of the main conversation: their ``message`` is
  an Anthropic Messages API message, read by ``flowmem.formats.from_anthropic``
  (thinking with its signature, redacted thinking, images, ``tool_use``,
  ``tool_result`` with ``is_error``: kept losslessly). The lines of one assistant
  message (one content block a line, the same ``message.id``, one after the
  other) make one assistant row.
- ``isSidechain`` entries (a subagent's own turns) are skipped: the subagent's
  answer is in the main conversation as its ``Task`` tool's result.
- a ``system`` entry with ``subtype: "compact_boundary"`` and the ``isCompactSummary``
  user entry after it: a compaction. The summary starts a new segment; its row
  carries the boundary's metadata.
- ``isApiErrorMessage`` assistant entries (Claude Code's own error notices, never
  the model's) and every other entry type (``summary`` titles, other ``system``
  events, ``file-history-snapshot``, ``queue-operation``, ``progress``, types to
  come) are skipped and counted.

Every row is marked ``extra.claude_code.uuids``: the transcript lines it came from,
which is how a later import knows what is stored already.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flowmem.core import Message, check_storable
from flowmem.errors import InvalidInputError, TranscriptError
from flowmem.formats import from_anthropic

SOURCE = "claude_code"
"""The ``extra`` namespace of the rows an import stores (and the importer's name)."""

_MESSAGE_TYPES = ("user", "assistant")
_FLAGS = ("isSidechain", "isCompactSummary", "isMeta", "isApiErrorMessage")


@dataclass(frozen=True)
class Entry:
    """One ``user`` or ``assistant`` line of the main conversation, checked."""

    line: int
    uuid: str
    role: str
    content: str | list[Any]
    message_id: str | None = None
    timestamp: int | None = None
    compact: Mapping[str, Any] | None = None  # the compaction this summary entry ends (its boundary's facts)
    meta: bool = False


@dataclass(frozen=True)
class Transcript:
    """A whole transcript, checked: its main-conversation entries in file order and what was skipped."""

    entries: tuple[Entry, ...]
    session_id: str | None
    lines: int
    skipped: Mapping[str, int] = field(default_factory=dict)

    def segments(self) -> list[list[Entry]]:
        """The entries cut at each compaction: every segment after the first starts with its summary."""
        out: list[list[Entry]] = [[]]
        for entry in self.entries:
            if entry.compact is not None and out[-1]:
                out.append([])
            out[-1].append(entry)
        return [segment for segment in out if segment]


def _fail(line: int, what: str) -> TranscriptError:
    return TranscriptError(f"line {line}: {what} (nothing was imported)", line=line)


def _decode(raw: bytes, line: int, last: bool) -> dict[str, Any] | None:
    """The line's JSON object; None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(line, f"not UTF-8 at byte {exc.start}") from exc
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        if last:
            raise _fail(line, f"truncated: the file ends inside this line ({exc})") from exc
        raise _fail(line, f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise _fail(line, f"a transcript line must be a JSON object, got {type(value).__name__}")
    try:
        check_storable(value, f"line {line}")
    except InvalidInputError as exc:
        raise _fail(line, exc.message) from exc
    return value


def _string(obj: Mapping[str, Any], name: str, line: int, *, required: bool = False) -> str | None:
    value = obj.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise _fail(line, f"{name!r} must be a non-empty string, got {value!r}"[:300])
    return value


def _flags(obj: Mapping[str, Any], line: int) -> dict[str, bool]:
    flags = {}
    for name in _FLAGS:
        value = obj.get(name, False)
        if not isinstance(value, bool):
            raise _fail(line, f"{name!r} must be true or false, got {value!r}"[:300])
        flags[name] = value
    return flags


def _epoch(obj: Mapping[str, Any], line: int) -> int | None:
    stamp = _string(obj, "timestamp", line)
    if stamp is None:
        return None
    try:
        return int(datetime.fromisoformat(stamp).timestamp())
    except ValueError as exc:
        raise _fail(line, f"'timestamp' is not an ISO 8601 time: {stamp[:100]!r}") from exc


def _message(obj: Mapping[str, Any], kind: str, line: int) -> Mapping[str, Any]:
    message = obj.get("message")
    if not isinstance(message, dict):
        raise _fail(line, f"a {kind} entry needs a 'message' object")
    if message.get("role") != kind:
        raise _fail(line, f"a {kind} entry's message has role {message.get('role')!r}")
    content = message.get("content")
    if not isinstance(content, (str, list)):
        raise _fail(line, f"'message.content' must be a string or a list of blocks, got {type(content).__name__}")
    try:  # every block read as flowmem reads Anthropic's: a bad one is named here, by its line
        from_anthropic(None, [{"role": kind, "content": content}])
    except InvalidInputError as exc:
        raise _fail(line, exc.message.replace("message 0", "message")) from exc
    return message


def _boundary(obj: Mapping[str, Any], line: int) -> dict[str, Any]:
    """The facts of a ``compact_boundary`` entry its summary's row keeps."""
    facts: dict[str, Any] = {"boundary_line": line}
    for name, key in (("uuid", "boundary_uuid"), ("logicalParentUuid", "logical_parent_uuid")):
        value = _string(obj, name, line)
        if value is not None:
            facts[key] = value
    metadata = obj.get("compactMetadata")
    if isinstance(metadata, dict):
        facts["metadata"] = metadata
    return facts


@dataclass
class _Reading:
    """What a transcript's lines gave so far, read one at a time by ``parse_transcript``."""

    entries: list[Entry] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    skipped: dict[str, int] = field(default_factory=dict)
    session: str | None = None
    seen_session: str | None = None  # any entry's, for a file with no main conversation (a subagent's)
    boundary: dict[str, Any] | None = None

    def skip(self, reason: str) -> None:
        """Count a line passed over, by why."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def take(self, obj: Mapping[str, Any], line: int) -> None:
        """Check one decoded line and keep it as an entry, or count why it is passed over."""
        kind = obj.get("type")
        if not isinstance(kind, str) or not kind:
            raise _fail(line, f"'type' must be a non-empty string, got {kind!r}"[:300])
        flags = _flags(obj, line)
        if kind == "system" and obj.get("subtype") == "compact_boundary":
            self.boundary = _boundary(obj, line)
            self.skip("compact_boundary")
            return
        if kind not in _MESSAGE_TYPES:
            self.skip(kind)
            return
        uuid = _string(obj, "uuid", line, required=True)
        message = _message(obj, kind, line)
        stamp = _epoch(obj, line)
        sid = _string(obj, "sessionId", line)
        message_id = _string(message, "id", line) if kind == "assistant" else None
        self.seen_session = sid or self.seen_session
        assert uuid is not None
        reason = self._passed_over(flags, uuid, message)
        if reason is not None:
            self.skip(reason)
            return
        self.session = sid or self.session
        compact = None
        if flags["isCompactSummary"]:
            compact = self.boundary or {}
            self.boundary = None
        self.entries.append(
            Entry(line, uuid, kind, message["content"], message_id, stamp, compact, flags["isMeta"])
        )

    def _passed_over(self, flags: Mapping[str, bool], uuid: str, message: Mapping[str, Any]) -> str | None:
        """Why a message line is not an entry (None: it is); a new uuid is remembered."""
        if flags["isSidechain"]:
            return "sidechain"
        if flags["isApiErrorMessage"]:
            return "api_error"
        if uuid in self.seen:
            return "repeated"
        self.seen.add(uuid)
        return "empty" if message["content"] in ("", []) else None


def parse_transcript(data: bytes) -> Transcript:
    """Read and check a whole Claude Code transcript; TranscriptError names the first bad line.

    Nothing is half-read: a line that is not a JSON object, a truncated last line,
    a ``user``/``assistant`` entry without a ``uuid`` or a ``message`` in Anthropic's
    format, a flag that is not a boolean or a time that is not ISO 8601 refuses
    the whole file.
    """
    raws = data.split(b"\n")
    ends_clean = raws[-1] == b""
    if ends_clean:
        raws.pop()
    reading = _Reading()
    for index, raw in enumerate(raws):
        line = index + 1
        obj = _decode(raw, line, last=index == len(raws) - 1 and not ends_clean)
        if obj is not None:
            reading.take(obj, line)
    return Transcript(
        tuple(reading.entries), reading.session or reading.seen_session, len(raws), reading.skipped
    )


# --- rows -----------------------------------------------------------------------------------


def _turns(entries: Iterable[Entry]) -> list[list[Entry]]:
    """Group the lines of one assistant message (the same ``message.id``, one after the other)."""
    turns: list[list[Entry]] = []
    for entry in entries:
        last = turns[-1][-1] if turns else None
        if (
            last is not None
            and entry.role == "assistant"
            and last.role == "assistant"
            and entry.message_id is not None
            and entry.message_id == last.message_id
        ):
            turns[-1].append(entry)
        else:
            turns.append([entry])
    return turns


def _blocks(content: str | list[Any]) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def turn_rows(turn: list[Entry]) -> list[Message]:
    """The flowmem rows of one turn (``from_anthropic``), each marked with its lines' uuids."""
    first = turn[0]
    content: str | list[Any] = first.content
    if len(turn) > 1:
        content = [block for entry in turn for block in _blocks(entry.content)]
    rows = from_anthropic(None, [{"role": first.role, "content": content}])
    marker: dict[str, Any] = {"uuids": [entry.uuid for entry in turn]}
    if first.message_id is not None:
        marker["message_id"] = first.message_id
    if first.compact is not None:
        marker["compact_summary"] = dict(first.compact)
    if first.meta:
        marker["meta"] = True
    for row in rows:
        extra = row.setdefault("extra", {})
        extra[SOURCE] = dict(marker)
        if first.timestamp is not None:
            row["timestamp"] = first.timestamp
    return rows


def fresh_segments(transcript: Transcript, known: set[str]) -> list[tuple[bool, list[Message], int]]:
    """What a buffer holding the lines ``known`` lacks: per segment, (compacts, rows, lines).

    ``compacts``: the segment's summary is new, so its rows replace the live buffer
    (as the compaction replaced Claude Code's context). Segments before the last
    one whose summary is stored are history already archived: their lines are not
    looked at again. Only lines not in ``known`` make rows, so a message whose first
    lines were stored goes on in a row of its own.
    """
    segments = transcript.segments()
    start = 0
    for index, segment in enumerate(segments):
        if segment[0].compact is not None and segment[0].uuid in known:
            start = index
    out: list[tuple[bool, list[Message], int]] = []
    for segment in segments[start:]:
        fresh = [entry for entry in segment if entry.uuid not in known]
        if not fresh:
            continue
        compacts = fresh[0] is segment[0] and segment[0].compact is not None
        rows = [row for turn in _turns(fresh) for row in turn_rows(turn)]
        out.append((compacts, rows, len(fresh)))
    return out


__all__ = ["SOURCE", "Entry", "Transcript", "fresh_segments", "parse_transcript", "turn_rows"]
