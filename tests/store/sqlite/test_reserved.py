"""SQLite's migration 25 (decision 0137, "the reservation"): a buffer's bytes reserved in ``user_usage``.

A growing append checks the bytes quota against ``user_usage.bytes``, an upper bound
(the owner's other bytes and every buffer's reservation), and sums the owner's buffers
only when that bound is over the quota: its cost does not grow with the owner's buffer
count (counted in SQLite VM steps, not timed), a refusal is still exact, and the
invariant holds after any writes and deletes. Since migration 26 (decision 0144) the
growth trigger's body runs only when it has work: an append growing inside its
reservation under the quota pays its ``WHEN`` alone.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas
from flowmem.store.sqlite import SqliteStore, reserved
from flowmem.store.sqlite.schema import MIGRATIONS
from tests.migrated import migrated_sqlite_url
from tests.store.reserved_cases import OP, exact_fit_then_one_byte_over, grow, run_ops
from tests.store.undo_held import undo_held


def _steps_of_append(store: SqliteStore, address: Address, text: str) -> int:
    """How many SQLite VM instructions the append of ``text`` to ``address`` ran (triggers included)."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with store._connection() as conn:  # the store's one writer connection
        conn.set_progress_handler(count, 1)
    try:
        grow(store, address, text)
    finally:
        with store._connection() as conn:
            conn.set_progress_handler(None, 1)
    assert steps[0] > 0  # the append ran on the connection counted
    return steps[0]


def test_a_growing_append_costs_the_same_with_2000_buffers_of_its_owner_under_a_bytes_quota(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/many.db")
    store.set_quotas(Quotas(bytes=1 << 30, buffers=10_000))
    try:
        for n in range(2000):
            grow(store, Address("user", "alice", f"b{n}"), "x")
        grow(store, Address("user", "bob", "b0"), "x")
        grow(store, Address("user", "carol", "b0"), "x")
        for text in ("hello there", "y" * 20_000):  # inside the reservation, then past it (reserved again)
            many = _steps_of_append(store, Address("user", "alice", "b0"), text)
            one = _steps_of_append(store, Address("user", "bob", "b0"), text)
            assert many <= one + 20, (text[:5], many, one)  # before: a sum over 2,000 headers each
        assert store.usage("alice").bytes == store.usage("bob").bytes + 1999 * store.usage("carol").bytes
    finally:
        store.close()


def test_a_growing_append_inside_its_reservation_under_the_quota_pays_the_growth_triggers_when_alone(
    tmp_path: Path,
) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/gated.db")
    store.set_quotas(Quotas(bytes=1 << 30))
    chat = Address("user", "alice", "chat")
    try:
        grow(store, chat, "first")  # reserves 16 KiB more than it holds
        _steps_of_append(store, chat, "warm")
        gated = _steps_of_append(store, chat, "hello there")
        with sqlite3.connect(store.path) as conn:
            conn.execute("DROP TRIGGER usage_buffer_bytes")
        _steps_of_append(store, chat, "warm")  # the schema read again
        unchecked = _steps_of_append(store, chat, "hello there")
        # the WHEN (the growth, the reservation, the usage row's one read): 49 steps; its
        # body (a reservation, a give-back and a check that change nothing here) ran 35 more
        assert 0 < gated - unchecked <= 60, (gated, unchecked)
    finally:
        store.close()


def test_a_database_at_migration_25_gets_the_gated_growth_trigger(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/older.db")
    chat = Address("user", "alice", "chat")
    grow(store, chat, "first")
    store.close()
    with sqlite3.connect(store.path) as conn:  # back to migration 25's trigger
        undo_held(conn)  # and before migration 27 (decision 0148)
        conn.execute("DROP TRIGGER usage_buffer_bytes")
        conn.execute(next(s for s in reserved.MIGRATION if s.startswith("CREATE TRIGGER usage_buffer_bytes")))
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 26")
    again = SqliteStore(f"sqlite:///{store.path}")
    try:
        with sqlite3.connect(store.path) as conn:
            (text,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'usage_buffer_bytes'").fetchone()
        assert text == reserved.GATED[1] and again.schema_version() == len(MIGRATIONS)
        again.set_quotas(Quotas(bytes=again.usage("alice").bytes + 5))
        with pytest.raises(QuotaExceededError):  # inside its reservation, the lowered quota still refuses
            grow(again, chat, "more than five bytes")
        assert again.count(chat) == 1
    finally:
        again.close()


def test_a_write_that_fits_the_bytes_quota_exactly_passes_one_byte_more_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/edge.db")
    try:
        exact_fit_then_one_byte_over(store)
    finally:
        store.close()


def _check_invariant(store: SqliteStore) -> None:
    """user_usage.bytes = records' bytes + Σ reserved; reserved covers each buffer; usage is exact."""
    with sqlite3.connect(store.path) as conn:
        (usage,) = conn.execute(
            "SELECT COALESCE((SELECT bytes FROM user_usage WHERE user_id = 'alice'), 0)"
        ).fetchone()
        (records,) = conn.execute(
            "SELECT COALESCE(SUM(length(CAST(value AS BLOB))), 0) FROM records WHERE owner = 'alice'"
        ).fetchone()
        reserved, used, short = conn.execute(
            """SELECT COALESCE(SUM(reserved), 0), COALESCE(SUM(bytes + log_bytes), 0),
                COALESCE(SUM(reserved < bytes + log_bytes), 0) FROM buffers WHERE owner = 'alice'"""
        ).fetchone()
    assert usage == records + reserved and short == 0
    assert store.usage("alice").bytes == records + used


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OP, max_size=20), quota=st.sampled_from([0, 20_000, 60_000]))
def test_the_reservations_add_up_after_any_writes_and_deletes(tmp_path: Path, ops: list[tuple[str, int, int]], quota: int) -> None:
    path = tmp_path / f"inv-{uuid.uuid4().hex}.db"  # one database an example
    store = SqliteStore(migrated_sqlite_url(path))  # a copy of the migrated template
    store.set_quotas(Quotas(bytes=quota))
    try:
        run_ops(store, ops, "s", lambda: _check_invariant(store))
    finally:
        store.close()
