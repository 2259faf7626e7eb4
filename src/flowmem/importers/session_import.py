"""Storing an imported transcript in a session's buffer through the ``MemoryService`` (or a server's client), idempotently.

Common to every importer: the importer turns its transcript into segments of rows,
each row marked in ``extra.<source>.uuids`` with the transcript lines it came
from; this module reads which lines the buffer holds already (its live rows and
the ones compactions archived), asks the importer for the rows it lacks and
stores them under the append rules:

- a segment's rows go in one append (one transaction): a crash stores all of
  them or none, and the marks are stored in the rows themselves, so the next
  import starts exactly where the stored rows end (decision 0117);
- the append's rules apply as to any caller's: a tool result is stored once
  (MEM-1), a turn whose calls are all known is a duplicate (MEM-2), a user turn
  heals a call left without a result (MEM-3) and a real result replaces the
  placeholder (MEM-10);
- a segment that begins with a compaction's summary first replaces the live
  buffer by the summary, archiving the rows it summarized (``compact_to``), then
  appends the rest.

The session is the caller's (``ExecutionContext.session_id``), created by the
first write owned by ``user_id`` (nobody when None); a session of another owner
refuses the import (AccessDeniedError), and a refusal of the scope stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowmem.core import Message
from flowmem.errors import CompactionStaleError, ScopeRefusedError
from flowmem.results import BufferResult, CompactResult, fields_of
from flowmem.scope import ExecutionContext, Refusal
from flowmem.store.base import SESSION_SCOPE

ATTEMPTS = 3
"""How many times an import reads the buffer again when a concurrent write made its compaction stale."""

class ImportTarget(Protocol):
    """Where an import stores: a ``MemoryService`` (a database) or a ``flowmem.client.Client`` (a server)."""

    def load(
        self, scope: str, key: str, context: ExecutionContext | None, last: int | None = None, *, include_archived: bool = False
    ) -> BufferResult:
        """The buffer's rows, the archived ones first."""
        ...

    def append(self, scope: str, key: str, messages: object, context: ExecutionContext | None) -> BufferResult:
        """Append under the append rules (MEM-1, 2, 3, 10)."""
        ...

    def compact_to(self, scope: str, key: str, context: ExecutionContext | None, messages: object) -> CompactResult:
        """Archive every live row and put ``messages`` in their place."""
        ...


Plan = Callable[[set[str]], list[tuple[bool, list[Message], int]]]
"""An importer's plan: given the stored lines' uuids, per segment (compacts, rows, lines)."""


@dataclass(frozen=True)
class ImportResult:
    """What an import stored: new lines read, rows stored, compactions replayed, the buffer after."""

    session_id: str
    key: str
    lines_new: int = 0
    rows_stored: int = 0
    compactions: int = 0
    count: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``flowmem import --json`` prints."""
        return {**fields_of(self), "skipped": dict(sorted(self.skipped.items()))}


def stored_lines(rows: list[Message], source: str) -> set[str]:
    """The transcript line uuids the rows are marked with (``metadata.extra.<source>.uuids``)."""
    found: set[str] = set()
    for row in rows:
        extra = row.get("metadata", {}).get("extra")
        mark = extra.get(source) if isinstance(extra, Mapping) else None
        uuids = mark.get("uuids") if isinstance(mark, Mapping) else None
        if isinstance(uuids, list):
            found.update(u for u in uuids if isinstance(u, str))
    return found


def _refused(refusal: Refusal) -> ScopeRefusedError:
    return ScopeRefusedError(f"the import's session was refused: {refusal.sentence} (nothing was imported)")


def import_rows(
    service: ImportTarget,
    context: ExecutionContext,
    key: str,
    source: str,
    plan: Plan,
    skipped: Mapping[str, int] | None = None,
) -> ImportResult:
    """Store in the session's buffer ``key`` what ``plan`` says it lacks; idempotent (module docstring)."""
    session_id = str(context.session_id)
    lines = rows_stored = compactions = 0
    count = 0
    for attempt in range(ATTEMPTS):
        loaded = service.load(SESSION_SCOPE, key, context, include_archived=True)
        if loaded.refusal is not None:
            raise _refused(loaded.refusal)
        count = loaded.count
        try:
            for compacts, rows, new_lines in plan(stored_lines(loaded.messages, source)):
                if compacts:
                    done = service.compact_to(SESSION_SCOPE, key, context, rows[:1])
                    if done.refusal is not None:
                        raise _refused(done.refusal)
                    compactions, rows_stored, rows = compactions + 1, rows_stored + 1, rows[1:]
                    count = done.count
                if rows:
                    result = service.append(SESSION_SCOPE, key, rows, context)
                    if result.refusal is not None:
                        raise _refused(result.refusal)
                    rows_stored += result.appended
                    count = result.count
                lines += new_lines
            break
        except CompactionStaleError:
            if attempt == ATTEMPTS - 1:
                raise
    return ImportResult(session_id, key, lines, rows_stored, compactions, count, dict(skipped or {}))


__all__ = ["ATTEMPTS", "ImportResult", "ImportTarget", "Plan", "import_rows", "stored_lines"]
