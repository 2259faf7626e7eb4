"""An owned buffer under a bytes quota leaves its header unwritten inside its checked reservation (decision 0199).

A plain append whose bytes stay inside a reservation checked under the quota in force
(``reserved_under``, migration 29) changes nothing the quota's check reads: the reservation
trigger would return at once (migration 33's first test). Past the reservation the header
is written and the trigger reserves again; under another quota than the reservation's (this
store's own new one, or another store's) the header is written and the trigger checks it:
what was refused before is refused, and a refused append changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas
from flowmem.store.headers import HEADS

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.store.postgres.test_give_back_derived import _tail_rows  # noqa: E402
from tests.store.postgres.test_reserved import _check_invariant  # noqa: E402
from tests.store.reserved_cases import grow  # noqa: E402

pytestmark = pytest.mark.postgres

X = Address("user", "alice", "x")


def _room(url: str) -> tuple[int, int, str]:
    """``X``'s reservation, its bytes as derived and the quota its reservation was checked under."""
    with psycopg.connect(url, autocommit=True) as conn:
        found: Any = conn.execute(
            f"""SELECT b.reserved, b.bytes + b.log_bytes, h.reserved_under FROM {HEADS} AS b
            JOIN buffers AS h ON h.id = b.id WHERE b.key = 'x'"""
        ).fetchone()
    return int(found[0]), int(found[1]), str(found[2])


def test_an_owned_append_inside_its_checked_reservation_writes_no_header_and_one_past_it_does(
    postgres_store_url: str,
) -> None:
    url = postgres_store_url
    store = PostgresStore(url)
    store.set_quotas(Quotas(bytes=100_000))
    try:
        grow(store, X, "first")  # a new buffer: its header written, 16 KiB reserved under the quota
        reserved, used, under = _room(url)
        assert reserved == used + 16_384 and under == "100000" and _tail_rows(url, X) == 0
        for n in range(3):
            grow(store, X, f"inside {n}")
        assert _tail_rows(url, X) == 3 and _room(url)[0] == reserved  # no header, no usage write
        _check_invariant(url, store)
        grow(store, X, "x" * 20_000)  # past the reservation: written, reserved again
        assert _tail_rows(url, X) == 0
        reserved, used, _ = _room(url)
        assert reserved == used + 16_384
        _check_invariant(url, store)
        grow(store, X, "inside again")  # the reservation read back with the append: inside it
        assert _tail_rows(url, X) == 1
    finally:
        store.close()


def test_an_append_inside_the_reservation_under_another_quota_is_checked_and_refused(
    postgres_store_url: str,
) -> None:
    url = postgres_store_url
    store = PostgresStore(url)
    store.set_quotas(Quotas(bytes=100_000))
    lower = PostgresStore(url)
    try:
        grow(store, X, "first")
        grow(store, X, "inside")
        assert _tail_rows(url, X) == 1
        exact = store.usage("alice").bytes
        lower.set_quotas(Quotas(bytes=exact + 5))  # another process, another quota
        for refused in (lower, store):
            if refused is store:  # this store's own quota lowered (its known room forgotten)
                store.set_quotas(Quotas(bytes=exact + 5))
            with pytest.raises(QuotaExceededError):  # inside the reservation, over the quota
                grow(refused, X, "more than five bytes")
            assert refused.usage("alice").bytes == exact and refused.count(X) == 2
            assert _tail_rows(url, X) == 1  # a refused append changes nothing
        store.set_quotas(Quotas(bytes=exact + 1_000))
        grow(store, X, "fits")  # under another quota: checked (written) and passes
        assert _room(url)[2] == str(exact + 1_000) and _tail_rows(url, X) == 0
        _check_invariant(url, store)
    finally:
        lower.close()
        store.close()
