"""The PostgreSQL append's libpq pipeline (docs/decisions/0028): prepared statements and cleanup."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.errors import BufferFullError, InvalidInputError, NotFoundError, StoreError
from flowmem.store import Address, SessionRecord, WriteGuard

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from psycopg import pq  # noqa: E402

from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.postgres.pipeline import Prepared, prepared_of  # noqa: E402

A = Address("session", "s1", "chat")


def _user(text: str, at: int = 1) -> list[Any]:
    return prepare({"role": "user", "content": text}, at)


def _idle(store: PostgresStore) -> None:
    """The pooled connection is out of pipeline mode, outside any transaction."""
    with store._connection() as conn:
        assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF
        assert conn.info.transaction_status == pq.TransactionStatus.IDLE


def test_append_prepares_again_after_the_server_forgets_its_statements(
    one_conn: PostgresStore,
) -> None:
    one_conn.append(A, _user("one"))
    with one_conn._connection() as conn:
        conn.execute("DEALLOCATE ALL")
    one_conn.append(A, _user("two", 2))  # the first try finds them gone, the retry prepares
    one_conn.append(A, _user("three", 3))
    assert [r["content"] for r in one_conn.load(A)] == ["one", "two", "three"]
    _idle(one_conn)


def test_failed_appends_write_nothing_and_leave_the_connection_idle(
    one_conn: PostgresStore,
) -> None:
    one_conn.append(A, _user("kept"))
    # refused by the rules' size check after the writes were queued
    with pytest.raises(BufferFullError):
        one_conn.append(A, _user("x" * 100, 2), max_bytes=50)
    _idle(one_conn)
    # the same with writes already sent (two rows: the first is sent when the second
    # is held): the pipeline's ROLLBACK undoes them, the Sync commits nothing
    with pytest.raises(BufferFullError):
        one_conn.append(A, _user("y" * 100, 2) + _user("z" * 100, 3), max_bytes=50)
    _idle(one_conn)
    assert one_conn.count(A) == 1
    # refused by the server (a NUL in the address) inside the first round trip
    with pytest.raises(InvalidInputError):
        one_conn.append(Address("session", "s1", "nul\x00"), _user("x"))
    _idle(one_conn)
    # refused by the guard fused into the lock statement
    with pytest.raises(NotFoundError):
        one_conn.append(A, _user("guarded", 3), guard=WriteGuard(None, "no-such-session"))
    _idle(one_conn)
    assert [r["content"] for r in one_conn.load(A)] == ["kept"]
    one_conn.create_session(SessionRecord("s1", "s1", "u1"))
    one_conn.append(A, _user("after", 4), guard=WriteGuard(None, "s1"))
    assert [r["content"] for r in one_conn.load(A)] == ["kept", "after"]


def test_a_prepare_the_server_skipped_is_sent_again(
    one_conn: PostgresStore, postgres_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A lock timeout aborts the first pipeline before the facts query is prepared.

    The next append prepares it again itself, without the retry that a forgotten
    statement costs (the names' generation stays 0).
    """
    from flowmem.store.postgres import advisory_key

    with psycopg.connect(postgres_store_url, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key(A),))
        with caplog.at_level(logging.WARNING, logger="flowmem"):
            one_conn.append(A, _user("unserialized"), lock_timeout=0.05)
        holder.execute("COMMIT")
    assert "proceeding unserialized" in caplog.text
    _idle(one_conn)
    one_conn.append(A, _user("serialized", 2))
    with one_conn._connection() as conn:
        assert prepared_of(conn).generation == 0
    assert [r["content"] for r in one_conn.load(A)] == ["unserialized", "serialized"]


def _assistant_calling(call_id: str, at: int) -> list[Any]:
    call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return prepare({"role": "assistant", "content": "", "tool_calls": [call]}, at)


def test_a_server_error_in_the_writes_rolls_the_whole_append_back(
    one_conn: PostgresStore,
) -> None:
    """The append is one transaction without BEGIN: an error in a later write undoes earlier ones."""
    with one_conn._connection() as conn:
        conn.execute(
            """CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.declared_pos IS NOT NULL THEN RAISE EXCEPTION 'boom refused'; END IF;
            RETURN NEW; END $$"""
        )
        conn.execute(
            # the answer's row carrying its declaration (migration 35, decision 0194)
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON buffer_rows "
            "FOR EACH ROW EXECUTE FUNCTION refuse_boom()"
        )
    one_conn.append(A, _user("kept"))
    # the answer's row, the append's last write (a declaration of an open call is listed only
    # since migration 34; since 35 its answer's own row carries it)
    answer = prepare({"role": "tool", "content": "r", "tool_call_id": "boom"}, 3)
    rows = _user("lost", 2) + _assistant_calling("boom", 3) + answer
    with pytest.raises(StoreError, match="boom refused"):
        one_conn.append(A, rows)
    _idle(one_conn)
    assert [r["content"] for r in one_conn.load(A)] == ["kept"]
    assert one_conn.count(A) == 1
    one_conn.append(A, _user("after", 4))
    assert [r["content"] for r in one_conn.load(A)] == ["kept", "after"]


def test_an_error_at_commit_is_raised_and_nothing_is_kept(one_conn: PostgresStore) -> None:
    """The commit happens at the pipeline's Sync: an error there (a deferred check) still raises."""
    with one_conn._connection() as conn:
        conn.execute(
            """CREATE FUNCTION refuse_late() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.body LIKE '%late%' THEN RAISE EXCEPTION 'late refusal'; END IF;
            RETURN NEW; END $$"""
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER refuse_late AFTER INSERT ON buffer_rows "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_late()"
        )
    one_conn.append(A, _user("kept"))
    with pytest.raises(StoreError, match="late refusal"):
        one_conn.append(A, _user("late", 2))
    _idle(one_conn)
    assert [r["content"] for r in one_conn.load(A)] == ["kept"]


def test_prepared_names_stay_distinct_within_the_servers_63_bytes() -> None:
    """Merged statements have long names; the server keeps 63 bytes of a prepared name."""
    prepared = Prepared()
    long = "row_insert+call_insert+calls_of_drop+header_update"
    names = {prepared.name(long + suffix) for suffix in ("", "+x", "+y")}
    assert len(names) == 3
    assert all(len(name) <= 63 for name in names)
    assert prepared.name(long) == prepared.name(long)
    prepared.forget()
    assert prepared.name(long) not in names


def test_statements_are_named_anew_after_the_server_forgets_them() -> None:
    """The per-connection cache of names and texts follows ``forget`` (a new generation)."""
    from flowmem.store.postgres import SQL

    prepared = Prepared()
    first = prepared.statement("header_update", SQL)
    assert prepared.statements["header_update"] == first
    assert first[2]  # a write
    assert not prepared.statement("append_facts@open", SQL)[2]
    prepared.forget()
    assert "header_update" not in prepared.statements
    again = prepared.statement("header_update", SQL)
    assert again[0] != first[0]
    assert again[1] == first[1]
