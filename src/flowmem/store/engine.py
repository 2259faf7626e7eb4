"""The store's engine, named: what a kind of data (a package of ``flowmem.store``) may use.

A kind of data — LangGraph's checkpoints, pydantic-ai's conversations, ADK's
sessions, the archive, the listing, the session buffers' heads — runs inside its
back-end's transactions. ``Engine`` is everything it may use of that back-end, and
each back-end implements it once (decision 0114):

- ``reading()``: a handle for several reads that agree (one snapshot);
- ``write(work)``: ``work`` in one write transaction, committed when it returns;
- ``write_at(address, work)``: the same, serialized with the appends to ``address``;
- ``check_guard(tx, guard)``: the write guard's error unless it holds (inside the write).

``SqlEngine`` adds what a SQL back-end (SQLite, PostgreSQL) lends: a connection in
autocommit, the dialect's statements by name and their runner, holding a buffer's
lock inside a write, dropping a buffer or a session inside one. ``MemoryEngine`` is
the ``memory://`` back-end's: its ``MemoryTables`` under its lock, and the steps that
keep a buffer's size and its owner's quota true.

A kind of data never touches a back-end's private members (names with a leading
``_``): ruff's ``SLF001`` fails ``make lint`` on one (``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from flowmem.core import CallIndex, Message, Repair
from flowmem.store.base import Address, SessionRecord, WriteGuard
from flowmem.store.editor import SqlRunner

T = TypeVar("T")
Tx = TypeVar("Tx")

LAST_MAX = 2**62  # a position or ``last`` larger than any buffer's, still a 64-bit integer


class Engine(Protocol[Tx]):
    """A back-end's transactions, seen by a kind of data; ``Tx`` is what a transaction lends."""

    def reading(self) -> AbstractContextManager[Tx]:
        """Lend a handle for several reads that must agree (one snapshot)."""
        ...

    def write(self, work: Callable[[Tx], T]) -> T:
        """Run ``work`` in one write transaction; commit when it returns, roll back when it raises."""
        ...

    def write_at(self, address: Address, work: Callable[[Tx], T], hold: bool = True) -> T:
        """``write``, serialized with the appends to ``address`` (MEM-12).

        ``hold=False``: ``work`` takes the buffer's lock itself, after locks that must
        come first (``SqlEngine.hold_buffer``).
        """
        ...

    def check_guard(self, tx: Tx, guard: WriteGuard | None) -> SessionRecord | None:
        """Raise the guard's error unless it holds, inside the caller's write.

        A SQL engine creates a claimed session in the transaction and returns None; the
        memory engine returns it, for ``MemoryEngine.store_session`` once the write succeeds.
        """
        ...


class DbConnection(Protocol):
    """What the engine's users need of a driver connection (sqlite3 or psycopg)."""

    def execute(self, query: str, params: Any = ..., /) -> Any:
        """Run one statement; return a cursor (``fetchone``, ``fetchall``, ``rowcount``)."""
        ...


C = TypeVar("C", bound=DbConnection)


class SqlEngine(Engine[C], Protocol[C]):
    """A SQL back-end's engine: ``C`` is its driver's connection."""

    @property
    def statements(self) -> Mapping[str, str]:
        """The dialect's statements by name (every kind of data's merged in)."""
        ...

    def connection(self) -> AbstractContextManager[C]:
        """Lend a connection in autocommit (each statement its own transaction)."""
        ...

    def runner(self, conn: C) -> SqlRunner:
        """The ``SqlRunner`` a buffer editor uses on ``conn``."""
        ...

    def hold_buffer(self, conn: C, address: Address) -> None:
        """Serialize the rest of the caller's write with appends to ``address``."""
        ...

    def drop_buffer(self, conn: C, buffer_id: int) -> None:
        """Delete a buffer and all it holds, inside the caller's write."""
        ...

    def drop_session(self, conn: C, session_id: str) -> tuple[int, int] | None:
        """Delete a session and its scope inside the caller's write: (buffers, records), or None."""
        ...

    def record_repairs(self, conn: C, buffer_id: int, repairs: Sequence[Repair]) -> None:
        """Log ``repairs`` in the buffer's repair log inside the caller's write (``store.repairs``)."""
        ...


@dataclass(eq=False)
class MemoryTables:
    """The ``memory://`` engine's data, lent under its lock; the store keeps the rest.

    A kind of data reads the buffers here and changes one only through
    ``MemoryEngine.set_buffer`` / ``drop_buffer``, which keep its size, version and
    owner's quota true.
    """

    records: dict[Address, tuple[str, float | None]] = field(default_factory=dict)
    buffers: dict[Address, list[Message]] = field(default_factory=dict)
    # each buffer's call index as its last append left it; dropped by any other change
    indexes: dict[Address, CallIndex] = field(default_factory=dict)
    sizes: dict[Address, int] = field(default_factory=dict)  # UTF-8 bytes of each buffer's rows
    versions: dict[Address, int] = field(default_factory=dict)  # a buffer's last change
    sessions: dict[str, SessionRecord] = field(default_factory=dict)


class MemoryEngine(Engine[MemoryTables], Protocol):
    """The ``memory://`` back-end's engine: its tables under one lock."""

    def locked(self) -> AbstractContextManager[MemoryTables]:
        """Hold the engine's lock: what runs inside is one atomic step (reads and writes)."""
        ...

    def locked_at(self, address: Address) -> AbstractContextManager[MemoryTables]:
        """``locked``, after the lock that serializes the appends to ``address``."""
        ...

    def store_session(self, tables: MemoryTables, created: SessionRecord | None) -> None:
        """Store the session a guard's claim created, once the write has succeeded."""
        ...

    def set_buffer(
        self, tables: MemoryTables, address: Address, rows: list[Message], size: int
    ) -> None:
        """Store a buffer's rows and size, counted against its owner's quotas."""
        ...

    def drop_buffer(self, tables: MemoryTables, address: Address) -> None:
        """Delete a buffer, counted off its owner's usage."""
        ...

    def stage_repairs(
        self,
        tables: MemoryTables,
        address: Address,
        repairs: Sequence[Repair],
        growth: int = 0,
        created: SessionRecord | None = None,
    ) -> Callable[[], None]:
        """Check ``repairs``' log entries (with ``growth`` more bytes) against the owner's quota.

        The owner of a buffer the write creates is its session's (``created``: one the write makes).

        Returns the step that logs them, to run once the change they record is stored
        (nothing can fail in it); the quota's error, nothing changed, past the quota.
        """
        ...

    def charge(
        self,
        tables: MemoryTables,
        owner: str | None,
        size: int,
        buffers: int,
        records: int,
        count: bool = True,
        check: bool = True,
    ) -> None:
        """Count a change for ``owner``: the quota's error for growth past it.

        ``count=False`` only checks; ``check=False`` only counts (a change checked before).
        """
        ...

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and everything in its scope (the ``Store`` method)."""
        ...


class SqlKind:
    """A kind of data over a SQL back-end's engine: the engine, its dialect's statements by name, their runner."""

    def __init__(self, store: SqlEngine[Any]) -> None:
        self.store = store
        self.sql = store.statements

    def _run(self, conn: Any, name: str, params: Sequence[Any]) -> Any:
        """Run the dialect's statement ``name`` with ``params`` on ``conn``; its cursor."""
        return conn.execute(self.sql[name], params)


__all__ = [
    "LAST_MAX",
    "C",
    "DbConnection",
    "Engine",
    "MemoryEngine",
    "MemoryTables",
    "SqlEngine",
    "SqlKind",
    "Tx",
]
