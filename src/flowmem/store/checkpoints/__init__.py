"""Checkpoint storage: LangGraph's checkpoints, channel values and pending writes.

A checkpointer's thread is a flowmem session (DESIGN.md §5, decision 0040): every row
here carries the session id as ``thread_id`` and is deleted with the session (session
delete, ``flowmem user erase``). A message channel's values are not stored here but
as rows of the session's buffers (*lines*); its channel version here is a reference,
``(buffer key, row count)``, so a thread's messages are stored once, not once per step.

``Checkpoints`` is the protocol every backend implements (``SqlCheckpoints`` over
SQLite, ``memory://`` among them, and PostgreSQL); ``checkpoints_of(store)`` gives the one
of a store. Values are opaque bytes with a type tag (LangGraph's serializer decides
them); nothing here imports LangGraph.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from flowmem.core import Message
from flowmem.errors import InvalidInputError, LineMovedError, ThreadForkedError
from flowmem.store.base import WriteGuard
from flowmem.store.values import Capability

ROWS_TYPE = "flowmem.rows"
"""The type tag of a channel value stored as rows of a session buffer (a line)."""
LINE_PREFIX = "langgraph"
"""Every line's buffer key starts with this."""
MAX_ID_LENGTH = 255


@dataclass(frozen=True)
class StoredCheckpoint:
    """One checkpoint as stored: its ids, the serialized checkpoint and metadata, its run."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: tuple[str, bytes]
    metadata: tuple[str, bytes]
    run_id: str | None = None
    versions: Mapping[str, Any] = field(default_factory=dict)
    """The checkpoint's channel versions, as JSON keeps them (``str``, ``int`` or ``float``):
    what it references (pruning keeps those blobs). A blob's version is ``str(version)``."""


@dataclass(frozen=True)
class StoredBlob:
    """One channel value at one version: serialized bytes and their type tag."""

    channel: str
    version: str
    value: tuple[str, bytes]


@dataclass(frozen=True)
class StoredWrite:
    """One pending write of a task, at its index."""

    task_id: str
    idx: int
    channel: str
    value: tuple[str, bytes]
    task_path: str = ""


@dataclass(frozen=True)
class LineAppend:
    """Rows to add verbatim at the end of a line, whose buffer must hold ``expect`` rows now."""

    key: str
    expect: int
    rows: Sequence[Message]


@dataclass(frozen=True)
class Head:
    """The thread's latest checkpoint a write expects (``checkpoint_id`` None: no checkpoint)."""

    checkpoint_id: str | None


class CheckpointPut(NamedTuple):
    """What one ``put_checkpoint`` stores in one transaction: a checkpoint, its new blobs, its lines' rows.

    ``guard`` claims the session (``SessionClaim``); ``head``: the thread's latest
    checkpoint the write expects (None: not checked).
    """

    checkpoint: StoredCheckpoint
    blobs: Sequence[StoredBlob]
    lines: Sequence[LineAppend]
    guard: WriteGuard | None = None
    head: Head | None = None


class PendingWrites(NamedTuple):
    """What one ``put_writes`` stores: a checkpoint's pending writes, under ``guard`` (its session's claim)."""

    thread_id: str
    ns: str
    checkpoint_id: str
    writes: Sequence[StoredWrite]
    guard: WriteGuard | None = None


class CheckpointFilter(NamedTuple):
    """Which checkpoints ``list_checkpoints`` lists: a thread's, in a namespace, one id, before an id (None: any)."""

    thread_id: str | None
    ns: str | None
    checkpoint_id: str | None = None
    before: str | None = None


