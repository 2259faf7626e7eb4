"""PostgreSQL's migration 29 (decision 0158): the bytes quota checked when a reservation is granted.

A growth inside a reservation checked against the quota in force reads no usage row
(since migration 30 the function runs and returns at once: its condition, not the
trigger's ``WHEN``, which PostgreSQL prepares in every header update);
a quota other than the one a reservation was checked against (lowered, raised, set
where there was none) is checked at the next growth, on the same terms as before
(the upper bound, then the exact bytes); an upgrade from migration 28 keeps every row
and checks each owned buffer at its next growth.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas
from flowmem.store.base import Usage

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from tests.store.reserved_cases import grow  # noqa: E402

pytestmark = pytest.mark.postgres

CHAT = Address("user", "alice", "chat")


def _usage_reads(url: str, store: PostgresStore, at_least: int) -> int:
    """The scans of ``user_usage`` so far (closes ``store``), once they number ``at_least``.

    A backend reports its table counts as it exits; polled until the count is in.
    """
    store.close()
    schema = url.rsplit("search_path%3D", 1)[1]
    deadline = time.monotonic() + 10
    while True:
        with psycopg.connect(url, autocommit=True) as conn:
            found = conn.execute(
                """SELECT COALESCE(idx_scan, 0) + COALESCE(seq_scan, 0) FROM pg_stat_user_tables
                    WHERE schemaname = %s AND relname = 'user_usage'""",
                (schema,),
            ).fetchone()
        reads = 0 if found is None else int(found[0])
        if reads >= at_least or time.monotonic() > deadline:
            return reads
        time.sleep(0.1)


def _reserved_under(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT key, reserved_under FROM buffers ORDER BY key").fetchall()


def test_a_growth_inside_a_reservation_checked_under_the_quota_in_force_reads_no_usage_row(
    postgres_db_url: str,
) -> None:
    # a fresh schema: a pooled one's user_usage keeps the scans earlier tests' backends
    # report as they exit, which can land inside this test's count
    store = PostgresStore(postgres_db_url)
    grow(
        store, CHAT, "first"
    )  # reserves 16 KiB more than it holds, checked under the default quota
    before = _usage_reads(postgres_db_url, store, 1)
    store = PostgresStore(postgres_db_url)
    for n in range(20):
        grow(store, CHAT, f"message {n}")
    grow(store, CHAT, "x" * 20_000)  # past the reservation: the usage row written (and read) once
    assert _usage_reads(postgres_db_url, store, before + 1) - before == 1
    assert _reserved_under(postgres_db_url) == [("chat", str(Quotas().bytes))]


def test_a_lowered_quota_refuses_a_growth_inside_its_reservation_on_the_exact_bytes(
    postgres_store_url: str,
) -> None:
    store = PostgresStore(postgres_store_url)
    try:
        grow(store, CHAT, "first")  # checked under 1 GiB, 16 KiB of slack reserved
        used = store.usage("alice").bytes
        grow(store, CHAT, "the same message")
        grown = store.usage("alice").bytes - used
        store.set_quotas(Quotas(bytes=used + 2 * grown - 1))  # far under the upper bound
        with pytest.raises(QuotaExceededError):
            grow(store, CHAT, "the same message")  # one byte over the exact bytes
        assert store.count(CHAT) == 2 and store.usage("alice").bytes == used + grown
        store.set_quotas(Quotas(bytes=used + 2 * grown))
        grow(store, CHAT, "the same message")  # fits exactly
        assert store.usage("alice").bytes == used + 2 * grown
        with pytest.raises(QuotaExceededError):
            grow(store, CHAT, "x")  # checked under this quota: the next growth is over it
    finally:
        store.close()


def test_a_quota_set_after_reservations_made_without_one_is_checked_at_the_next_growth(
    postgres_store_url: str,
) -> None:
    store = PostgresStore(postgres_store_url)
    try:
        store.set_quotas(Quotas.off())
        grow(store, CHAT, "first")  # reserved with slack, no quota to check
        store.put_record(Address("user", "alice", "note"), "n" * 100, None)
        used = store.usage("alice").bytes
        store.set_quotas(Quotas(bytes=used + 10))
        with pytest.raises(QuotaExceededError):
            grow(store, CHAT, "a message longer than ten bytes")
        assert store.usage("alice").bytes == used
        store.set_quotas(Quotas(bytes=used + 1000))
        grow(store, CHAT, "a message longer than ten bytes")  # checked again: it fits
    finally:
        store.close()


def test_a_shrink_under_another_quota_is_never_refused(postgres_store_url: str) -> None:
    store = PostgresStore(postgres_store_url)
    try:
        for n in range(4):
            grow(store, CHAT, f"message {n}")
        store.set_quotas(Quotas(bytes=1))  # far under what alice holds
        store.clear(CHAT)
        assert store.usage("alice") == Usage(0, 0, 0)
    finally:
        store.close()


def test_an_upgrade_from_28_keeps_the_rows_and_checks_each_owned_buffer_at_its_next_growth(
    postgres_db_url: str,
) -> None:
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute(PostgresStore.SQL["schema_table"])
        for number, statements in enumerate(MIGRATIONS[:28], start=1):
            for statement in statements:
                conn.execute(statement)
            conn.execute(PostgresStore.SQL["schema_insert"], (number, time.time()))
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        bid = conn.execute(
            "INSERT INTO buffers (scope, scope_id, key) VALUES ('user', 'alice', 'chat') RETURNING id"
        ).fetchone()[0]  # type: ignore[index]
        # as migration 27's trigger reserved it: 16 KiB of slack over 300 bytes
        conn.execute(
            "INSERT INTO buffer_rows (buffer_id, pos, role, body, tokens) VALUES (%s, 1, 'user', %s, 1)",
            (bid, '{"role":"user","content":"' + "x" * 273 + '"}'),
        )
        conn.execute(
            "UPDATE buffers SET bytes = 300, count = 1, last_major = 1 WHERE id = %s", (bid,)
        )
        before = conn.execute(
            "SELECT u.bytes, b.reserved FROM user_usage AS u, buffers AS b WHERE u.user_id = 'alice'"
        ).fetchone()
    assert before is not None and before[1] > 300  # reserved with slack
    store = PostgresStore(postgres_db_url)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        assert _reserved_under(postgres_db_url) == [("chat", "")]
        assert store.count(CHAT) == 1 and store.usage("alice").bytes == 300
        store.set_quotas(Quotas(bytes=310))  # inside the reservation, over the quota
        with pytest.raises(QuotaExceededError):
            grow(store, CHAT, "a message of more than ten bytes")
        assert store.count(CHAT) == 1 and store.usage("alice").bytes == 300
    finally:
        store.close()
