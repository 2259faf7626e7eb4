"""What only the SQL backends have: URLs, files, migrations, wrapped driver errors."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.core.tokens import estimate_tokens
from flowmem.errors import (
    BufferFullError,
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    SchemaTooNewError,
    StoreError,
    StoreUnavailableError,
)
from flowmem.store import Address, Idempotency, SessionRecord, TokenRecord, open_store
from flowmem.store import postgres as pg_backend
from flowmem.store import sqlite as sqlite_backend
from flowmem.store.adk import sqlite as adk_sqlite
from flowmem.store.archive import sqlite as archive_sqlite
from flowmem.store.conversations import sqlite as conversations_sqlite
from flowmem.store.postgres import callids
from flowmem.store.repairs import sqlite as repairs_sqlite
from flowmem.store.sqlite import SqliteStore, parse_url
from flowmem.store.sqlite.schema import LISTED_CALLS
from flowmem.store.vectors import sqlite as vectors_sqlite
from tests.store.undo_call_ids import undo_call_ids
from tests.store.undo_kept import undo_kept
from tests.store.undo_listed import undo_listed_calls

KEY = Address("global", "", "k")


def _migrations(url: str) -> int:
    return len(sqlite_backend.MIGRATIONS if url.startswith("sqlite") else pg_backend.MIGRATIONS)


_PG: dict[str, Any] = {}  # URL -> the running test's autocommit connection to it (``_pg``)


@pytest.fixture(autouse=True)
def _pg_connections() -> Iterator[None]:
    """Close the connections ``_pg`` kept for the test when it ends."""
    yield
    while _PG:
        _PG.popitem()[1].close()


def _pg(url: str) -> Any:
    """One autocommit connection to ``url`` for the whole test, not one per statement.

    A connection costs the server ~5 ms of CPU (decision 0210); an idle autocommit one
    holds no lock, so a migration or a schema given back does not wait for it.
    """
    import psycopg

    conn = _PG.get(url)
    if conn is None or conn.closed or conn.broken:
        conn = _PG[url] = psycopg.connect(url, autocommit=True)
    return conn


def _sql(url: str, statement: str) -> None:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute(statement)
        conn.close()
    else:
        _pg(url).execute(statement.encode())


def _scalar(url: str, query: str) -> int:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        value = conn.execute(query).fetchone()[0]
        conn.close()
        return int(value)
    found = _pg(url).execute(query.encode()).fetchone()
    return int(found[0]) if found else 0


def test_deleting_a_session_leaves_no_row_behind(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    sid = "00000000-0000-0000-0000-0000000000c1"
    store.create_session(SessionRecord(id=sid, name="n", owner="alice"))
    store.add_transcript(sid, {"role": "user", "content": "x", "metadata": {}})
    for key in ("chat_history", "notes"):
        address = Address("session", sid, key)
        store.append(address, prepare({"role": "user", "content": "q"}, 1))
        store.append(address, _call_and_answer())
    store.put_record(Address("session", sid, "k"), 1, None)
    store.delete_session(sid)
    store.close()
    for table in (
        "sessions", "transcripts", "transcript_seq", "records",
        "buffers", "buffer_rows", "buffer_calls", "buffer_answers",
    ):  # fmt: skip
        assert _scalar(sql_store_url, f"SELECT COUNT(*) FROM {table}") == 0, table


def test_erasing_a_user_leaves_no_row_behind(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    sid = "00000000-0000-0000-0000-0000000000c2"
    store.create_session(SessionRecord(id=sid, name="n", owner="alice"))
    store.add_transcript(sid, {"role": "user", "content": "x", "metadata": {}})
    for address in (Address("session", sid, "chat_history"), Address("user", "alice", "notes")):
        store.append(address, _call_and_answer())
        store.put_record(address, 1, None)
    store.create_token(TokenRecord("t1", "h1", "alice", frozenset(), 1.0))
    store.erase_user("alice")
    store.close()
    for table in (
        "sessions", "transcripts", "transcript_seq", "records",
        "buffers", "buffer_rows", "buffer_calls", "buffer_answers", "tokens", "user_usage",
    ):  # fmt: skip
        assert _scalar(sql_store_url, f"SELECT COUNT(*) FROM {table}") == 0, table


def _call_and_answer() -> list[dict[str, object]]:
    """An assistant turn declaring a call and its answer (fills both call indexes)."""
    return [
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
    ]


def test_schema_is_created_recorded_and_not_reapplied(sql_url: str) -> None:
    store = open_store(sql_url)
    assert store.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    store.append(KEY, prepare({"role": "user", "content": "kept"}, 1))
    store.close()
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert [r["content"] for r in again.load(KEY)] == ["kept"]
    again.close()


def _has_table(url: str, table: str) -> bool:
    """Whether the schema has ``table`` (SQLite's catalogue, or PostgreSQL's search path)."""
    if url.startswith("sqlite"):
        query = f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
    else:
        query = f"SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE tablename = '{table}'"
        query += " AND schemaname = current_schema()"
    return _scalar(url, query) > 0


def _drop_quotas(url: str) -> None:
    """Undo migration 12 (per-user quotas: owners, usage, their triggers); once undone, nothing."""
    if not _has_table(url, "user_usage"):
        return
    if url.startswith("sqlite"):
        for trigger in (
            "usage_buffer_insert", "usage_buffer_bytes", "usage_buffer_delete",
            "usage_record_insert", "usage_record_value", "usage_record_delete",
        ):  # fmt: skip
            _sql(url, f"DROP TRIGGER {trigger}")
        _sql(url, "DROP TABLE buffer_births")
        _sql(url, "ALTER TABLE buffers DROP COLUMN born")
    else:
        for trigger, table in (
            ("buffers_owner", "buffers"), ("records_owner", "records"),
            ("buffers_usage_insert", "buffers"), ("buffers_usage_update", "buffers"),
            ("buffers_usage_delete", "buffers"), ("records_usage_insert", "records"),
            ("records_usage_update", "records"), ("records_usage_delete", "records"),
            # since migration 27 (decision 0153): the reservation's, in buffers_usage_update's place
            ("buffers_reserve", "buffers"), ("buffers_reserve_new", "buffers"),
        ):  # fmt: skip
            _sql(url, f"DROP TRIGGER IF EXISTS {trigger} ON {table}")
        for function in (
            "flowmem_quota_check(TEXT, TEXT, BIGINT)", "flowmem_owner()",
            "flowmem_buffer_grown()", "flowmem_buffer_dropped()",
            "flowmem_record_grown()", "flowmem_record_dropped()",
            "flowmem_usage_add(TEXT, BIGINT, BIGINT, BIGINT)",
        ):  # fmt: skip
            _sql(url, f"DROP FUNCTION {function}")
    _sql(url, "DROP TABLE user_usage")
    _sql(url, "ALTER TABLE buffers DROP COLUMN owner")
    _sql(url, "ALTER TABLE records DROP COLUMN owner")


def _drop_token_counts(url: str) -> None:
    """Undo migration 13 (each row's and each buffer's default token count); once undone, nothing."""
    if url.startswith("sqlite"):
        query = "SELECT COUNT(*) FROM pragma_table_info('buffer_rows') WHERE name = 'tokens'"
    else:
        query = """SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'buffer_rows'
            AND column_name = 'tokens' AND table_schema = current_schema()"""
    if not _scalar(url, query):
        return
    _sql(url, "DROP INDEX buffer_rows_systems")
    _sql(url, "ALTER TABLE buffer_rows DROP COLUMN tokens")
    _sql(url, "ALTER TABLE buffers DROP COLUMN tokens")


def _drop_checkpoint_tables(url: str, deleted_sessions: bool = True) -> None:
    """Undo migrations 7 and later (the LangGraph tables; the deleted sessions' ids; all after)."""
    for table in ("lg_checkpoints", "lg_blobs", "lg_writes"):
        _sql(url, f"DROP TABLE {table}")
    if deleted_sessions:
        _sql(url, "DROP TABLE deleted_sessions")
    _undo_from(url, 9)


def _drop_conversation_tables(url: str) -> None:
    """Undo the pydantic-ai migration (conversation records, where entries end)."""
    for table in ("pa_conversations", "pa_entries"):
        _sql(url, f"DROP TABLE {table}")


def _drop_adk_tables(url: str) -> None:
    """Undo the ADK migration (sessions, app state, user state: decision 0053)."""
    for table in ("adk_sessions", "adk_app_states", "adk_user_states"):
        _sql(url, f"DROP TABLE {table}")


def _drop_evicted(url: str) -> None:
    """Undo the evicted call ids' migration (decision 0045)."""
    _sql(url, "DROP TABLE buffer_evicted")


def _drop_archive(url: str) -> None:
    """Undo the archive's migration (decision 0083): its table, the evicted ids' flag; once undone, nothing."""
    if url.startswith("sqlite"):
        query = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'buffer_archive'"
    else:
        query = "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'buffer_archive' AND schemaname = current_schema()"
    if not _scalar(url, query):
        return
    _sql(url, "DROP TABLE buffer_archive")
    _sql(url, "ALTER TABLE buffer_evicted DROP COLUMN archived")


def _drop_adk_keys(url: str) -> None:
    """Undo the ADK keys' migration (decision 0100): sessions keyed by their flowmem id again; once undone, nothing."""
    if url.startswith("sqlite"):
        query = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'adk_sessions_key'"
    else:
        query = "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'adk_sessions_key' AND schemaname = current_schema()"
    if not _scalar(url, query):
        return
    _sql(url, "DROP INDEX adk_sessions_key")
    _sql(url, "ALTER TABLE adk_sessions DROP COLUMN adk_id")


def _drop_repairs(url: str) -> None:
    """Undo the repair log's migration (issue 37 §2): its table, triggers and function; once undone, nothing."""
    if url.startswith("sqlite"):
        query = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'buffer_repairs'"
    else:
        query = "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'buffer_repairs' AND schemaname = current_schema()"
    if not _scalar(url, query):
        return
    _sql(url, "DROP TABLE buffer_repairs")  # its triggers with it
    if not url.startswith("sqlite"):
        _sql(url, "DROP FUNCTION flowmem_repairs_usage()")


def _drop_generations(url: str) -> None:
    """Undo the vectors' generations (migration 21, decision 0130): the table, its triggers, its function."""
    if url.startswith("sqlite"):
        _sql(url, "DROP TRIGGER IF EXISTS vector_generation_expiry")  # the others go with their tables
        for trigger in ("space_add", "space_drop", "space_change", "insert", "delete", "change"):
            _sql(url, f"DROP TRIGGER IF EXISTS vector_generation_{trigger}")
    else:
        _sql(url, "DROP FUNCTION IF EXISTS flowmem_vector_generation() CASCADE")  # its triggers with it
    _sql(url, "DROP TABLE IF EXISTS vector_generations")


def _drop_vectors(url: str) -> None:
    """Undo the vectors' migration (issue 40): their tables, the triggers on records, the functions."""
    if url.startswith("sqlite"):
        for trigger in ("vectors_record_delete", "vectors_record_value"):
            _sql(url, f"DROP TRIGGER IF EXISTS {trigger}")
    else:
        for trigger in ("records_vectors_delete", "records_vectors_value"):
            _sql(url, f"DROP TRIGGER IF EXISTS {trigger} ON records")
    _sql(url, "DROP TABLE IF EXISTS record_vectors")  # its own triggers with it
    _sql(url, "DROP TABLE IF EXISTS vector_spaces")
    if not url.startswith("sqlite"):
        _sql(url, "DROP FUNCTION IF EXISTS flowmem_record_vectors_drop()")
        _sql(url, "DROP FUNCTION IF EXISTS flowmem_vectors_usage()")


def _drop_kept(url: str) -> None:
    """Undo the adapters' kept JSON (decisions 0131, 0133): pydantic-ai's messages, ADK's events."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        undo_kept(conn, sqlite=True)
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        undo_kept(pg, sqlite=False)


def _drop_listed_calls(url: str) -> None:
    """Undo SQLite's migration 23 (issue 42 §1): the call indexes, flags and counted usage of before."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        undo_listed_calls(conn)
        conn.close()


# the archive's migration number, wherever it stands (issue 28's migrations are numbered at merge)
_ARCHIVE = sqlite_backend.MIGRATIONS.index(archive_sqlite.MIGRATION) + 1

# migration number -> what undoes it, for the migrations after 8
_UNDO = {
    9: _drop_conversation_tables,
    10: _drop_adk_tables,
    11: _drop_evicted,
    12: _drop_quotas,
    13: _drop_token_counts,
    _ARCHIVE: _drop_archive,
    sqlite_backend.MIGRATIONS.index(adk_sqlite.KEYED) + 1: _drop_adk_keys,
    sqlite_backend.MIGRATIONS.index(repairs_sqlite.MIGRATION) + 1: _drop_repairs,
    sqlite_backend.MIGRATIONS.index(vectors_sqlite.MIGRATION) + 1: _drop_vectors,
    sqlite_backend.MIGRATIONS.index(vectors_sqlite.GENERATIONS) + 1: _drop_generations,
    sqlite_backend.MIGRATIONS.index(conversations_sqlite.UPGRADE) + 1: _drop_kept,
    sqlite_backend.MIGRATIONS.index(LISTED_CALLS) + 1: _drop_listed_calls,
}


def _drop_call_ids(url: str) -> None:
    """Undo PostgreSQL's migration 28 (decision 0159): the declarations' and answers' tables again."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        undo_call_ids(pg)


# PostgreSQL's own migrations after the shared ones, by number: undone first
_CALL_IDS = pg_backend.MIGRATIONS.index(callids.MIGRATION) + 1


def _undo_from(url: str, version: int) -> None:
    """Undo every migration from ``version`` on, the newest first (what an older schema lacks)."""
    if not url.startswith("sqlite") and version <= _CALL_IDS:
        _drop_call_ids(url)
    for number in sorted(_UNDO, reverse=True):
        if number >= version:
            _UNDO[number](url)


def test_a_version_1_database_is_upgraded_in_place(sql_url: str) -> None:
    store = open_store(sql_url)
    store.put_record(KEY, "kept", 5.0)
    store.close()
    _undo_from(sql_url, 12)  # what schema version 11 lacks (its triggers first)
    _sql(sql_url, "DROP INDEX records_expiry")  # what a database made by version 1 lacks
    _sql(sql_url, "ALTER TABLE buffers DROP COLUMN bytes")
    _sql(sql_url, "DROP TABLE idempotency_keys")
    _sql(sql_url, "ALTER TABLE buffers DROP COLUMN version")
    _drop_checkpoint_tables(sql_url)
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 2")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert again.get_record(KEY, 0.0) == (True, "kept")
    assert again.purge_expired(10.0) == 1
    again.close()


def _bytes_column(url: str, address: Address) -> int:
    scope, scope_id, key = address
    return _scalar(
        url,
        f"SELECT bytes FROM buffers WHERE scope = '{scope}' AND scope_id = '{scope_id}' "
        f"AND key = '{key}'",
    )


def test_a_version_2_database_gets_the_byte_count_of_its_buffers(sql_url: str) -> None:
    """Migration 3 adds ``buffers.bytes`` and fills it from the rows a version-2 flowmem wrote."""
    store = open_store(sql_url)
    small, big = Address("user", "u1", "chat"), Address("user", "u2", "chat")
    store.append(small, prepare({"role": "user", "content": "héllo ✓"}, 1))
    store.append(big, prepare([{"role": "user", "content": "x" * 5000}, *_call_and_answer()], 1))
    expected = {
        address: sum(len(text.encode()) for _, text in store.load_bodies(address))
        for address in (small, big)
    }
    store.close()
    _undo_from(sql_url, 12)  # what schema version 11 lacks (its triggers first)
    _sql(sql_url, "ALTER TABLE buffers DROP COLUMN bytes")  # the schema version 2 wrote
    _sql(sql_url, "DROP TABLE idempotency_keys")
    _sql(sql_url, "ALTER TABLE buffers DROP COLUMN version")
    _drop_checkpoint_tables(sql_url)
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 3")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    for address, size in expected.items():
        assert _bytes_column(sql_url, address) == size > 0
    # the upgraded count is the one the limit is checked against
    with pytest.raises(BufferFullError):
        again.append(big, prepare({"role": "user", "content": "y"}, 1), max_bytes=expected[big])
    again.append(small, prepare({"role": "user", "content": "z"}, 1), max_bytes=expected[big])
    again.close()


def test_schema_too_new_refuses_to_open(sql_url: str) -> None:
    open_store(sql_url).close()
    newer = _migrations(sql_url) + 1
    _sql(sql_url, f"INSERT INTO flowmem_schema (version, applied_at) VALUES ({newer}, 0)")
    with pytest.raises(SchemaTooNewError) as info:
        open_store(sql_url)
    assert "upgrade flowmem" in str(info.value)
    assert info.value.code == "schema_too_new"


def test_driver_errors_never_leak(sql_url: str) -> None:
    store = open_store(sql_url)
    store.append(KEY, prepare({"role": "user", "content": "x"}, 1))
    # PostgreSQL's views of the answers read the rows since its migration 35 (decision 0194)
    _sql(sql_url, "DROP TABLE buffer_rows" + ("" if sql_url.startswith("sqlite") else " CASCADE"))
    with pytest.raises(StoreError) as info:
        store.append(KEY, prepare({"role": "user", "content": "y"}, 1))
    assert type(info.value).__module__ == "flowmem.errors"
    with pytest.raises(StoreError):
        store.load(KEY)
    store.close()


def test_duplicate_token_id_or_hash_conflicts_and_revoked_round_trips(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    token = TokenRecord("t1", "h1", "alice", frozenset({"read"}), 1.0, revoked=True, label="x")
    store.create_token(token)
    assert store.token_by_hash("h1") == token
    with pytest.raises(ConflictError):
        store.create_token(replace(token, token_hash="h2", revoked=False))  # the same id
    with pytest.raises(ConflictError):
        store.create_token(replace(token, id="t2", revoked=False))  # the same hash
    assert store.list_tokens() == [token]
    store.close()


@pytest.mark.postgres
def test_postgres_session_delete_waits_for_an_append_in_flight(postgres_store_url: str) -> None:
    import psycopg

    store = open_store(postgres_store_url)
    sid = "00000000-0000-0000-0000-0000000000d1"
    address = Address("session", sid, "chat_history")
    store.create_session(SessionRecord(id=sid, name="n", owner="alice"))
    store.append(address, prepare({"role": "user", "content": "q"}, 1))
    buffer_id = _scalar(postgres_store_url, "SELECT id FROM buffers")
    with psycopg.connect(postgres_store_url) as appender:  # an append holding its turn
        appender.execute("SELECT pg_advisory_xact_lock(%s)", (pg_backend.advisory_key(address),))
        deleting = threading.Thread(target=store.delete_session, args=(sid,))
        deleting.start()
        deleting.join(0.3)
        assert deleting.is_alive()  # the delete waits for the append's turn to end
        appender.execute(
            "INSERT INTO buffer_rows (buffer_id, pos, role, body) VALUES (%s, %s, 'user', '{}')",
            (buffer_id, 2 << 20),
        )
        appender.commit()
    deleting.join(10)
    store.close()
    assert _scalar(postgres_store_url, "SELECT COUNT(*) FROM buffer_rows") == 0  # no orphan row


@pytest.mark.postgres
def test_postgres_refuses_a_nul_session_id_in_the_transcript(postgres_store_url: str) -> None:
    store = open_store(postgres_store_url)
    with pytest.raises(InvalidInputError, match="NUL"):
        store.add_transcript("a\x00b", {"role": "user", "content": "x", "metadata": {}})
    store.close()


def test_sqlite_file_created_on_first_use_with_wal_and_full_sync(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "flow.db"
    assert not path.exists()
    store = SqliteStore(f"sqlite:///{path}")
    assert path.exists()
    with store._connection() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()
    relaxed = SqliteStore(f"sqlite:///{path}?synchronous=normal")
    with relaxed._connection() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    relaxed.close()


def test_sqlite_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_url("sqlite:////abs/path.db") == ("/abs/path.db", "FULL")
    assert parse_url("sqlite:///rel/path.db") == ("rel/path.db", "FULL")
    assert parse_url("sqlite:///x.db?synchronous=extra") == ("x.db", "EXTRA")
    for bad in (
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite://host/x.db",
        "sqlite:///x.db?synchronous=sometimes",
        "sqlite:///x.db?cache=shared",
    ):
        with pytest.raises(ConfigurationError):
            parse_url(bad)
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///relative.db")
    store.close()
    assert (tmp_path / "relative.db").exists()


def test_sqlite_unusable_files_raise_store_errors(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    with pytest.raises(StoreError):
        open_store(f"sqlite:///{tmp_path / 'adir'}")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(8192))
    with pytest.raises(StoreError):
        open_store(f"sqlite:///{garbage}")


def test_postgres_unreachable_is_store_unavailable() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StoreUnavailableError):
        open_store(f"postgresql://nobody@127.0.0.1:{port}/none?connect_timeout_s=1")


def test_postgres_url_pool_parameters() -> None:
    conninfo, options = pg_backend.parse_url(
        "postgres://u:secret@h:5/db?pool_max=3&sslmode=disable&pool_min=0"
    )
    assert conninfo == "postgresql://u:secret@h:5/db?sslmode=disable"
    assert options["pool_max"] == 3 and options["pool_min"] == 0
    for bad in ("postgresql://h/db?pool_max=x", "postgresql://h/db?pool_min=5&pool_max=2"):
        with pytest.raises(ConfigurationError):
            pg_backend.parse_url(bad)


def test_advisory_keys_are_distinct_per_address_part() -> None:
    keys = {
        pg_backend.advisory_key(Address(*parts))
        for parts in [("a", "b", "c"), ("a", "bc", ""), ("ab", "", "c"), ("a", "b", "d")]
    }
    assert len(keys) == 4
    assert all(-(2**63) <= key < 2**63 for key in keys)


# --- a database written before content parts (decision 0021) -------------------------------

FIXTURE = Path(__file__).parent / "data" / "written-by-v2.json"
BOOLEAN_COLUMNS = {"answered", "healed", "revoked"}


def _restore(url: str, tables: dict[str, Any]) -> None:
    """Rebuild, in an empty database, the tables an older flowmem wrote (its own DDL and rows).

    The DDL is the backend's migrations up to the version the fixture records:
    released migrations are never edited, so that is the schema that version made.
    """
    version = max(row[0] for row in tables["flowmem_schema"]["rows"])
    sqlite = url.startswith("sqlite")
    backend = sqlite_backend if sqlite else pg_backend
    statements = [backend.SQL["schema_table"]]
    statements += [s for migration in backend.MIGRATIONS[:version] for s in migration]
    mark = "?" if sqlite else "%s"
    inserts: list[tuple[str, list[Any]]] = []
    for table, dump in tables.items():
        columns = dump["columns"]
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
        for row in dump["rows"]:
            if not sqlite:  # SQLite wrote its booleans as 0/1
                row = [bool(v) if c in BOOLEAN_COLUMNS else v for c, v in zip(columns, row, strict=True)]
            inserts.append((sql, row))
    if sqlite:
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        for statement in statements:
            conn.execute(statement)
        for sql, row in inserts:
            conn.execute(sql, row)
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        for statement in statements:
            pg.execute(statement.encode())
        for sql, row in inserts:
            pg.execute(sql.encode(), row)
        # what a pg_dump restore does: the id sequence continues after the restored ids
        pg.execute(b"SELECT setval(pg_get_serial_sequence('buffers', 'id'), MAX(id)) FROM buffers")


def test_a_database_written_before_content_parts_reads_the_same_and_takes_parts(
    sql_url: str,
) -> None:
    tables = json.loads(FIXTURE.read_text())
    _restore(sql_url, tables)
    written = [json.loads(row[3]) for row in tables["buffer_rows"]["rows"]]
    chat = Address("global", "", "chat")
    store = open_store(sql_url)
    assert store.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert store.load(chat) == written
    assert all(isinstance(row["content"], str) for row in written)
    assert [r["content"] for r in written] == [
        "be brief", "weather in Paris and Rome?", "", "18C", "21C", "and?", "Paris 18C, Rome 21C.",
    ]  # fmt: skip
    assert store.get_record(Address("user", "7", "prefs"), 0.0) == (True, {"units": "metric"})
    # the old buffer keeps its rules (MEM-1 on an old id) and takes part rows
    assert store.append(chat, prepare({"role": "tool", "content": "x", "tool_call_id": "c1"}, 1)).appended == 0
    parts = [{"type": "text", "text": "see"}, {"type": "image", "data": "aGk=", "media_type": "image/png"}]
    new = prepare(
        [
            {"role": "user", "content": parts},
            {"role": "assistant", "content": [{"type": "reasoning", "text": "t", "signature": "s",
                                               "provider": "anthropic"}],
             "tool_calls": [{"tool_call_id": "c9", "name": "shot", "args": {}, "kind": "computer"}]},
            {"role": "tool", "content": parts[1:], "tool_call_id": "c9", "is_error": True},
        ],
        1_756_000_000,
    )  # fmt: skip
    store.append(chat, new)
    assert store.load(chat) == written + new
    assert store.load(chat, last=3)[0]["content"] == parts
    other = Address("global", "", "fresh")  # a buffer created after the upgrade
    store.append(other, new[:1])
    assert store.load(other) == new[:1]
    store.close()


V3_FIXTURE = Path(__file__).parent / "data" / "written-by-v3.json"


def test_a_version_3_database_gives_its_session_scope_data_sessions_owned_by_nobody(
    sql_url: str,
) -> None:
    """Migration 4 (decision 0032): session-scope data without a session record gets one."""
    _restore(sql_url, json.loads(V3_FIXTURE.read_text()))
    made = "00000000-0000-0000-0000-00000000a003"
    before = time.time()
    store = open_store(sql_url)
    try:
        assert store.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
        sessions, total = store.list_sessions(None, True, 100, 0)
        assert total == 3
        found = {s.id: s for s in sessions}
        assert sorted(found) == [made, "s-notes", "s-weather"]
        assert found[made].name == "made" and found[made].owner == "alice"  # kept as it was
        for sid in ("s-notes", "s-weather"):
            assert (found[sid].owner, found[sid].name, found[sid].status) == (None, "", "idle")
            assert before - 5 <= found[sid].created_at <= time.time() + 5
        assert store.load(Address("session", "s-weather", "chat_history"))[0]["content"] == "weather?"
        # owned by nobody: the former owner's erasure leaves it, a session delete removes it all
        assert store.erase_user("alice").sessions == 1
        assert store.delete_session("s-weather") and store.delete_session("s-notes")
        assert store.load(Address("session", "s-weather", "chat_history")) == []
        assert store.get_record(Address("session", "s-notes", "topic"), 0.0) == (False, None)
    finally:
        store.close()
def test_a_version_4_database_gets_the_idempotency_table(sql_url: str) -> None:
    """Migration 5 adds ``idempotency_keys`` to a database the previous schema wrote."""
    store = open_store(sql_url)
    store.put_record(KEY, "kept", None)
    store.close()
    _undo_from(sql_url, 12)  # what schema version 11 lacks (its triggers first)
    _sql(sql_url, "DROP TABLE idempotency_keys")  # what schema version 4 lacks
    _sql(sql_url, "ALTER TABLE buffers DROP COLUMN version")
    _drop_checkpoint_tables(sql_url)
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 5")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert again.get_record(KEY, 0.0) == (True, "kept")
    assert again.claim_idempotency(_KEYED, 0.0) is None
    assert again.get_idempotency("user:u", "k", 0.0) is not None
    again.close()


def test_a_version_5_database_gets_a_version_per_buffer_header(sql_url: str) -> None:
    """Migration 6 adds ``buffers.version`` (0 on old headers); every header write adds one.

    The second append declares a call, which writes the header on PostgreSQL too (a plain
    message may leave it unwritten there, decision 0195).
    """
    store = open_store(sql_url)
    store.append(KEY, prepare({"role": "user", "content": "kept"}, 1))
    store.close()
    _undo_from(sql_url, 12)  # what schema version 11 lacks (its triggers first)
    _sql(sql_url, "ALTER TABLE buffers DROP COLUMN version")  # what schema version 5 lacks
    _drop_checkpoint_tables(sql_url)
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 6")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert _scalar(sql_url, "SELECT version FROM buffers") == 0
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    again.append(KEY, prepare({"role": "assistant", "content": "more", "tool_calls": calls}, 2))
    assert _scalar(sql_url, "SELECT version FROM buffers") == 1
    assert [m["content"] for m in again.load(KEY)] == ["kept", "more"]
    again.close()


def test_a_version_6_database_gets_the_checkpoint_tables(sql_url: str) -> None:
    """Migration 7 adds LangGraph's checkpoint tables beside the data a version-6 flowmem wrote."""
    store = open_store(sql_url)
    store.append(KEY, prepare({"role": "user", "content": "kept"}, 1))
    store.close()
    _undo_from(sql_url, 12)  # what schema version 11 lacks (its triggers first)
    _drop_checkpoint_tables(sql_url)  # what schema version 6 lacks
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 7")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert _scalar(sql_url, "SELECT COUNT(*) FROM lg_checkpoints") == 0
    assert [m["content"] for m in again.load(KEY)] == ["kept"]
    again.close()


def test_a_version_7_database_remembers_deleted_sessions_from_now_on(sql_url: str) -> None:
    """Migration 8 adds ``deleted_sessions``: a session deleted after it is never made again."""
    store = open_store(sql_url)
    store.append(KEY, prepare({"role": "user", "content": "kept"}, 1))
    store.close()
    _undo_from(sql_url, 12)  # what schema version 11 lacks (its triggers first)
    _sql(sql_url, "DROP TABLE deleted_sessions")  # what schema version 7 lacks
    _undo_from(sql_url, 9)
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 8")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert _scalar(sql_url, "SELECT COUNT(*) FROM deleted_sessions") == 0
    assert [m["content"] for m in again.load(KEY)] == ["kept"]
    again.close()


def test_a_version_8_database_gets_the_conversation_tables(sql_url: str) -> None:
    """The pydantic-ai migration adds ``pa_conversations`` and ``pa_entries``, empty."""
    store = open_store(sql_url)
    store.append(KEY, prepare({"role": "user", "content": "kept"}, 1))
    store.close()
    _undo_from(sql_url, 9)  # what schema version 8 lacks
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 9")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert _scalar(sql_url, "SELECT COUNT(*) FROM pa_conversations") == 0
    assert _scalar(sql_url, "SELECT COUNT(*) FROM pa_entries") == 0


def test_a_database_without_the_adk_tables_gets_them_and_keeps_its_data(sql_url: str) -> None:
    """The ADK migration adds its three tables, empty, to a database written before it."""
    store = open_store(sql_url)
    store.append(KEY, prepare({"role": "user", "content": "kept"}, 1))
    store.close()
    _undo_from(sql_url, 10)  # what the schema before the ADK migration lacks
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 10")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    for table in ("adk_sessions", "adk_app_states", "adk_user_states"):
        assert _scalar(sql_url, f"SELECT COUNT(*) FROM {table}") == 0
    assert [m["content"] for m in again.load(KEY)] == ["kept"]
    again.close()


def test_a_version_10_database_remembers_evicted_call_ids_from_now_on(sql_url: str) -> None:
    """Migration 11 adds ``buffer_evicted``: a buffer's window remembers what it evicts after it."""
    store = open_store(sql_url)
    store.append(KEY, prepare([*_call_and_answer(), {"role": "user", "content": "kept"}], 1))
    store.close()
    _undo_from(sql_url, 11)  # what the schema before the evicted ids' migration lacks
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 11")
    again = open_store(sql_url)
    assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
    assert _scalar(sql_url, "SELECT COUNT(*) FROM buffer_evicted") == 0
    again.append(KEY, prepare({"role": "user", "content": "next"}, 2), max_messages=2)
    assert _scalar(sql_url, "SELECT COUNT(*) FROM buffer_evicted") == 1
    assert [m["content"] for m in again.load(KEY)] == ["kept", "next"]
    again.close()


_KEYED = Idempotency("user:u", "k", "fp", None, lambda outcome: (200, "{}"))


def test_a_version_11_database_gets_its_usage_counted(sql_url: str) -> None:
    """Migration 12 finds whose quota each buffer and record counts against, and counts it."""
    store = open_store(sql_url)
    sid = "00000000-0000-0000-0000-0000000000c9"
    store.create_session(SessionRecord(id=sid, name="n", owner="alice"))
    store.append(Address("session", sid, "chat"), _call_and_answer())
    store.append(Address("user", "alice", "notes"), _call_and_answer())
    store.put_record(Address("user", "alice", "r"), "v", None)
    store.append(Address("global", "", "shared"), _call_and_answer())  # nobody's
    counted = store.usage("alice")
    store.close()
    _undo_from(sql_url, 12)  # what schema version 11 lacks
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 12")
    again = open_store(sql_url)
    try:
        assert again.usage("alice") == counted
        assert (counted.buffers, counted.records) == (2, 1) and counted.bytes > 0
        again.append(Address("user", "alice", "notes"), prepare({"role": "user", "content": "x"}, 1))
        assert again.usage("alice").bytes > counted.bytes
    finally:
        again.close()


def test_the_database_size_is_reported_and_grows_with_what_is_stored(sql_store_url: str) -> None:
    """``database_bytes`` (the metrics' ``flowmem_database_bytes`` gauge) on each SQL backend."""
    store = open_store(sql_store_url)
    try:
        empty = store.database_bytes()  # type: ignore[attr-defined]
        assert empty > 0
        rows = prepare([{"role": "user", "content": "x" * 2000} for _ in range(400)])
        store.append(Address("global", "", "big"), rows)
        assert store.database_bytes() > empty  # type: ignore[attr-defined]
    finally:
        store.close()


def test_a_version_12_database_counts_its_rows_tokens_when_read(sql_url: str) -> None:
    """Migration 13 adds the token counts; rows stored before have none and are counted when read."""
    store = open_store(sql_url)
    store.append(KEY, prepare([{"role": "system", "content": "s"}, *_call_and_answer()], 1))
    rows = store.load(KEY)
    store.close()
    _undo_from(sql_url, 13)  # what schema version 12 lacks
    _sql(sql_url, "DELETE FROM flowmem_schema WHERE version >= 13")
    again = open_store(sql_url)
    try:
        assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
        tail = again.read_tail(KEY)
        assert tail.tokens == sum(map(estimate_tokens, rows))
        assert [item.row for item in tail.systems] == rows[:1]
        again.append(KEY, prepare({"role": "user", "content": "new"}, 1))
        assert again.read_tail(KEY).tokens == sum(map(estimate_tokens, again.load(KEY)))
    finally:
        again.close()


def test_a_database_without_the_archive_gets_it_and_keeps_its_evicted_ids(sql_url: str) -> None:
    """The archive's migration: its table, and evicted ids flagged as not archived."""
    from flowmem.service import MemoryService

    store = open_store(sql_url)
    address = Address("user", "alice", "notes")
    store.append(address, _call_and_answer(), max_messages=1)  # evicts the call: remembered
    store.close()
    _undo_from(sql_url, _ARCHIVE)
    _sql(sql_url, f"DELETE FROM flowmem_schema WHERE version >= {_ARCHIVE}")
    again = open_store(sql_url)
    try:
        assert again.schema_version() == _migrations(sql_url)  # type: ignore[attr-defined]
        service = MemoryService(again)
        late = service.append_raw("user", "alice", "notes", [_call_and_answer()[1]])
        assert late.appended == 0  # the evicted id is still known (MEM-1)
        rows = [{"role": "user", "content": "q " * 200}, {"role": "user", "content": "r"}]
        service.append_raw("user", "alice", "notes", rows)
        done = service.compact_raw("user", "alice", "notes", keep_tokens=20, summarize=lambda r: "s")
        assert done.compacted
    finally:
        again.close()