class Checkpoints(Protocol):
    """Checkpoint tables of one store, and the lines (session buffers) their messages live in."""

    def put_checkpoint(self, put: CheckpointPut) -> None:
        """Store a checkpoint, its new blobs and line rows in one transaction.

        ``head``: the thread's latest checkpoint in that namespace must be this one, else
        ``ThreadForkedError`` and nothing is stored. A line whose buffer does not hold
        ``expect`` rows raises ``LineMovedError``, nothing stored. ``guard`` claims the
        session (``SessionClaim``): the thread's session is created by its first write.
        """
        ...

    def put_writes(self, pending: PendingWrites) -> None:
        """Store pending writes; a write at an index >= 0 already stored is kept, < 0 replaced."""
        ...

    def delete_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        """Delete the pending writes stored under one checkpoint id."""
        ...

    def get_checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        """The checkpoint with that id, or the thread's latest in ``ns`` when None."""
        ...

    def list_checkpoints(self, asked: CheckpointFilter) -> Iterator[StoredCheckpoint]:
        """Checkpoints newest first, read in batches; None ``thread_id``/``ns``: every one."""
        ...

    def get_blobs(
        self, thread_id: str, ns: str, versions: Mapping[str, str]
    ) -> list[StoredBlob]:
        """The blobs of these channel versions that exist."""
        ...

    def get_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> list[StoredWrite]:
        """The pending writes of one checkpoint, in (task_id, idx) order."""
        ...

    def line_rows(self, thread_id: str, key: str, count: int) -> list[Message]:
        """The first ``count`` rows of a line (fewer when the buffer was cut)."""
        ...

    def line_count(self, thread_id: str, key: str) -> int:
        """How many rows a line's buffer holds now (0 when there is none)."""
        ...

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs, writes and lines (its session stays)."""
        ...

    def copy_thread(self, source: str, target: str, guard: WriteGuard | None = None) -> None:
        """Copy every checkpoint, blob, write and line of ``source`` to ``target``."""
        ...

    def prune(self, thread_ids: Sequence[str], keep_latest: bool) -> None:
        """Keep only the latest checkpoint per namespace (``keep_latest``), or delete all.

        Writes whose checkpoint does not exist (a refused run's) go too.
        """
        ...

    def run_threads(self, run_ids: Sequence[str]) -> list[str]:
        """The threads holding a checkpoint these runs made, sorted (who owns them is judged by the caller)."""
        ...

    def delete_for_runs(self, run_ids: Sequence[str], threads: Collection[str] | None = None) -> None:
        """Delete the checkpoints made by these runs, and their writes: on ``threads`` only, when given."""
        ...


def forked(thread_id: str, latest: str | None, parent: str | None) -> ThreadForkedError:
    """The refusal of a checkpoint whose parent is not its thread's latest (decision 0040)."""
    return ThreadForkedError(
        f"thread {thread_id!r} moved on while this run wrote it: its latest checkpoint is "
        f"{latest!r}, not this checkpoint's parent {parent!r}; nothing was stored. Run the "
        "turn again on the thread's latest state (docs/decisions/0040)",
        thread_id=thread_id,
        latest=latest,
        parent=parent,
    )


def line_moved(key: str, held: int, expect: int) -> LineMovedError:
    """The refusal of line rows whose buffer no longer has the count the write expected."""
    return LineMovedError(f"line {key!r} holds {held} rows, not {expect}", key=key)


def check_thread_text(value: object, name: str) -> str:
    """Return ``value`` when it is a string of at most 255 code points; else raise."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}", argument=name)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInputError(
            f"{name} must be at most {MAX_ID_LENGTH} characters long, got {len(value)}",
            argument=name,
        )
    return value


checkpoints_of = Capability[Checkpoints]("checkpoints", "checkpoints")
"""The ``Checkpoints`` of a store; TypeError for a store that has none."""


__all__ = [
    "LINE_PREFIX",
    "ROWS_TYPE",
    "Checkpoints",
    "Head",
    "LineAppend",
    "LineMovedError",
    "StoredBlob",
    "StoredCheckpoint",
    "StoredWrite",
    "ThreadForkedError",
    "check_thread_text",
    "checkpoints_of",
    "forked",
    "line_moved",
]
