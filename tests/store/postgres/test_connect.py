"""``store.postgres.connect`` at a store's open: one connection, one statement on a migrated schema (decision 0202).

Counted where they cannot drift with the machine's load: the backends the server started
(``pg_stat_database.sessions``, read after the store's backends have gone), the statements
the client executed, the pool threads running. And what an open must keep: ``pool_min``
(0 and more than 1), the pool replacing a broken connection, the durability warnings on
a fresh and a migrated schema, a refused open leaving no connection behind.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

psycopg = pytest.importorskip("psycopg")

from flowmem.core import prepare  # noqa: E402
from flowmem.errors import (  # noqa: E402
    DatabaseNotFoundError,
    SchemaTooNewError,
    StoreUnavailableError,
)
from flowmem.store.base import Address  # noqa: E402
from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.postgres.connect import HotPool  # noqa: E402
from flowmem.store.postgres.schema import MIGRATIONS  # noqa: E402

KEY = Address("user", "u1", "chat")


@pytest.fixture
def admin(postgres_db_url: str) -> Iterator[Any]:
    """An autocommit connection to the test's server, opened before anything is counted."""
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        yield conn


def _named(url: str) -> tuple[str, str]:
    """``url`` with an application name of its own (the store's backends found by it), and the name."""
    name = f"fm_open_{uuid.uuid4().hex[:12]}"
    return f"{url}&application_name={name}", name


def _alive(admin: Any, name: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
    ).fetchone()
    return int(row[0])


def _gone(admin: Any, name: str) -> None:
    """Wait until no backend of ``name`` is left (a closed connection's backend exits after)."""
    deadline = time.monotonic() + 10
    while _alive(admin, name) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _alive(admin, name) == 0


