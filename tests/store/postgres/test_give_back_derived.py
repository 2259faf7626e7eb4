"""PostgreSQL's migration 36 (decision 0199): a give-back counts the tail another process left.

A store with no bytes quota leaves a buffer's header unwritten on a plain append (decision
0195): the buffer's bytes are the header's and its tail's. When another store, under a
quota, gives the owner's unused reservations back, each buffer keeps what it holds with its
tail (migration 27's give-back read the stored bytes: the usage counted low by the tail, and
a write the exact bytes refuse passed). The store without a quota, whose known room the
give-back lowered, does not grow past it with its header unwritten (the known check compares
the room). An upgrade from 35 gives back the same way.
"""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from flowmem.store.postgres.reserved import MIGRATION as RESERVED_27  # noqa: E402
from tests.store.postgres.test_reserved import _check_invariant  # noqa: E402
from tests.store.reserved_cases import grow  # noqa: E402

pytestmark = pytest.mark.postgres

X, Y = Address("user", "alice", "x"), Address("user", "alice", "y")
_GIVE_BACK_27 = next(s for s in RESERVED_27 if "FUNCTION flowmem_give_back" in s)


def _tail_rows(url: str, address: Address) -> int:
    """The rows past the stored header's last major (its tail, decision 0195)."""
    with psycopg.connect(url, autocommit=True) as conn:
        found: Any = conn.execute(
            """SELECT COUNT(*) FROM buffer_rows AS r JOIN buffers AS b ON r.buffer_id = b.id
            WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s
                AND r.pos >= ((b.last_major + 1) << 20)""",
            tuple(address),
        ).fetchone()
    return int(found[0])


def _leave_a_tail(plain: PostgresStore, url: str) -> None:
    """``X`` appended to by a store with no bytes quota: its first message, then a tail of five."""
    grow(plain, X, "first")  # a new buffer: its header written, reserved with 16 KiB of slack
    for n in range(5):
        grow(plain, X, f"tail {n} " + "t" * 200)
    assert _tail_rows(url, X) == 5


def _given_back_then_refused(url: str) -> None:
    """Another store, under a quota, gives ``X``'s slack back; then refuses what the exact bytes exceed."""
    quota = PostgresStore(url)
    try:
        grow(quota, Y, "first")
        exact = quota.usage("alice").bytes
        quota.set_quotas(Quotas(bytes=exact + 100))  # far under the upper bound (2 x 16 KiB)
        grow(quota, Y, "y")  # past the upper bound: the owner's reservations given back; fits
        _check_invariant(url, quota)  # X reserves what it holds with its tail
        assert _tail_rows(url, X) == 5
        with psycopg.connect(url, autocommit=True) as conn:
            (upper,) = conn.execute(
                "SELECT bytes FROM user_usage WHERE user_id = 'alice'"
            ).fetchone()  # type: ignore[misc]
        assert upper == quota.usage("alice").bytes  # after a give-back the count is exact
        exact = quota.usage("alice").bytes
        quota.set_quotas(Quotas(bytes=exact + 300))
        with pytest.raises(QuotaExceededError):  # ~460 bytes: over by less than the tail's ~1 KiB
            grow(quota, Y, "z" * 400)
        assert quota.usage("alice").bytes == exact and quota.count(Y) == 2
    finally:
        quota.close()


def test_a_give_back_counts_the_tail_another_process_left_and_refuses_on_the_exact_bytes(
    postgres_store_url: str,
) -> None:
    plain = PostgresStore(postgres_store_url)
    plain.set_quotas(Quotas.off())
    try:
        _leave_a_tail(plain, postgres_store_url)
        _given_back_then_refused(postgres_store_url)
        # the store without a quota knew X's room before the give-back lowered it: its next
        # append (on known facts) is checked against the room and writes the header past it
        grow(plain, X, "after the give-back")
        _check_invariant(postgres_store_url, plain)
        assert _tail_rows(postgres_store_url, X) == 0
        grow(plain, X, "and on")
        _check_invariant(postgres_store_url, plain)
    finally:
        plain.close()


def test_an_upgrade_from_35_gives_back_over_the_derived_bytes(postgres_db_url: str) -> None:
    plain = PostgresStore(postgres_db_url)
    plain.set_quotas(Quotas.off())
    try:
        _leave_a_tail(plain, postgres_db_url)
    finally:
        plain.close()
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:  # the schema as 35 left it
        conn.execute(_GIVE_BACK_27)
        conn.execute("DELETE FROM flowmem_schema WHERE version = 36")
    upgraded = PostgresStore(postgres_db_url)
    try:
        assert upgraded.schema_version() == len(MIGRATIONS) == 36
        _given_back_then_refused(postgres_db_url)
    finally:
        upgraded.close()
