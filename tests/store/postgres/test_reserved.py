"""PostgreSQL's migration 27 (decision 0153, as SQLite's 25): a buffer's bytes reserved in ``user_usage``.

A growing append inside its reservation writes no usage row (its version stays the
same); the bytes quota is checked against the upper bound and, past it, the unused
reservations are given back so that a refusal is exact; the invariant holds after any
writes and deletes; an upgrade from migration 26 reserves each owned buffer's bytes
exactly and leaves every usage as it was.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas
from flowmem.store.base import Usage
from flowmem.store.headers import HEADS

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from tests.store.reserved_cases import OP, exact_fit_then_one_byte_over, grow, run_ops  # noqa: E402

pytestmark = pytest.mark.postgres


def _usage_version(url: str, who: str) -> Any:
    """The usage row's version (``xmin``): a new one for every write of the row."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT xmin::text FROM user_usage WHERE user_id = %s", (who,)
        ).fetchone()
    return None if found is None else found[0]


def test_a_growing_append_inside_its_reservation_writes_no_usage_row(
    postgres_store_url: str,
) -> None:
    store = PostgresStore(postgres_store_url)
    chat = Address("user", "alice", "chat")
    try:
        for quotas in (Quotas(), Quotas.off()):  # the bytes quota checked on a read, or not at all
            store.set_quotas(quotas)
            grow(store, chat, "first")  # reserves 16 KiB more than it holds (the first time)
            version = _usage_version(postgres_store_url, "alice")
            for n in range(20):
                grow(store, chat, f"message {n}")
            assert _usage_version(postgres_store_url, "alice") == version
        grow(store, chat, "x" * 20_000)  # past the reservation: reserved again, the row written
        assert _usage_version(postgres_store_url, "alice") != version
        rows = store.load(chat)
        assert store.usage("alice").bytes == sum(
            len(store.load_bodies(chat)[i][1]) for i in range(len(rows))
        )
    finally:
        store.close()


def test_a_write_that_fits_the_bytes_quota_exactly_passes_one_byte_more_is_refused(
    postgres_store_url: str,
) -> None:
    store = PostgresStore(postgres_store_url)

    def records_give_back_the_same_way(grown: int) -> None:
        with pytest.raises(QuotaExceededError):  # a record's check gives back the same way
            store.put_record(Address("user", "alice", "note"), "n" * grown, None)

    try:
        exact_fit_then_one_byte_over(store, records_give_back_the_same_way)
        store.put_record(Address("user", "alice", "note"), "n", None)
    finally:
        store.close()


def _check_invariant(url: str, store: PostgresStore) -> None:
    """user_usage.bytes = records' bytes + Σ reserved; reserved covers each buffer; usage is exact.

    Each buffer's bytes as derived with its header's tail (decision 0195).
    """
    with psycopg.connect(url, autocommit=True) as conn:
        (usage,) = conn.execute(
            "SELECT COALESCE((SELECT bytes FROM user_usage WHERE user_id = 'alice'), 0)"
        ).fetchone()  # type: ignore[misc]
        (records,) = conn.execute(
            "SELECT COALESCE(SUM(octet_length(value)), 0) FROM records WHERE owner = 'alice'"
        ).fetchone()  # type: ignore[misc]
        reserved, used, short = conn.execute(
            f"""SELECT COALESCE(SUM(reserved), 0), COALESCE(SUM(bytes + log_bytes), 0),
                COUNT(*) FILTER (WHERE reserved < bytes + log_bytes) FROM {HEADS} AS b
                WHERE owner = 'alice'"""
        ).fetchone()  # type: ignore[misc]
    assert usage == records + reserved and short == 0
    assert store.usage("alice").bytes == records + used


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(OP, max_size=16), quota=st.sampled_from([0, 20_000, 60_000]))
def test_the_reservations_add_up_after_any_writes_and_deletes(
    postgres_store_url: str, ops: list[tuple[str, int, int]], quota: int
) -> None:
    store = PostgresStore(postgres_store_url)
    tag = uuid.uuid4().hex[:8]  # one database for every example: sessions named apart
    store.erase_user("alice")
    store.set_quotas(Quotas(bytes=quota))
    try:
        run_ops(store, ops, f"{tag}-", lambda: _check_invariant(postgres_store_url, store))
    finally:
        store.close()


def test_an_upgrade_from_26_reserves_each_owned_buffer_exactly_and_keeps_the_usage(
    postgres_db_url: str,
) -> None:
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute(PostgresStore.SQL["schema_table"])
        for number, statements in enumerate(MIGRATIONS[:26], start=1):
            for statement in statements:
                conn.execute(statement)
            conn.execute(PostgresStore.SQL["schema_insert"], (number, time.time()))
        # as migration 26's triggers counted them: the buffers' bytes and the record's, exactly
        for key, size in (("a", 300), ("b", 5000)):
            bid = conn.execute(
                "INSERT INTO buffers (scope, scope_id, key) VALUES ('user', 'alice', %s) RETURNING id",
                (key,),
            ).fetchone()[0]  # type: ignore[index]
            conn.execute(
                "UPDATE buffers SET bytes = %s, count = 1, last_major = 1 WHERE id = %s",
                (size, bid),
            )
        conn.execute(
            "INSERT INTO records (scope, scope_id, key, value) VALUES ('user', 'alice', 'r', '\"v\"')"
        )
        before = conn.execute(
            "SELECT bytes, buffers, records FROM user_usage WHERE user_id = 'alice'"
        ).fetchone()
    assert before == (5303, 2, 1)
    store = PostgresStore(postgres_db_url)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        assert store.usage("alice") == Usage(*before)
        _check_invariant(postgres_db_url, store)
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            short = conn.execute(
                "SELECT COUNT(*) FROM buffers WHERE reserved <> bytes + log_bytes"
            ).fetchone()
        assert short == (0,)
        store.set_quotas(Quotas(bytes=5303 + 100))
        with pytest.raises(QuotaExceededError):
            grow(store, Address("user", "alice", "a"), "x" * 100)
        _check_invariant(postgres_db_url, store)
    finally:
        store.close()