def _sessions(admin: Any) -> int:
    admin.execute("SELECT pg_stat_clear_snapshot()")
    row = admin.execute(
        "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0])


def _backends(admin: Any, name: str, work: Callable[[], Any]) -> int:
    """Backends the server started for ``work`` (``pg_stat_database.sessions``, counted at a backend's exit)."""
    before = _sessions(admin)
    work()
    _gone(admin, name)
    return _sessions(admin) - before


def _open_close(url: str, **kwargs: Any) -> Callable[[], None]:
    def work() -> None:
        store = PostgresStore(url, **kwargs)
        store.append(KEY, prepare({"role": "user", "content": "hi"}, 1))
        assert len(store.load(KEY)) >= 1
        store.close()

    return work


def test_an_open_and_its_first_writes_start_one_backend_on_a_fresh_and_a_migrated_schema(
    postgres_db_url: str, admin: Any
) -> None:
    url, name = _named(postgres_db_url)
    assert _backends(admin, name, _open_close(url)) == 1  # the migrations run on it
    assert _backends(admin, name, _open_close(url)) == 1
    assert _backends(admin, name, _open_close(url, create=False)) == 1


def test_pool_min_is_kept_the_first_connection_counted_in_it(
    postgres_db_url: str, admin: Any
) -> None:
    PostgresStore(postgres_db_url).close()
    url, name = _named(f"{postgres_db_url}&pool_min=3&pool_max=4")

    def three() -> None:
        store = PostgresStore(url)
        assert store._pool.get_stats()["pool_size"] == 3
        assert _alive(admin, name) == 3
        store.close()

    assert _backends(admin, name, three) == 3


def test_pool_min_0_opens_on_one_connection_and_keeps_it_for_the_first_loans(
    postgres_db_url: str, admin: Any
) -> None:
    PostgresStore(postgres_db_url).close()
    url, name = _named(f"{postgres_db_url}&pool_min=0")

    def work() -> None:
        _open_close(url)()
        store = PostgresStore(url)
        assert store._pool.get_stats()["pool_size"] == 1
        assert store._pool._workers  # the shrink may drop it: its threads run
        store.close()

    assert _backends(admin, name, work) == 2


def _statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement a connection executes from now on (``Connection.execute``)."""
    sent: list[str] = []
    plain = psycopg.Connection.execute

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return plain(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    return sent


def test_an_open_on_a_migrated_schema_is_one_statement_and_its_first_loan_sends_none(
    postgres_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = _statements(monkeypatch)
    store = PostgresStore(postgres_store_url)
    assert len(sent) == 1 and "flowmem_schema" in sent[0] and "fsync" in sent[0]
    assert store.schema_version() == len(MIGRATIONS)  # the quotas were given with it
    assert len(sent) == 2
    store.close()


def _pool_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("flowmem-")}


def test_a_store_that_only_lends_starts_no_pool_thread_and_one_broken_connection_wakes_them(
    postgres_store_url: str, admin: Any
) -> None:
    url, name = _named(postgres_store_url)
    known = _pool_threads()  # another test's pool's, not yet ended
    store = PostgresStore(url)
    try:
        store.append(KEY, prepare({"role": "user", "content": "one"}, 1))
        assert len(store.load(KEY)) == 1
        assert not _pool_threads() - known
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (name,),
        )
        with pytest.raises(StoreUnavailableError):
            store.load(KEY)
        assert len(store.load(KEY)) == 1  # the pool made a connection in the broken one's place
        started = _pool_threads() - known
        assert len(started) == 4  # the scheduler and three workers
    finally:
        store.close()
    assert not any(t.is_alive() for t in started)


def test_the_durability_warnings_come_on_a_fresh_and_on_a_migrated_schema(
    postgres_db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(2):  # fresh (the settings read alone), then migrated (with the version)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="flowmem"):
            PostgresStore(postgres_db_url).close()  # the test server runs with fsync=off
        said = [r.getMessage() for r in caplog.records if "fsync=off" in r.getMessage()]
        assert len(said) == 1, said


def test_a_refused_open_leaves_no_connection(postgres_db_url: str, admin: Any) -> None:
    url, name = _named(postgres_db_url)
    with pytest.raises(DatabaseNotFoundError):
        PostgresStore(url, create=False)
    _gone(admin, name)
    assert admin.execute("SELECT to_regclass('flowmem_schema')").fetchone()[0] is None
    PostgresStore(url).close()
    admin.execute(
        "INSERT INTO flowmem_schema (version, applied_at) VALUES (%s, 0)", (len(MIGRATIONS) + 1,)
    )
    with pytest.raises(SchemaTooNewError):
        PostgresStore(url)
    _gone(admin, name)


def test_a_refused_login_is_one_store_unavailable_error_at_once_without_the_password(
    postgres_db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    parts = urlsplit(postgres_db_url)
    nobody = f"fm_nobody_{uuid.uuid4().hex[:8]}"  # the server refuses an unknown role at login
    url = urlunsplit(parts._replace(netloc=f"{nobody}:secret@{parts.hostname}:{parts.port}"))
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailableError) as info:
        PostgresStore(url)
    assert time.monotonic() - started < 5.0  # not the pool's retries until connect_timeout_s
    message = info.value.message
    assert nobody in message and "secret" not in message and "***" in message
    assert "\n" not in message
    assert [r for r in caplog.records if r.name.startswith("psycopg")] == []


@pytest.mark.parametrize("spoiled", ["closed", "in_transaction"])
def test_a_first_connection_lost_or_busy_is_not_pooled_the_pool_makes_its_own(
    postgres_db_url: str, spoiled: str
) -> None:
    first = psycopg.connect(postgres_db_url, autocommit=True)
    if spoiled == "closed":
        first.close()
    else:
        first.execute("BEGIN")
    pool = HotPool(
        postgres_db_url,
        first=first,
        min_size=1,
        max_size=2,
        kwargs={"autocommit": True},
        open=False,
    )
    pool.open(wait=True, timeout=10)
    try:
        assert first.closed
        with pool.connection() as conn:
            assert conn is not first
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()
