"""A loan is lent a connection already in its mode (decision 0186): the same pragmas, fewer statements.

Each loan of a SQLite store's pool sets three pragmas (``busy_timeout``, ``synchronous``,
``wal_autocheckpoint``), each only when it changes on the connection. A pydantic-ai turn
loads in no-wait mode on the event loop and saves in the worker's waiting mode: on the one
pooled connection that was six pragma statements a turn. ``SqlitePool.lends_by_mode``
lends an idle connection already in the loan's mode, or opens one more while the pool
holds fewer than ``MODE_POOL``; the plain path (False) lends the last one given back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import pytest

from flowmem.store import Address
from flowmem.store.locks import no_wait
from flowmem.store.sqlite import SqliteStore
from flowmem.store.sqlite import store as store_module
from flowmem.store.sqlite.driver import _Connection
from flowmem.store.sqlite.pool import MODE_POOL

KEY = Address("session", "s1", "chat")

PRAGMAS = ("busy_timeout", "synchronous", "wal_autocheckpoint")


@pytest.fixture
def pragmas_run(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every ``PRAGMA name = value`` statement a store's connections run from now on."""
    seen: list[str] = []
    real = _Connection.execute

    def execute(conn: _Connection, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.startswith("PRAGMA") and "=" in sql:
            seen.append(sql)
        return real(conn, sql, *args)

    monkeypatch.setattr(_Connection, "execute", execute)
    yield seen


def _in_effect(conn: sqlite3.Connection) -> tuple[int, ...]:
    """The three pragmas as SQLite reports them on ``conn`` (not as the pool remembers them)."""
    return tuple(
        int(sqlite3.Connection.execute(conn, f"PRAGMA {name}").fetchone()[0]) for name in PRAGMAS
    )


def _modes(store: SqliteStore) -> list[AbstractContextManager[Any]]:
    """Loans in each mode a store's callers lend in: waiting, no-wait, deferred, inside a commit block."""
    return [ExitStack(), no_wait(), store.deferred(), store._commits.commit()]


def _loans(store: SqliteStore, order: list[int]) -> tuple[list[tuple[int, ...]], set[int]]:
    """Lend in the modes of ``order`` (indices of ``_modes``), one after another: each loan's pragmas and the connections lent."""
    seen: list[tuple[int, ...]] = []
    lent: set[int] = set()
    for at in order:
        with _modes(store)[at], store._connection() as conn:
            seen.append(_in_effect(conn))
            lent.add(id(conn))
    return seen, lent


def _store(path: Path, by_mode: bool) -> SqliteStore:
    store = SqliteStore(f"sqlite:///{path}")
    store.lends_by_mode = by_mode
    return store


def test_a_turn_of_a_load_in_no_wait_mode_and_a_save_sets_no_pragma_once_both_modes_have_a_connection(
    tmp_path: Path, pragmas_run: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pydantic-ai turn's loans: the load on the event loop (no wait), the save in the worker (waiting).

    A write that waited over 10 ms for its turn sets what is left of its bound as its wait
    (``_left``): on a loaded machine the scheduler alone can make it; not this test's.
    """
    monkeypatch.setattr(store_module, "_left", lambda bound, started: bound)
    store = _store(tmp_path / "turns.db", by_mode=True)
    try:
        for turn in range(3):
            pragmas_run.clear()
            with no_wait():
                store.load(KEY)
            store.append(KEY, [{"role": "user", "content": f"turn {turn}"}])
            if turn:  # before: busy_timeout, synchronous, wal_autocheckpoint twice a turn
                assert pragmas_run == []
        assert len(store._idle) == 2
        assert store.count(KEY) == 3
    finally:
        store.close()


def test_the_plain_path_switches_the_one_connection_back_and_forth(
    tmp_path: Path, pragmas_run: list[str]
) -> None:
    """``lends_by_mode`` False: the one pooled connection, its pragmas set again on every change of mode."""
    store = _store(tmp_path / "plain.db", by_mode=False)
    try:
        for _ in range(2):
            pragmas_run.clear()
            with store.deferred():
                store.load(KEY)
            store.append(KEY, [{"role": "user", "content": "x"}])
        assert len(store._idle) == 1
        assert len(pragmas_run) == 6
    finally:
        store.close()


@pytest.mark.parametrize(
    "order", [[0, 1, 0, 1, 2, 3, 2, 0], [3, 3, 1, 2, 0, 1, 2, 3, 0, 2], [1, 2, 3, 0, 0, 3, 1]]
)
def test_each_loan_runs_with_the_same_pragmas_as_on_the_plain_path_and_the_pool_stays_small(
    tmp_path: Path, order: list[int]
) -> None:
    """The seam's oracle: loan by loan, the pragmas SQLite reports are the plain path's; at most ``MODE_POOL`` connections."""
    results = {}
    for by_mode in (False, True):
        store = _store(tmp_path / f"{by_mode}.db", by_mode)
        try:
            results[by_mode] = _loans(store, order)
        finally:
            store.close()
    assert results[True][0] == results[False][0]
    assert len({mode for mode in results[False][0]}) >= 3  # the loans are in different modes
    assert len(results[False][1]) == 1
    assert 1 < len(results[True][1]) <= MODE_POOL


def test_loans_at_once_each_get_a_connection_and_are_in_their_mode(tmp_path: Path) -> None:
    """Beyond ``MODE_POOL`` a loan in another mode takes an idle one and sets its pragmas, as the plain path does."""
    store = _store(tmp_path / "many.db", by_mode=True)
    try:
        with ExitStack() as held:
            conns = [held.enter_context(store._connection()) for _ in range(MODE_POOL + 1)]
            assert len({id(conn) for conn in conns}) == MODE_POOL + 1
        with store.deferred(), store._connection() as conn:
            assert _in_effect(conn) == (0, 1, 0)  # NORMAL, no automatic checkpoint
        assert len(store._idle) == MODE_POOL + 1
        with store._connection() as conn:
            assert _in_effect(conn) == (5000, 2, 1000)  # FULL: the URL's
    finally:
        store.close()
