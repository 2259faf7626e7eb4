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
lock inside a write, dropping a buffer or a session inside one. ``memory://`` is
SQLite on a private database (decision 0138): there is no other engine.

A kind of data never touches a back-end's private members (names with a leading
``_``): ruff's ``SLF001`` fails ``make lint`` on one (``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from flowmem.core import Repair
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

        A SQL engine creates a claimed session in the transaction and returns None (an
        engine that stored it only once the write succeeds would return it).
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
    "SqlEngine",
    "SqlKind",
    "Tx",
]
