"""PostgreSQL's headers as read, the stored header and its tail (decision 0195): the seam's proof.

``SqlBufferEditor.flush`` leaves the header unwritten on a plain append while
``header_skipped`` says so; every reader derives the counters from the header and the
rows past it (``flowmem.store.headers``). The proof: random appends (windows, so rows
evicted; calls, results, heals) and pops run on two buffers, one with the seam, one on the
plain path (the header written on every change, ``header_skipped`` answering no); after
every step the first's derived header is the second's stored one, their rows are the same,
and the first's tail is shorter than ``TAIL_ROWS``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import prepare
from flowmem.store import Address, Quotas
from flowmem.store.headers import HEADS, TAIL, TAIL_ROWS
from tests.store.test_same_rules import MESSAGE, SETTINGS

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402

_keys = itertools.count()

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(MESSAGE, min_size=1, max_size=3)),
        st.tuples(st.just("pop"), st.just([])),
        st.tuples(st.just("plain"), st.integers(min_value=1, max_value=12)),
    ),
    min_size=1,
    max_size=14,
)


@pytest.fixture
def store(postgres_store_url: str) -> Iterator[PostgresStore]:
    """One store (its appends on known facts after the first, as a process's)."""
    opened = PostgresStore(postgres_store_url)
    try:
        yield opened
    finally:
        opened.close()


def _header(store: PostgresStore, address: Address, table: str) -> tuple[Any, ...]:
    """count, last major, bytes and tokens of ``table`` (``buffers``: as stored; ``HEADS``: as read)."""
    with store._connection() as conn:
        found = conn.execute(
            f"""SELECT count, last_major, bytes, tokens FROM {table} AS b
                WHERE scope = %s AND scope_id = %s AND key = %s""",
            tuple(address),
        ).fetchone()
    return () if found is None else tuple(found)


def _tail(store: PostgresStore, address: Address) -> int:
    """The rows past the stored header's last major."""
    with store._connection() as conn:
        found = conn.execute(
            f"""SELECT t.n FROM buffers AS b CROSS JOIN LATERAL ({TAIL.format(h="b")}) AS t
                WHERE scope = %s AND scope_id = %s AND key = %s""",
            tuple(address),
        ).fetchone()
    return 0 if found is None else int(found[0])


def _step(store: PostgresStore, address: Address, action: str, given_: Any, window: int) -> None:
    if action == "pop":
        store.pop_last(address)
    elif action == "plain":  # a run of plain messages: the tail grows to its bound
        for n in range(given_):
            store.append(address, prepare({"role": "user", "content": f"q{n}"}, 1), window)
    else:
        store.append(address, prepare(given_, 1), window)


def _usage_exact(store: PostgresStore, who: str) -> None:
    """``who``'s usage is their rows' and logs' bytes, each buffer reserving what it holds (decision 0199)."""
    with store._connection() as conn:
        held, short, bound = conn.execute(
            f"""SELECT (SELECT COALESCE(SUM(octet_length(r.body)), 0) FROM buffer_rows AS r
                    JOIN buffers AS o ON o.id = r.buffer_id WHERE o.owner = %s)
                    + COALESCE(SUM(b.log_bytes), 0),
                COUNT(*) FILTER (WHERE b.reserved < b.bytes + b.log_bytes),
                COALESCE((SELECT bytes FROM user_usage WHERE user_id = %s), 0) - COALESCE(SUM(b.reserved), 0)
                FROM {HEADS} AS b WHERE b.owner = %s""",
            (who, who, who),
        ).fetchone()  # type: ignore[misc]
    assert store.usage(who).bytes == held and short == 0 and bound == 0


@SETTINGS
@given(
    steps=STEPS,
    window=st.sampled_from([0, 5, 11]),
    owner=st.sampled_from(["nobody", "no quota", "quota"]),
)
def test_the_header_derived_with_its_tail_is_the_plain_paths_stored_header(
    store: PostgresStore, steps: list[tuple[str, Any]], window: int, owner: str
) -> None:
    """Owned by nobody, or by a user with no bytes quota or under the default one (1 GiB).

    An owned buffer's reservation bounds its tail's bytes; under a quota, one checked under
    it (decision 0199). The owner's usage stays exact after every step.
    """
    store.set_quotas(Quotas() if owner == "quota" else Quotas.off())
    key = f"h{next(_keys)}"
    scope = ("global", "") if owner == "nobody" else ("user", "7")
    skipped, written = Address(*scope, f"{key}-skipped"), Address(*scope, f"{key}-written")
    for action, given_ in steps:
        _step(store, skipped, action, given_, window)
        with patch("flowmem.store.editor.header_skipped", lambda *_: False):
            _step(store, written, action, given_, window)
        assert _tail(store, written) == 0  # the plain path: every change writes the header
        assert _header(store, skipped, HEADS) == _header(store, written, "buffers")
        assert store.load_bodies(skipped) == store.load_bodies(written)
        assert store.count(skipped) == store.count(written) == len(store.load(written))
        assert _tail(store, skipped) < TAIL_ROWS
        if owner != "nobody":
            _usage_exact(store, "7")


@pytest.mark.parametrize("scope", [("global", ""), ("user", "7")])
def test_plain_appends_leave_the_header_unwritten_until_the_tail_reaches_its_bound(
    store: PostgresStore, scope: tuple[str, str]
) -> None:
    """Decision 0193's K: the header is written once in ``TAIL_ROWS`` plain appends.

    Owned by nobody, or by a user under the default bytes quota (decision 0199: inside a
    reservation checked under it, after the first append has reserved 16 KiB of slack).
    """
    address = Address(*scope, f"bound{next(_keys)}")
    tails = []
    for n in range(3 * TAIL_ROWS):
        store.append(address, prepare({"role": "user", "content": f"q{n}"}, 1))
        tails.append(_tail(store, address))
    first = 0 if scope[0] == "user" else 1  # an owned buffer's first append reserves: written
    assert tails == [(n + first) % TAIL_ROWS for n in range(3 * TAIL_ROWS)]
    assert _header(store, address, HEADS)[0] == 3 * TAIL_ROWS == store.count(address)
    if scope[0] == "user":
        _usage_exact(store, "7")
