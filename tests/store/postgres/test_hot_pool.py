"""``store.postgres.connect.HotPool``: a loan's connection kept at hand, against the plain pool.

The plain path (``psycopg_pool.ConnectionPool.connection``) is the oracle: the same
sequences of loans (a statement, an error inside a transaction, a transaction left
open, a connection closed under the loan) run on both pools must leave the same
data, raise the same errors and hand the next loan an idle connection. Then what
the seam is for: a thread's loans after the first do not reach ``getconn``, and
what it must not do: keep a connection while another loan waits on the pool,
keep one past its lifetime, or keep one open after ``close``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")

from psycopg.pq import TransactionStatus  # noqa: E402
from psycopg_pool import ConnectionPool  # noqa: E402

from flowmem.store.postgres.connect import HotPool  # noqa: E402


class Boom(Exception):
    """What a loan raises on purpose."""


def _pool(kind: type[ConnectionPool[Any]], url: str, size: int = 2) -> ConnectionPool[Any]:
    pool = kind(
        url, min_size=1, max_size=size, kwargs={"autocommit": True}, open=False, timeout=2.0
    )
    pool.open(wait=True, timeout=10)
    return pool


@pytest.fixture
def url(postgres_db_url: str) -> Iterator[str]:
    """A fresh schema with the table the loans write."""
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (pool text, n int)")
    yield postgres_db_url


def _loan(pool: ConnectionPool[Any], name: str, step: str, n: int) -> str:
    """One loan doing ``step``; what it raised (its type's name) or "ok"."""
    try:
        with pool.connection() as conn:
            if step == "insert":
                conn.execute("INSERT INTO t VALUES (%s, %s)", (name, n))
            elif step == "raise_in_transaction":
                conn.execute("BEGIN")
                conn.execute("INSERT INTO t VALUES (%s, %s)", (name, n))
                raise Boom
            elif step == "left_open":  # open at the loan's end: the plain path commits it
                conn.execute("BEGIN")
                conn.execute("INSERT INTO t VALUES (%s, %s)", (name, n))
            elif step == "failed_statement":
                conn.execute("BEGIN")
                conn.execute("INSERT INTO t VALUES (%s, %s)", (name, n))
                conn.execute("SELECT 1/0")
            elif step == "closed":
                conn.close()
            elif step == "transaction_block":
                with conn.transaction():
                    conn.execute("INSERT INTO t VALUES (%s, %s)", (name, n))
    except Boom:
        return "Boom"
    except psycopg.Error as exc:
        return type(exc).__name__
    return "ok"


def _seen(pool: ConnectionPool[Any], name: str) -> tuple[str, list[int]]:
    """The next loan's connection status and the rows the loans left."""
    with pool.connection() as conn:
        status = TransactionStatus(conn.pgconn.transaction_status).name
        rows = conn.execute("SELECT n FROM t WHERE pool = %s ORDER BY n", (name,)).fetchall()
    return status, [int(r[0]) for r in rows]


STEPS = st.sampled_from(
    [
        "insert",
        "raise_in_transaction",
        "left_open",
        "failed_statement",
        "closed",
        "transaction_block",
    ]
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(STEPS, min_size=1, max_size=6))
def test_the_same_loans_do_the_same_on_the_plain_pool_and_the_hot_one(
    url: str, steps: list[str]
) -> None:
    plain, hot = _pool(ConnectionPool, url), _pool(HotPool, url)
    try:
        for n, step in enumerate(steps):
            assert _loan(plain, f"plain{id(steps)}", step, n) == _loan(
                hot, f"hot{id(steps)}", step, n
            ), step
            plain_seen = _seen(plain, f"plain{id(steps)}")
            assert plain_seen == _seen(hot, f"hot{id(steps)}"), step
            assert plain_seen[0] == TransactionStatus.IDLE.name
    finally:
        plain.close()
        hot.close()


def test_a_threads_loans_after_the_first_do_not_reach_the_pools_getconn(url: str) -> None:
    pool = _pool(HotPool, url)
    try:
        with pool.connection() as first:
            pass
        asked: list[object] = []
        plain_getconn = pool.getconn
        pool.getconn = lambda timeout=None: asked.append(timeout) or plain_getconn(timeout)  # type: ignore[method-assign]
        for _ in range(5):
            with pool.connection() as conn:
                assert conn is first
                conn.execute("SELECT 1")
        assert asked == []
    finally:
        pool.close()


def test_a_connection_given_back_goes_to_a_loan_waiting_on_the_pool(url: str) -> None:
    pool = _pool(HotPool, url, size=1)  # one connection: the waiting loan needs the one at hand
    got: list[str] = []
    try:
        with pool.connection() as held:
            waiter = threading.Thread(target=lambda: got.append(_loan(pool, "w", "insert", 1)))
            waiter.start()
            deadline = time.monotonic() + 5
            while not pool._asking and time.monotonic() < deadline:
                time.sleep(0.01)
            held.execute("SELECT 1")
        waiter.join(10)
        assert got == ["ok"]  # not PoolTimeout: it was handed over, not kept at hand
    finally:
        pool.close()


def test_a_connection_past_its_lifetime_goes_back_to_the_pool_and_is_replaced(url: str) -> None:
    pool = _pool(HotPool, url)
    try:
        with pool.connection() as old:
            old._expire_at = 0.0
        assert old.closed
        with pool.connection() as new:
            assert new is not old
            assert new.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()


def test_close_closes_the_connections_at_hand(url: str) -> None:
    pool = _pool(HotPool, url)
    with pool.connection() as conn:
        pass
    assert not conn.closed
    pool.close()
    assert conn.closed
    with pytest.raises(psycopg_pool_closed()), pool.connection():
        pass


def psycopg_pool_closed() -> type[Exception]:
    """``psycopg_pool.PoolClosed``."""
    from psycopg_pool import PoolClosed

    return PoolClosed


def test_a_stores_appends_take_no_connection_from_the_pool_after_the_first(
    postgres_store_url: str,
) -> None:
    from flowmem.store import Address
    from flowmem.store.postgres import PostgresStore

    store = PostgresStore(postgres_store_url)
    try:
        address = Address("session", "s", "chat")
        store.append(address, [{"role": "user", "content": "hi"}])
        asked: list[object] = []
        pool = store._pool
        plain_getconn = pool.getconn
        pool.getconn = lambda timeout=None: asked.append(timeout) or plain_getconn(timeout)  # type: ignore[method-assign]
        for n in range(10):
            store.append(address, [{"role": "user", "content": f"turn {n}"}])
        assert store.count(address) == 11
        assert asked == []
    finally:
        store.close()
