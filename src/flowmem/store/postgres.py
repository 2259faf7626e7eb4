"""``PostgresStore``: PostgreSQL through psycopg 3 and a ``psycopg_pool`` pool.

For deployments with many processes or machines (``postgresql://user@host/db``).
Appends run ``flowmem.core.apply_append`` through ``SqlBufferEditor`` inside one
transaction that first takes a transaction-scoped advisory lock on the buffer's
address under ``lock_timeout`` (MEM-12).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg import pq
from psycopg.abc import PQGen
from psycopg.abc import Transformer as AbcTransformer
from psycopg.adapt import PyFormat, Transformer
from psycopg.generators import fetch_many, send
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGconn, PGresult
from psycopg_pool import ConnectionPool, PoolTimeout

from flowmem.core import Answer, AppendOutcome, Message, apply_append, call_ids, result_id
from flowmem.errors import (
    BufferChangedError,
    ConfigurationError,
    IdempotencyKeyInFlightError,
    InvalidInputError,
    QuotaExceededError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from flowmem.store.adk import postgres as adk_tables
from flowmem.store.adk.sql import SqlAdkSessions
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    PAGE_CHARS,
    PAGE_ROWS,
    Address,
    BodyPage,
    Idempotency,
    Quotas,
    Store,
    Usage,
    WriteGuard,
)
from flowmem.store.checkpoints import postgres as checkpoint_tables
from flowmem.store.checkpoints.sql import SqlCheckpoints
from flowmem.store.conversations import postgres as conversation_tables
from flowmem.store.conversations.sql import SqlConversations
from flowmem.store.editor import SqlBufferEditor, SqlRunner, load_rows
from flowmem.store.known import (
    DEFAULT_KNOWN_BUFFERS,
    FORESEEABLE,
    MAX_KNOWN_OPEN,
    Known,
    KnownBuffers,
    Unforeseen,
    foresee,
)
from flowmem.store.rows import (
    check_address,
    check_batch,
    check_buffer_bytes,
    check_last,
    check_lock_timeout,
    check_rows,
    ensure_form,
    guard_form,
)
from flowmem.store.sqlbase import LAST_MAX, SqlStore

log = logging.getLogger("flowmem")

T = TypeVar("T")

UNSERIALIZED_ATTEMPTS = 20  # retries of an unserialized append that collided with another
MIGRATION_LOCK = 0x666C6F776D656D  # advisory key serializing schema migrations ("flowmem")
POOL_PARAMS = ("pool_min", "pool_max", "connect_timeout_s", "known_buffers")

# whose quota data at a scope counts against (flowmem.store.base.quota_owner, in SQL)
_OWNER_OF = """CASE {t}.scope WHEN 'user' THEN {t}.scope_id
    WHEN 'session' THEN (SELECT owner FROM sessions WHERE sessions.id = {t}.scope_id) END"""

# Append-only: never edit a released migration, add a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE records (
            scope TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL,
            value TEXT NOT NULL, expires_at DOUBLE PRECISION,
            PRIMARY KEY (scope, scope_id, key))""",
        """CREATE TABLE buffers (
            id BIGSERIAL PRIMARY KEY,
            scope TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL,
            count BIGINT NOT NULL DEFAULT 0, last_major BIGINT NOT NULL DEFAULT 0,
            UNIQUE (scope, scope_id, key))""",
        """CREATE TABLE buffer_rows (
            buffer_id BIGINT NOT NULL, pos BIGINT NOT NULL,
            role TEXT NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (buffer_id, pos))""",
        "CREATE INDEX buffer_rows_turns ON buffer_rows (buffer_id, pos) WHERE role <> 'tool'",
        """CREATE TABLE buffer_calls (
            buffer_id BIGINT NOT NULL, call_id TEXT NOT NULL,
            declared_pos BIGINT NOT NULL, ord INTEGER NOT NULL, answered BOOLEAN NOT NULL,
            PRIMARY KEY (buffer_id, call_id, declared_pos))""",
        "CREATE INDEX buffer_calls_pos ON buffer_calls (buffer_id, declared_pos)",
        """CREATE INDEX buffer_calls_open ON buffer_calls (buffer_id, declared_pos, ord)
            WHERE NOT answered""",
        """CREATE TABLE buffer_answers (
            buffer_id BIGINT NOT NULL, call_id TEXT NOT NULL, pos BIGINT NOT NULL,
            healed BOOLEAN NOT NULL,
            PRIMARY KEY (buffer_id, call_id, pos))""",
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, owner TEXT, status TEXT NOT NULL,
            agent TEXT, metadata TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL)""",
        "CREATE INDEX sessions_owner ON sessions (owner, created_at, id)",
        "CREATE INDEX sessions_created ON sessions (created_at, id)",
        "CREATE TABLE transcript_seq (session_id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)",
        """CREATE TABLE transcripts (
            session_id TEXT NOT NULL, seq BIGINT NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq))""",
        """CREATE TABLE tokens (
            id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, user_id TEXT,
            permissions TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            revoked BOOLEAN NOT NULL DEFAULT FALSE, label TEXT NOT NULL DEFAULT '')""",
    ),
    (  # 2: expired records are found by expiry (purge_expired)
        "CREATE INDEX records_expiry ON records (expires_at) WHERE expires_at IS NOT NULL",
    ),
    (  # 3: the buffer header keeps the UTF-8 size of its rows (the buffer_bytes limit)
        "ALTER TABLE buffers ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0",
        """UPDATE buffers SET bytes = COALESCE((SELECT SUM(octet_length(body))
            FROM buffer_rows WHERE buffer_rows.buffer_id = buffers.id), 0)""",
    ),
    (  # 4: session-scope data written without a session record gets one, owned by nobody
        """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at, updated_at)
            SELECT scope_id, '', NULL, 'idle', NULL, '{}',
                EXTRACT(EPOCH FROM now())::double precision,
                EXTRACT(EPOCH FROM now())::double precision
            FROM (SELECT scope_id FROM buffers WHERE scope = 'session'
                UNION SELECT scope_id FROM records WHERE scope = 'session') AS scoped
            WHERE scope_id NOT IN (SELECT id FROM sessions)""",
    ),
    (  # 5: idempotency keys with the answer to repeat (docs/decisions/0031)
        """CREATE TABLE idempotency_keys (
            owner TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
            status INTEGER NOT NULL, body TEXT NOT NULL, expires_at DOUBLE PRECISION,
            PRIMARY KEY (owner, key))""",
        """CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)
            WHERE expires_at IS NOT NULL""",
    ),
    (  # 6: every header write increments the version (known buffers, docs/decisions/0039)
        "ALTER TABLE buffers ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
    ),
    # 7: LangGraph checkpoints, channel values and pending writes (docs/decisions/0040)
    checkpoint_tables.MIGRATION,
    (  # 8: a deleted session's id is remembered: no write brings it back (issue 24 §2)
        "CREATE TABLE deleted_sessions (id TEXT PRIMARY KEY, deleted_at DOUBLE PRECISION NOT NULL)",
    ),
    # 9: pydantic-ai conversation records and where their entries end (docs/decisions/0051)
    conversation_tables.MIGRATION,
    # 10: Google ADK sessions, app state and user state (docs/decisions/0053)
    adk_tables.MIGRATION,
    (  # 11: the call ids of turns a window evicted, the latest remembered (issue 24 §2)
        """CREATE TABLE buffer_evicted (
            buffer_id BIGINT NOT NULL, call_id TEXT NOT NULL, seq BIGINT NOT NULL,
            PRIMARY KEY (buffer_id, call_id))""",
        "CREATE INDEX buffer_evicted_seq ON buffer_evicted (buffer_id, seq)",
    ),
    # 12: per-user quotas, counted in the write's own transaction (docs/decisions/0044):
    # whose quota each buffer and record counts against, what each user has, and the
    # triggers that keep the count; the quotas are the connection's flowmem.quota_* settings
    (
        "ALTER TABLE buffers ADD COLUMN owner TEXT",
        "ALTER TABLE records ADD COLUMN owner TEXT",
        f"UPDATE buffers SET owner = {_OWNER_OF.format(t='buffers')}",
        f"UPDATE records SET owner = {_OWNER_OF.format(t='records')}",
        """CREATE TABLE user_usage (
            user_id TEXT PRIMARY KEY, bytes BIGINT NOT NULL DEFAULT 0,
            buffers BIGINT NOT NULL DEFAULT 0, records BIGINT NOT NULL DEFAULT 0)""",
        """INSERT INTO user_usage (user_id, bytes, buffers, records)
            SELECT owner, SUM(b), SUM(n), SUM(r) FROM (
                SELECT owner, bytes AS b, 1 AS n, 0 AS r FROM buffers WHERE owner IS NOT NULL
                UNION ALL SELECT owner, octet_length(value), 0, 1 FROM records
                    WHERE owner IS NOT NULL) AS owned GROUP BY owner""",
        """CREATE FUNCTION flowmem_quota_check(who TEXT, quota TEXT, used BIGINT) RETURNS void
            LANGUAGE plpgsql AS $$
            DECLARE
                quota_limit BIGINT := NULLIF(current_setting('flowmem.quota_' || quota, true), '')::BIGINT;
            BEGIN
                IF quota_limit > 0 AND used > quota_limit THEN
                    RAISE EXCEPTION 'flowmem_quota' USING DETAIL = quota || ' ' || quota_limit, HINT = who;
                END IF;
            END $$""",
        f"""CREATE FUNCTION flowmem_owner() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.owner := {_OWNER_OF.format(t='NEW')};
                RETURN NEW;
            END $$""",
        """CREATE TRIGGER buffers_owner BEFORE INSERT ON buffers
            FOR EACH ROW EXECUTE FUNCTION flowmem_owner()""",
        """CREATE TRIGGER records_owner BEFORE INSERT ON records
            FOR EACH ROW EXECUTE FUNCTION flowmem_owner()""",
        # add (size, buffers, records) to a user's usage; return the new row. An UPDATE
        # first (the usual case: the row exists), the insert only for a user's first data
        """CREATE FUNCTION flowmem_usage_add(who TEXT, size BIGINT, buffers BIGINT, records BIGINT)
            RETURNS user_usage LANGUAGE plpgsql AS $$
            DECLARE used user_usage%ROWTYPE;
            BEGIN
                UPDATE user_usage AS u SET bytes = u.bytes + size, buffers = u.buffers + flowmem_usage_add.buffers,
                    records = u.records + flowmem_usage_add.records
                    WHERE user_id = who RETURNING * INTO used;
                IF NOT FOUND THEN
                    INSERT INTO user_usage AS u (user_id, bytes, buffers, records)
                        VALUES (who, size, flowmem_usage_add.buffers, flowmem_usage_add.records)
                        ON CONFLICT (user_id) DO UPDATE SET bytes = u.bytes + excluded.bytes,
                        buffers = u.buffers + excluded.buffers, records = u.records + excluded.records
                        RETURNING * INTO used;
                END IF;
                RETURN used;
            END $$""",
        """CREATE FUNCTION flowmem_buffer_grown() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE used user_usage%ROWTYPE; quota_limit BIGINT;
            BEGIN
                IF TG_OP = 'INSERT' THEN
                    used := flowmem_usage_add(NEW.owner, NEW.bytes, 1, 0);
                    PERFORM flowmem_quota_check(NEW.owner, 'buffers', used.buffers);
                    RETURN NULL;
                END IF;
                -- the append's own path, once per append: written out, no call
                UPDATE user_usage SET bytes = bytes + (NEW.bytes - OLD.bytes)
                    WHERE user_id = NEW.owner RETURNING * INTO used;
                IF NOT FOUND THEN
                    used := flowmem_usage_add(NEW.owner, NEW.bytes - OLD.bytes, 0, 0);
                END IF;
                IF NEW.bytes > OLD.bytes THEN
                    quota_limit := NULLIF(current_setting('flowmem.quota_bytes', true), '')::BIGINT;
                    IF quota_limit > 0 AND used.bytes > quota_limit THEN
                        RAISE EXCEPTION 'flowmem_quota'
                            USING DETAIL = 'bytes ' || quota_limit, HINT = NEW.owner;
                    END IF;
                END IF;
                RETURN NULL;
            END $$""",
        """CREATE FUNCTION flowmem_buffer_dropped() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM flowmem_usage_add(OLD.owner, -OLD.bytes, -1, 0);
                RETURN NULL;
            END $$""",
        # the WHEN clauses spare the function call when nothing is counted
        """CREATE TRIGGER buffers_usage_insert AFTER INSERT ON buffers FOR EACH ROW
            WHEN (NEW.owner IS NOT NULL) EXECUTE FUNCTION flowmem_buffer_grown()""",
        """CREATE TRIGGER buffers_usage_update AFTER UPDATE OF bytes ON buffers FOR EACH ROW
            WHEN (NEW.owner IS NOT NULL AND NEW.bytes <> OLD.bytes)
            EXECUTE FUNCTION flowmem_buffer_grown()""",
        """CREATE TRIGGER buffers_usage_delete AFTER DELETE ON buffers FOR EACH ROW
            WHEN (OLD.owner IS NOT NULL) EXECUTE FUNCTION flowmem_buffer_dropped()""",
        """CREATE FUNCTION flowmem_record_grown() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE used user_usage%ROWTYPE;
            BEGIN
                IF TG_OP = 'INSERT' THEN
                    used := flowmem_usage_add(NEW.owner, octet_length(NEW.value), 0, 1);
                    PERFORM flowmem_quota_check(NEW.owner, 'records', used.records);
                    PERFORM flowmem_quota_check(NEW.owner, 'bytes', used.bytes);
                ELSE
                    used := flowmem_usage_add(NEW.owner, octet_length(NEW.value) - octet_length(OLD.value), 0, 0);
                    IF octet_length(NEW.value) > octet_length(OLD.value) THEN
                        PERFORM flowmem_quota_check(NEW.owner, 'bytes', used.bytes);
                    END IF;
                END IF;
                RETURN NULL;
            END $$""",
        """CREATE FUNCTION flowmem_record_dropped() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM flowmem_usage_add(OLD.owner, -octet_length(OLD.value), 0, -1);
                RETURN NULL;
            END $$""",
        """CREATE TRIGGER records_usage_insert AFTER INSERT ON records FOR EACH ROW
            WHEN (NEW.owner IS NOT NULL) EXECUTE FUNCTION flowmem_record_grown()""",
        """CREATE TRIGGER records_usage_update AFTER UPDATE OF value ON records FOR EACH ROW
            WHEN (NEW.owner IS NOT NULL AND octet_length(NEW.value) <> octet_length(OLD.value))
            EXECUTE FUNCTION flowmem_record_grown()""",
        """CREATE TRIGGER records_usage_delete AFTER DELETE ON records FOR EACH ROW
            WHEN (OLD.owner IS NOT NULL) EXECUTE FUNCTION flowmem_record_dropped()""",
    ),
)

_B = "buffer_id = %s"
_ADDR = "scope = %s AND scope_id = %s AND key = %s"
SQL: dict[str, str] = {
    "header_get": f"SELECT id, count, last_major, bytes FROM buffers WHERE {_ADDR}",
    "header_insert": "INSERT INTO buffers (scope, scope_id, key) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
    "header_update": "UPDATE buffers SET count = %s, last_major = %s, bytes = %s, version = version + 1 WHERE id = %s",
    "is_declared": f"SELECT 1 FROM buffer_calls WHERE {_B} AND call_id = %s LIMIT 1",
    "answer_of": f"SELECT pos, healed FROM buffer_answers WHERE {_B} AND call_id = %s ORDER BY pos LIMIT 1",
    "open_calls": f"SELECT call_id, declared_pos FROM buffer_calls WHERE {_B} AND NOT answered ORDER BY declared_pos, ord",
    "run_end": f"""SELECT MAX(pos) FROM buffer_rows WHERE {_B} AND pos > %s AND pos < COALESCE(
        (SELECT MIN(pos) FROM buffer_rows WHERE {_B} AND pos > %s AND role <> 'tool'),
        9223372036854775807)""",
    "oldest": f"SELECT pos, body FROM buffer_rows WHERE {_B} ORDER BY pos LIMIT 1",
    "newest": f"SELECT pos, body FROM buffer_rows WHERE {_B} ORDER BY pos DESC LIMIT 1",
    "row_get": f"SELECT body FROM buffer_rows WHERE {_B} AND pos = %s",
    "next_pos": f"SELECT MIN(pos) FROM buffer_rows WHERE {_B} AND pos > %s",
    "max_before": f"SELECT MAX(pos) FROM buffer_rows WHERE {_B} AND pos > %s AND pos < %s",
    "row_insert": "INSERT INTO buffer_rows (buffer_id, pos, role, body) VALUES (%s, %s, %s, %s)",
    "row_update": f"UPDATE buffer_rows SET role = %s, body = %s WHERE {_B} AND pos = %s",
    "row_delete": f"DELETE FROM buffer_rows WHERE {_B} AND pos = %s",
    "call_insert": f"""INSERT INTO buffer_calls (buffer_id, call_id, declared_pos, ord, answered)
        VALUES (%s, %s, %s, %s, EXISTS (SELECT 1 FROM buffer_answers WHERE {_B} AND call_id = %s))
        ON CONFLICT DO NOTHING""",
    "calls_delete": f"DELETE FROM buffer_calls WHERE {_B} AND declared_pos = %s",
    "answer_insert": "INSERT INTO buffer_answers (buffer_id, call_id, pos, healed) VALUES (%s, %s, %s, %s)",
    "answer_delete": f"DELETE FROM buffer_answers WHERE {_B} AND call_id = %s AND pos = %s",
    "calls_answered": f"UPDATE buffer_calls SET answered = TRUE WHERE {_B} AND call_id = %s AND NOT answered",
    "calls_reopen": f"""UPDATE buffer_calls SET answered = FALSE WHERE {_B} AND call_id = %s AND NOT EXISTS
        (SELECT 1 FROM buffer_answers WHERE {_B} AND call_id = %s)""",
    "shift_rows": f"UPDATE buffer_rows SET pos = -(pos + %s) WHERE {_B} AND pos > %s AND pos < %s",
    "shift_calls": f"UPDATE buffer_calls SET declared_pos = -(declared_pos + %s) WHERE {_B} AND declared_pos > %s AND declared_pos < %s",
    "shift_answers": f"UPDATE buffer_answers SET pos = -(pos + %s) WHERE {_B} AND pos > %s AND pos < %s",
    "unflip_rows": f"UPDATE buffer_rows SET pos = -pos WHERE {_B} AND pos < 0",
    "unflip_calls": f"UPDATE buffer_calls SET declared_pos = -declared_pos WHERE {_B} AND declared_pos < 0",
    "unflip_answers": f"UPDATE buffer_answers SET pos = -pos WHERE {_B} AND pos < 0",
    "was_evicted": f"SELECT 1 FROM buffer_evicted WHERE {_B} AND call_id = %s",
    "evicted_insert": f"""INSERT INTO buffer_evicted (buffer_id, call_id, seq) VALUES (%s, %s,
        (SELECT COALESCE(MAX(seq), 0) + 1 FROM buffer_evicted WHERE {_B}))
        ON CONFLICT (buffer_id, call_id) DO UPDATE SET seq = excluded.seq""",
    "evicted_trim": f"""DELETE FROM buffer_evicted WHERE {_B} AND seq <=
        (SELECT MAX(seq) FROM buffer_evicted WHERE {_B}) - %s""",
    # --- outside the editor ---
    # set_config runs in the FROM subquery (volatile: never pulled up), so before the lock.
    # The transaction's statements after it use generic plans: re-planning the append's
    # facts query at every execution (a custom plan) cost more than running it.
    "timed_lock": """SELECT pg_advisory_xact_lock(%s)
        FROM (SELECT set_config('lock_timeout', %s, true),
            set_config('plan_cache_mode', 'force_generic_plan', true)) AS bound""",
    "advisory_lock": "SELECT pg_advisory_xact_lock(%s)",
    "begin": "BEGIN",
    "commit": "COMMIT",
    "rollback": "ROLLBACK",
    # the buffer id first (a scalar subquery), so the rows come from the (buffer_id, pos) index
    "load_all": f"""SELECT body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE {_ADDR}) ORDER BY pos""",
    # run unprepared with the buffer id known, so the planner sees how many rows this
    # buffer has and walks the primary key backwards instead of sorting the buffer
    "load_last": """SELECT body FROM (SELECT pos, body FROM buffer_rows WHERE buffer_id = %s
        ORDER BY pos DESC LIMIT %s) AS tail ORDER BY pos""",
    "bodies_before": f"""SELECT pos, body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE {_ADDR}) AND pos < %s ORDER BY pos""",
    # like load_last: unprepared, with the buffer id known
    "bodies_last_before": """SELECT pos, body FROM (SELECT pos, body FROM buffer_rows
        WHERE buffer_id = %s AND pos < %s ORDER BY pos DESC LIMIT %s) AS tail ORDER BY pos""",
    "count": f"SELECT count FROM buffers WHERE {_ADDR}",
    "usage_get": "SELECT bytes, buffers, records FROM user_usage WHERE user_id = %s",
    "usage_delete": "DELETE FROM user_usage WHERE user_id = %s",
    "quotas_set": """SELECT set_config('flowmem.quota_bytes', %s, false),
        set_config('flowmem.quota_buffers', %s, false), set_config('flowmem.quota_records', %s, false)""",
    # a paged read (page_bodies): one statement, one snapshot; the page is cut by size on the
    # server (octet_length reads no TOASTed body), so the client gets the page only
    "page_head": f"SELECT id, id, version, count FROM buffers WHERE {_ADDR}",
    "page_floor": f"SELECT pos FROM buffer_rows WHERE {_B} AND pos < %s ORDER BY pos DESC LIMIT 1 OFFSET %s",
    "page_rows": f"SELECT pos, body FROM buffer_rows WHERE {_B} AND pos > %s AND pos < %s ORDER BY pos LIMIT %s",
}
_PAGE = """LEFT JOIN LATERAL (SELECT pos, body, fetched FROM (
        SELECT pos, body, COUNT(*) OVER () AS fetched, ROW_NUMBER() OVER (ORDER BY pos) AS n,
            SUM(octet_length(body)) OVER (ORDER BY pos ROWS UNBOUNDED PRECEDING)
                - octet_length(body) AS ahead
        FROM (SELECT pos, body FROM buffer_rows WHERE buffer_id = b.id AND pos > {low} AND pos < %s
            ORDER BY pos LIMIT %s) AS page) AS sized
    WHERE n = 1 OR (n <= %s AND ahead < %s)) AS p ON true"""
SQL |= {
    "page_read": f"""SELECT b.id, b.version, b.count, NULL::bigint, p.pos, p.body, p.fetched
    FROM buffers b {_PAGE.format(low="%s")} WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s
    ORDER BY p.pos""",
    "page_read_last": f"""SELECT b.id, b.version, b.count, f.floor, p.pos, p.body, p.fetched
    FROM buffers b CROSS JOIN LATERAL (SELECT (SELECT pos FROM buffer_rows WHERE buffer_id = b.id
        AND pos < %s ORDER BY pos DESC LIMIT 1 OFFSET %s) AS floor) AS f
    {_PAGE.format(low="GREATEST(%s, COALESCE(f.floor, -1))")}
    WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s ORDER BY p.pos""",
    "clear_rows": f"DELETE FROM buffer_rows WHERE {_B}",
    "clear_calls": f"DELETE FROM buffer_calls WHERE {_B}",
    "clear_answers": f"DELETE FROM buffer_answers WHERE {_B}",
    "clear_evicted": f"DELETE FROM buffer_evicted WHERE {_B}",
    "clear_header": "DELETE FROM buffers WHERE id = %s",
    "scope_buffers": "SELECT id, key FROM buffers WHERE scope = %s AND scope_id = %s ORDER BY id",
    "scope_records_delete": "DELETE FROM records WHERE scope = %s AND scope_id = %s",
    "sessions_of_owner": "SELECT id, status FROM sessions WHERE owner = %s ORDER BY id FOR UPDATE",
    "tokens_of_user_delete": "DELETE FROM tokens WHERE user_id = %s",
    "records_purge": """DELETE FROM records WHERE expires_at <= %s AND (scope, scope_id, key) IN
        (SELECT scope, scope_id, key FROM records WHERE expires_at <= %s LIMIT %s)""",
    # idempotency keys (docs/decisions/0031); a second insert of one key is a unique violation
    "idem_insert": """INSERT INTO idempotency_keys (owner, key, fingerprint, status, body, expires_at)
        VALUES (%s, %s, %s, %s, %s, %s)""",
    "idem_claim": """INSERT INTO idempotency_keys (owner, key, fingerprint, status, body, expires_at)
        VALUES (%s, %s, %s, 0, '', %s) ON CONFLICT (owner, key) DO UPDATE
        SET fingerprint = excluded.fingerprint, status = 0, body = '', expires_at = excluded.expires_at
        WHERE idempotency_keys.expires_at <= %s""",
    "idem_get": "SELECT fingerprint, status, body, expires_at FROM idempotency_keys WHERE owner = %s AND key = %s",
    "idem_drop_expired": "DELETE FROM idempotency_keys WHERE owner = %s AND key = %s AND expires_at <= %s",
    "idem_answer": "UPDATE idempotency_keys SET status = %s, body = %s WHERE owner = %s AND key = %s AND status = 0",
    "idem_release": "DELETE FROM idempotency_keys WHERE owner = %s AND key = %s AND status = 0",
    "idem_of_owner_delete": "DELETE FROM idempotency_keys WHERE owner = %s",
    "idem_purge": """DELETE FROM idempotency_keys WHERE expires_at <= %s AND (owner, key) IN
        (SELECT owner, key FROM idempotency_keys WHERE expires_at <= %s LIMIT %s)""",
    "record_get": f"SELECT value, expires_at FROM records WHERE {_ADDR}",
    "record_put": """INSERT INTO records (scope, scope_id, key, value, expires_at)
        VALUES (%s, %s, %s, %s, %s) ON CONFLICT (scope, scope_id, key) DO UPDATE
        SET value = excluded.value, expires_at = excluded.expires_at""",
    "record_delete": f"DELETE FROM records WHERE {_ADDR}",
    "session_insert": """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at,
        updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)""",
    "session_get": "SELECT id, name, owner, status, agent, metadata, created_at, updated_at FROM sessions WHERE id = %s",
    "sessions_all": """SELECT id, name, owner, status, agent, metadata, created_at, updated_at
        FROM sessions ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s""",
    "sessions_all_count": "SELECT COUNT(*) FROM sessions",
    "sessions_owned": """SELECT id, name, owner, status, agent, metadata, created_at, updated_at
        FROM sessions WHERE owner = %s ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s""",
    "sessions_owned_count": "SELECT COUNT(*) FROM sessions WHERE owner = %s",
    # a clear's running-turn guard: the share lock waits for a status change in flight
    "session_status_guard": "SELECT status FROM sessions WHERE id = %s FOR SHARE",
    "session_status_cas": """UPDATE sessions SET status = %s WHERE id = %s
        AND (%s::text[] IS NULL OR status = ANY(%s::text[]))""",
    "session_delete": "DELETE FROM sessions WHERE id = %s RETURNING status",
    "transcript_seq_delete": "DELETE FROM transcript_seq WHERE session_id = %s",
    "transcript_insert": "INSERT INTO transcripts (session_id, seq, body) VALUES (%s, %s, %s)",
    "transcript_page_asc": """SELECT seq, body FROM transcripts WHERE session_id = %s AND seq > %s
        AND seq < %s ORDER BY seq LIMIT %s""",
    "transcript_page_desc": """SELECT seq, body FROM transcripts WHERE session_id = %s AND seq > %s
        AND seq < %s ORDER BY seq DESC LIMIT %s""",
    "transcript_update": "UPDATE transcripts SET body = %s WHERE session_id = %s AND seq = %s",
    "transcript_delete": "DELETE FROM transcripts WHERE session_id = %s AND seq = %s",
    "transcript_delete_all": "DELETE FROM transcripts WHERE session_id = %s",
    "token_insert": """INSERT INTO tokens (id, token_hash, user_id, permissions, created_at, revoked,
        label) VALUES (%s, %s, %s, %s, %s, %s, %s)""",
    "token_by_hash": """SELECT id, token_hash, user_id, permissions, created_at, revoked, label
        FROM tokens WHERE token_hash = %s""",
    "tokens_all": """SELECT id, token_hash, user_id, permissions, created_at, revoked, label
        FROM tokens ORDER BY created_at, id""",
    "token_revoke": "UPDATE tokens SET revoked = TRUE WHERE id = %s",
    "schema_table": """CREATE TABLE IF NOT EXISTS flowmem_schema (
        version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)""",
    "schema_version": "SELECT COALESCE(MAX(version), 0) FROM flowmem_schema",
    "schema_insert": "INSERT INTO flowmem_schema (version, applied_at) VALUES (%s, %s)",
    "token_valid": "SELECT 1 FROM tokens WHERE id = %s AND NOT revoked",
}

# Write guards (docs/decisions/0014): a guarded write locks the rows its guard reads
# until it commits: the token FOR SHARE (a revocation or an erasure, which update or
# delete it, waits for the write, and a write waiting for them finds it gone) and
# the session FOR KEY SHARE (its delete waits likewise; status updates do not).
# Always the token first, then the session, then the buffer's advisory lock: the
# order an erasure takes them in, so the two never wait for each other in a cycle.
# An uncorrelated EXISTS runs once before its query's rows (an initPlan), and
# ``FOR SHARE`` keeps the planner from turning it into a join, so that order holds.
_TOKEN_VALID = "EXISTS (SELECT 1 FROM tokens WHERE id = %s AND NOT revoked FOR SHARE)"
GUARDS: dict[str, str] = {
    "token": _TOKEN_VALID,
    "session": "EXISTS (SELECT 1 FROM sessions WHERE id = %s FOR KEY SHARE)",
    "both": f"EXISTS (SELECT 1 FROM sessions WHERE id = %s AND {_TOKEN_VALID} FOR KEY SHARE)",
    # a claim (docs/decisions/0032): the session exists AND is owned by the claimed owner
    "owned": """EXISTS (SELECT 1 FROM sessions WHERE id = %s
        AND owner IS NOT DISTINCT FROM %s::text FOR KEY SHARE)""",
    "both_owned": f"""EXISTS (SELECT 1 FROM sessions WHERE id = %s
        AND owner IS NOT DISTINCT FROM %s::text AND {_TOKEN_VALID} FOR KEY SHARE)""",
    "same": """EXISTS (SELECT 1 FROM sessions WHERE id = %s AND owner IS NOT DISTINCT FROM
        %s::text AND created_at = %s::double precision FOR KEY SHARE)""",
    "both_same": f"""EXISTS (SELECT 1 FROM sessions WHERE id = %s AND owner IS NOT DISTINCT FROM
        %s::text AND created_at = %s::double precision AND {_TOKEN_VALID} FOR KEY SHARE)""",
}
# A claiming write's first statement (in the append's pipeline: no round trip of
# its own): create the session unless it exists (or the token is not valid, or its
# owner is at the limit). CASE evaluates its branches in order and an initPlan runs
# only when its branch is reached, so the token is locked first (the order of
# docs/decisions/0014) and the owner's sessions are counted only for a new session.
# ON CONFLICT waits for a concurrent first write of the same id and then does nothing.
_ENSURE = """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at,
    updated_at) SELECT %s, '', %s::text, 'idle', NULL, '{{}}', %s::double precision,
    %s::double precision WHERE CASE {token}
    WHEN EXISTS (SELECT 1 FROM sessions WHERE id = %s) THEN FALSE
    WHEN EXISTS (SELECT 1 FROM deleted_sessions WHERE id = %s) THEN FALSE
    WHEN %s::bigint = 0 OR %s::text IS NULL THEN TRUE
    ELSE (SELECT COUNT(*) FROM sessions WHERE owner = %s::text) < %s::bigint END
    ON CONFLICT (id) DO NOTHING"""
SQL["session_ensure"] = _ENSURE.format(token="")
SQL["session_ensure@token"] = _ENSURE.format(token=f"WHEN NOT {_TOKEN_VALID} THEN FALSE")
SQL["session_owner"] = "SELECT owner FROM sessions WHERE id = %s"
SQL["session_deleted"] = "SELECT 1 FROM deleted_sessions WHERE id = %s"
SQL["session_remember_deleted"] = """INSERT INTO deleted_sessions (id, deleted_at) VALUES (%s, %s)
    ON CONFLICT (id) DO UPDATE SET deleted_at = excluded.deleted_at"""
_GUARDED: dict[str, str] = {
    "guard": "SELECT 1 WHERE {guard}",
    "session_insert": """INSERT INTO sessions (id, name, owner, status, agent, metadata,
        created_at, updated_at) SELECT %s, %s, %s, %s, %s, %s, %s::double precision,
        %s::double precision WHERE {guard}""",
    # the append's lock statement: the guard's row locks, then the advisory lock
    "timed_lock": """SELECT pg_advisory_xact_lock(%s)
        FROM (SELECT set_config('lock_timeout', %s, true),
            set_config('plan_cache_mode', 'force_generic_plan', true)) AS bound WHERE {guard}""",
    "record_put": """INSERT INTO records (scope, scope_id, key, value, expires_at)
        SELECT %s, %s, %s, %s, %s::double precision WHERE {guard}
        ON CONFLICT (scope, scope_id, key) DO UPDATE
        SET value = excluded.value, expires_at = excluded.expires_at""",
    "transcript_seq_next": """INSERT INTO transcript_seq (session_id, last_seq) SELECT %s, 1
        WHERE {guard} ON CONFLICT (session_id) DO UPDATE
        SET last_seq = transcript_seq.last_seq + 1 RETURNING last_seq""",
}
SQL.update(
    {
        f"{name}@{kind}": text.format(guard=condition)
        for name, text in _GUARDED.items()
        for kind, condition in GUARDS.items()
    }
)
if set(SQL) & set(checkpoint_tables.SQL):  # pragma: no cover - a naming mistake
    raise RuntimeError(f"statement names used twice: {set(SQL) & set(checkpoint_tables.SQL)}")
SQL.update(checkpoint_tables.SQL)
if set(SQL) & set(conversation_tables.SQL):  # pragma: no cover - a naming mistake
    raise RuntimeError(f"statement names used twice: {set(SQL) & set(conversation_tables.SQL)}")
SQL.update(conversation_tables.SQL)
if set(SQL) & set(adk_tables.SQL):  # pragma: no cover - a naming mistake
    raise RuntimeError(f"statement names used twice: {set(SQL) & set(adk_tables.SQL)}")
SQL.update(adk_tables.SQL)

# What the append's editor will ask, in one statement run right after the lock
# (its own statement: a statement's snapshot predates a lock it waits for):
# the header; for the call ids the incoming rows name (a text[]), whether each is
# declared and its first answer; and, for an append with a user turn, the open
# calls with the end of each declaring turn's result run (the editor's
# ``run_end``) and the position of the row after that end (``next_pos``, where
# healing inserts). One variant per shape (``append_facts@ids``, ``@open``,
# ``@ids+open`` or just the header): a part not needed is not in the statement,
# so the server neither plans nor starts it (docs/decisions/0028).
#
# The statements run with generic plans, planned once per connection, often on
# tables with no statistics yet (a new database). Each part is written so that
# every plan the server may pick stays O(1) in the buffer's length
# (docs/decisions/0033): a lookup per id is a subquery in the select list (a
# subplan on the (buffer_id, call_id) key, never turned into a join that scans
# the buffer's calls), and the open calls are scanned only when an EXISTS (a
# first-row index scan) finds one: a bitmap scan of the partial index visits every
# call the buffer ever had until VACUUM (an answered call's old row version stays
# in the index). No open call gives NULL, not '[]': no JSON to parse.
_FACT_IDS = """(SELECT json_agg(json_build_array(i.id,
        EXISTS (SELECT 1 FROM buffer_calls c WHERE c.buffer_id = b.id AND c.call_id = i.id),
        a.pos, a.healed,
        EXISTS (SELECT 1 FROM buffer_evicted v WHERE v.buffer_id = b.id AND v.call_id = i.id)))
    FROM unnest(%s::text[]) AS i(id) LEFT JOIN LATERAL (SELECT pos, healed FROM buffer_answers
        WHERE buffer_id = b.id AND call_id = i.id ORDER BY pos LIMIT 1) AS a ON TRUE)"""
_FACT_OPEN = """CASE WHEN EXISTS (SELECT 1 FROM buffer_calls x WHERE x.buffer_id = b.id
        AND NOT x.answered) THEN COALESCE((SELECT json_agg(json_build_array(e.call_id,
        e.declared_pos, e.run_end, (SELECT MIN(n.pos) FROM buffer_rows n
            WHERE n.buffer_id = b.id AND n.pos > e.run_end)) ORDER BY e.declared_pos, e.ord)
        FROM (SELECT o.call_id, o.declared_pos, o.ord, COALESCE((SELECT MAX(r.pos)
            FROM buffer_rows r WHERE r.buffer_id = b.id AND r.pos > o.declared_pos
            AND r.pos < COALESCE((SELECT MIN(t.pos) FROM buffer_rows t
            WHERE t.buffer_id = b.id AND t.pos > o.declared_pos AND t.role <> 'tool'),
            9223372036854775807)), o.declared_pos) AS run_end
        FROM buffer_calls o WHERE o.buffer_id = b.id AND NOT o.answered) AS e), '[]') END"""
for _ids, _open, _suffix in (
    (False, False, ""),
    (True, False, "@ids"),
    (False, True, "@open"),
    (True, True, "@ids+open"),
):
    SQL[f"append_facts{_suffix}"] = (
        "SELECT b.id, b.count, b.last_major, b.bytes, "
        + (_FACT_IDS if _ids else "NULL")
        + ", "
        + (_FACT_OPEN if _open else "NULL")
        + f" FROM buffers b WHERE {_ADDR}"
    )

# An append decided on known facts (flowmem.store.known, docs/decisions/0039), in
# one round trip. After the lock, ``append_known`` checks the facts the rules were
# given and records the verdict for the rest of the transaction: the header's id
# and version, and its count, last major and bytes (a flowmem from before migration
# 6, during a rolling upgrade, changes them without the version); each id assumed
# new neither declared nor answered (a subplan per id, as in the facts above). Each
# write's ``?`` variant runs only when the verdict is true; parameters keep their
# types in the SELECT forms by casts. Last, ``buffer_known`` reads what the next
# append may assume, under the lock and after the writes: the header and the ids of
# the unanswered calls, scanned only when an EXISTS finds one and no further than
# one past MAX_KNOWN_OPEN declarations (a buffer with more is not remembered).
_KNOWN = "current_setting('flowmem.known')::boolean"
SQL["append_known"] = """SELECT set_config('flowmem.known', (
    EXISTS (SELECT 1 FROM buffers WHERE id = %s AND version = %s
        AND count = %s AND last_major = %s AND bytes = %s)
    AND COALESCE((SELECT bool_and(
        NOT EXISTS (SELECT 1 FROM buffer_calls c WHERE c.buffer_id = %s AND c.call_id = i.id)
        AND NOT EXISTS (SELECT 1 FROM buffer_answers a WHERE a.buffer_id = %s AND a.call_id = i.id)
        AND NOT EXISTS (SELECT 1 FROM buffer_evicted v WHERE v.buffer_id = %s AND v.call_id = i.id))
    FROM unnest(%s::text[]) AS i(id)), TRUE))::text, true)"""
SQL["buffer_known"] = f"""SELECT b.id, b.version, b.count, b.last_major, b.bytes,
    CASE WHEN EXISTS (SELECT 1 FROM buffer_calls x WHERE x.buffer_id = b.id AND NOT x.answered)
    THEN (SELECT array_agg(o.call_id) FROM (SELECT call_id FROM buffer_calls
        WHERE buffer_id = b.id AND NOT answered LIMIT {MAX_KNOWN_OPEN + 1}) AS o) END
    FROM buffers b WHERE {_ADDR}"""
SQL["row_insert?"] = f"""INSERT INTO buffer_rows (buffer_id, pos, role, body)
    SELECT %s::bigint, %s::bigint, %s::text, %s::text WHERE {_KNOWN}"""
SQL["call_insert?"] = f"""INSERT INTO buffer_calls (buffer_id, call_id, declared_pos, ord, answered)
    SELECT %s::bigint, %s::text, %s::bigint, %s::integer,
        EXISTS (SELECT 1 FROM buffer_answers WHERE {_B} AND call_id = %s)
    WHERE {_KNOWN} ON CONFLICT DO NOTHING"""
SQL["answer_insert?"] = f"""INSERT INTO buffer_answers (buffer_id, call_id, pos, healed)
    SELECT %s::bigint, %s::text, %s::bigint, %s::boolean WHERE {_KNOWN}"""
SQL["calls_answered?"] = f"{SQL['calls_answered']} AND {_KNOWN}"
SQL["header_update?"] = f"{SQL['header_update']} AND {_KNOWN}"

_RETRYABLE = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)


@functools.lru_cache(maxsize=4096)  # a hash per append otherwise (≈ 1.5 % of its client CPU)
def advisory_key(address: Address) -> int:
    """Return the signed 64-bit advisory lock key of an address (MEM-12)."""
    digest = hashlib.blake2b("\x1f".join(address).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def parse_url(url: str) -> tuple[str, dict[str, float]]:
    """Split flowmem's own parameters off a URL (``pool_min``, ``pool_max``,
    ``connect_timeout_s``, ``known_buffers``: how many buffers' facts a store
    remembers for one-round-trip appends, 0 = off, decision 0039)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigurationError(f"not a postgresql URL: {url!r}")
    kept: list[tuple[str, str]] = []
    options: dict[str, float] = {
        "pool_min": 1,
        "pool_max": 10,
        "connect_timeout_s": 10.0,
        "known_buffers": DEFAULT_KNOWN_BUFFERS,
    }
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in POOL_PARAMS:
            try:
                options[name] = float(value)
            except ValueError as exc:
                raise ConfigurationError(f"{name} must be a number, got {value!r}") from exc
        else:
            kept.append((name, value))
    if options["pool_min"] < 0 or options["pool_max"] < max(1, options["pool_min"]):
        raise ConfigurationError("need 0 <= pool_min <= pool_max and pool_max >= 1")
    if options["known_buffers"] < 0 or options["known_buffers"] != int(options["known_buffers"]):
        raise ConfigurationError("known_buffers must be a whole number >= 0 (0: off)")
    # quote, not quote_plus: libpq reads "+" literally (options=-ca%3D1%20-cb%3D2 must keep its space)
    query = urlencode(kept, quote_via=quote)
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, query, parts.fragment))
    return conninfo, options


def connect_options(conninfo: str, timeout: float) -> dict[str, Any]:
    """libpq's ``connect_timeout`` from ``connect_timeout_s`` (whole seconds, at least 2), unless the URL sets it.

    Without it libpq waits for the operating system's TCP timeout (minutes) on a
    host that does not answer.
    """
    if "connect_timeout" in psycopg.conninfo.conninfo_to_dict(conninfo):
        return {}
    return {"connect_timeout": max(2, math.ceil(timeout))}


def probe_server(conninfo: str, connect: dict[str, Any], url: str) -> None:
    """Connect once before the pool opens: an unreachable server is one ``StoreUnavailableError`` at once.

    The pool would retry in the background, logging each failure, until its
    ``connect_timeout_s`` (10 s) ran out; a closed port or a wrong password is
    known from the first attempt.
    """
    try:
        conn = psycopg.connect(conninfo, autocommit=True, **connect)
    except psycopg.Error as exc:
        reason = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise StoreUnavailableError(
            f"cannot connect to PostgreSQL at {_safe(url)}: {reason}"
        ) from None
    conn.close()


class PostgresStore(SqlStore[psycopg.Connection[Any]]):
    """The ``Store`` protocol on a PostgreSQL database."""

    SQL = SQL
    MIGRATIONS = MIGRATIONS
    def __init__(self, url: str, *, create: bool = True) -> None:
        """Connect to ``url``; ``create=False``: a database without flowmem's schema is refused.

        (``DatabaseNotFoundError``, nothing created: the read-only CLI commands.)
        """
        self.url = url
        self.create = create
        conninfo, options = parse_url(url)
        connect = connect_options(conninfo, options["connect_timeout_s"])
        probe_server(conninfo, connect, url)  # one clean error, at once, when it cannot be reached
        self._pool = ConnectionPool(
            conninfo,
            min_size=int(options["pool_min"]),
            max_size=int(options["pool_max"]),
            kwargs={"autocommit": True, **connect},
            open=False,
            timeout=options["connect_timeout_s"],
            name="flowmem",
        )
        try:
            self._pool.open(wait=True, timeout=options["connect_timeout_s"])
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailableError(f"cannot connect to PostgreSQL at {_safe(url)}") from exc
        self._known = KnownBuffers(int(options["known_buffers"]))
        self.checkpoints = SqlCheckpoints(self)  # LangGraph's tables (docs/decisions/0040)
        self.conversations = SqlConversations(self)  # pydantic-ai's (docs/decisions/0051)
        self.adk = SqlAdkSessions(self)  # Google ADK's sessions and states (decision 0053)
        try:
            self._migrate()
        except BaseException:
            self._pool.close()
            raise

    # --- connections -------------------------------------------------------------------
    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend a pooled connection; translate driver errors to ``StoreError``.

        ``disk_full`` (53100) → ``StoreFullError``, ``read_only_sql_transaction``
        (25006) → ``StoreReadOnlyError``, ``data_corrupted``/``index_corrupted``
        (XX001/XX002) → ``StoreCorruptError``.
        """
        try:
            with self._pool.connection() as conn:
                if conn.__dict__.get(_QUOTAS) != self._quotas:
                    self._send_quotas(conn)
                yield conn
        except psycopg.errors.RaiseException as exc:
            refused = _quota_refused(exc)
            if refused is None:
                raise StoreError(f"PostgreSQL error: {exc}") from exc
            raise refused from None
        except PoolTimeout as exc:
            raise StoreUnavailableError(f"no PostgreSQL connection available: {exc}") from exc
        except psycopg.errors.DiskFull as exc:
            raise StoreFullError(f"PostgreSQL's disk is full: {exc}") from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise StoreReadOnlyError(f"PostgreSQL takes only reads: {exc}") from exc
        except (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted) as exc:
            raise StoreCorruptError(f"PostgreSQL reports damaged data: {exc}") from exc
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(f"PostgreSQL failed: {exc}") from exc
        except psycopg.DataError as exc:  # a value PostgreSQL cannot hold (NUL, out of range)
            raise InvalidInputError(f"a value cannot be stored: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error: {exc}") from exc

    def _send_quotas(self, conn: psycopg.Connection[Any]) -> None:
        """Give the connection this store's quotas (session settings the quota triggers read)."""
        quotas = self._quotas
        conn.execute(SQL["quotas_set"], (str(quotas.bytes), str(quotas.buffers), str(quotas.records)))
        conn.__dict__[_QUOTAS] = quotas

    def set_quotas(self, quotas: Quotas) -> None:
        """Enforce ``quotas`` on every later write through this store (each connection is told once)."""
        self._quotas = quotas

    def usage(self, user_id: str) -> Usage:
        """Return what the triggers counted for ``user_id``."""
        with self._connection() as conn:
            row = conn.execute(SQL["usage_get"], (user_id,)).fetchone()
        return Usage() if row is None else Usage(int(row[0]), int(row[1]), int(row[2]))

    def _write(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` in one transaction."""
        with self._connection() as conn, conn.transaction():
            return work(conn)

    def _write_serialized(
        self, address: Address, work: Callable[[psycopg.Connection[Any]], T], hold: bool = True
    ) -> T:
        """Run ``work`` in one transaction that first takes the address's advisory lock.

        ``hold=False``: ``work`` takes that lock itself.
        """

        def locked(conn: psycopg.Connection[Any]) -> T:
            self._hold_buffer(conn, address)
            return work(conn)

        return self._write(locked if hold else work)

    def _hold_buffer(self, conn: psycopg.Connection[Any], address: Address) -> None:
        """Take the address's advisory lock until the transaction ends (what appends take)."""
        conn.execute(SQL["advisory_lock"], (advisory_key(address),))

    @contextmanager
    def _reading(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend a connection inside one transaction, so several reads see one snapshot."""
        with self._connection() as conn, conn.transaction():
            yield conn

    def _stream_batches(
        self, conn: psycopg.Connection[Any], address: Address, batch: int
    ) -> Iterator[list[tuple[str]]]:
        """Yield bodies through a server-side cursor: the server sends ``batch`` rows at a time."""
        with conn.cursor(name="flowmem_iter_rows") as cursor:
            cursor.execute(SQL["load_all"], tuple(address))
            while chunk := cursor.fetchmany(batch):
                yield chunk

    def page_bodies(
        self,
        address: Address,
        *,
        after: int | None = None,
        before: int | None = None,
        last: int | None = None,
        version: tuple[int, int] | None = None,
        rows: int = PAGE_ROWS,
        chars: int = PAGE_CHARS,
    ) -> BodyPage:
        """One page of a paged read in one statement: one snapshot, one round trip.

        The server cuts the page at ``chars`` bytes (``octet_length``), so only the
        page crosses the network.
        """
        check_address(address)
        for value in (after, before, last):
            check_last(value)
        check_batch(rows)
        check_batch(chars)
        high = LAST_MAX if before is None else min(before, LAST_MAX)
        low = -1 if after is None else after
        limit = 0 if last == 0 else rows + 1
        page = (high, limit, rows, chars, *address)
        with self._connection() as conn:
            if last is None or last == 0:
                found = conn.execute(SQL["page_read"], (low, *page)).fetchall()
            else:
                params = (high, min(last, LAST_MAX), low, *page)
                found = conn.execute(SQL["page_read_last"], params).fetchall()
        head = (int(found[0][0]), int(found[0][1])) if found else None
        if version is not None and head != version:
            raise BufferChangedError(
                f"buffer {address.scope}/{address.scope_id}/{address.key} was written "
                "since the first page of this read: read it again"
            )
        if not found or head is None:
            return BodyPage(None, 0)
        bodies = [(int(r[4]), str(r[5])) for r in found if r[4] is not None]
        fetched = int(found[0][6] or 0)
        older = last is not None and last > 0 and found[0][3] is not None
        return BodyPage(head, int(found[0][2]), bodies, older, fetched > len(bodies))

    def _load_last(
        self, conn: psycopg.Connection[Any], address: Address, last: int
    ) -> list[tuple[str]]:
        """Return the last ``last`` bodies: the buffer id first, then an unprepared indexed read."""
        head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
        if head is None:
            return []
        found: list[tuple[str]] = conn.execute(
            SQL["load_last"], (head[0], last), prepare=False
        ).fetchall()
        return found

    def _bodies_last(
        self, conn: psycopg.Connection[Any], address: Address, before: int, last: int
    ) -> list[tuple[int, str]]:
        """Return the last ``last`` (pos, body) below ``before``: the buffer id first, unprepared."""
        head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
        if head is None:
            return []
        found: list[tuple[int, str]] = conn.execute(
            SQL["bodies_last_before"], (head[0], before, last), prepare=False
        ).fetchall()
        return found

    @staticmethod
    def _is_unique_violation(exc: BaseException | None) -> bool:
        """Return True for a duplicate primary or unique key."""
        return isinstance(exc, psycopg.errors.UniqueViolation)

    def _check_session_id(self, session_id: str) -> None:
        """Refuse a session id with a NUL character (PostgreSQL text cannot hold one)."""
        if "\x00" in session_id:
            raise InvalidInputError("session ids must not contain NUL characters")

    # --- schema ------------------------------------------------------------------------
    def _migrate(self) -> None:
        """Apply missing migrations in one transaction under an advisory lock; refuse a newer schema."""

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(SQL["advisory_lock"], (MIGRATION_LOCK,))
            self._upgrade(conn, f"the database at {_safe(self.url)}")

        self._write(work)

    # --- conversation buffers --------------------------------------------------------------
    def append(
        self,
        address: Address,
        rows: list[Message],
        max_messages: int = 0,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        snapshot: bool = False,
        guard: WriteGuard | None = None,
        max_bytes: int = 0,
        idempotency: Idempotency | None = None,
    ) -> AppendOutcome:
        """Run the core append rules on the stored buffer in one transaction.

        With ``snapshot`` the whole buffer is read back inside that transaction.
        With ``guard`` the statement taking the lock checks it first and locks its
        rows (no extra round trip); a failed guard raises its error, nothing appended.
        With ``idempotency`` its key is inserted after the writes, in the same
        pipeline before its commit (one statement, no round trip; one more when the
        answer holds the buffer): a key recorded already fails it, and nothing is
        appended (IdempotencyKeyInFlightError).

        Implements MEM-12: the transaction first takes ``pg_advisory_xact_lock`` on
        the address under ``lock_timeout`` (released at commit or rollback, so also
        when the append raises). Past the bound the append runs without the lock
        after exactly one WARNING, retrying if it collides with another writer.
        Different addresses take different locks and never wait for each other.
        """
        check_address(address)
        check_rows(rows)
        lock_timeout = check_lock_timeout(lock_timeout)
        timeout = f"{max(int(lock_timeout * 1000), 1)}ms"
        remember = guard is None and idempotency is None and self._known.size > 0
        with self._connection() as conn:
            try:
                for attempt in range(2):
                    try:
                        if remember and not snapshot:
                            known = self._known_append(
                                conn, address, rows, max_messages, max_bytes, timeout
                            )
                            if known is not None:
                                return known
                        return self._pipelined(
                            conn,
                            address,
                            rows,
                            max_messages,
                            snapshot,
                            max_bytes,
                            guard,
                            timeout,
                            idempotency,
                            remember,
                        )
                    except psycopg.errors.InvalidSqlStatementName:
                        # the server forgot the prepared statements (DISCARD ALL): the
                        # pipeline named them anew for the next attempt (_Prepared.forget)
                        if attempt:
                            raise
            except psycopg.errors.UniqueViolation as exc:  # idempotency (0031)
                if exc.diag.table_name == "idempotency_keys":
                    raise IdempotencyKeyInFlightError(
                        "this idempotency key is recorded already"
                    ) from None
                raise
            except psycopg.errors.LockNotAvailable:
                log.warning(
                    "append to %s/%s/%s waited %.1fs for its turn; proceeding unserialized",
                    *address,
                    lock_timeout,
                )
            for attempt in range(UNSERIALIZED_ATTEMPTS):
                try:
                    with conn.transaction():
                        self._check_guard(conn, guard)
                        outcome = self._apply_append(
                            conn, address, rows, max_messages, snapshot, max_bytes
                        )
                        self._record_key(conn, idempotency, outcome)
                        return outcome
                except _RETRYABLE as exc:
                    if attempt == UNSERIALIZED_ATTEMPTS - 1:
                        raise StoreBusyError(
                            f"unserialized append kept colliding with other writers: {exc}"
                        ) from exc
                    time.sleep(0.01 * (attempt + 1))
        raise StoreBusyError("unserialized append did not complete")  # pragma: no cover

    def _put_claimed(self, params: tuple[Any, ...], kind: str, guard: WriteGuard | None) -> None:
        """Store a record whose guard creates its session, in two round trips (a pipeline).

        BEGIN, the session insert and the guarded upsert in one; COMMIT (or ROLLBACK
        when the upsert wrote nothing: the guard's error) in the other.
        """
        ensure = ensure_form(guard)
        with self._connection() as conn:
            try:
                with conn.pipeline() as pipeline:
                    conn.execute(SQL["begin"])
                    if ensure is not None:
                        conn.execute(SQL[ensure[0]], ensure[1])
                    done = conn.execute(SQL[f"record_put@{kind}"], params)
                    pipeline.sync()
                    if done.rowcount == 0:
                        raise self._guard_error(conn, guard)
                    conn.execute(SQL["commit"])
            except BaseException:
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute(SQL["rollback"])
                raise

    def _pipelined(
        self,
        conn: psycopg.Connection[Any],
        address: Address,
        rows: list[Message],
        max_messages: int,
        snapshot: bool,
        max_bytes: int,
        guard: WriteGuard | None,
        timeout: str,
        idempotency: Idempotency | None = None,
        remember: bool = False,
    ) -> AppendOutcome:
        """The serialized append in two round trips (decisions 0024 and 0028).

        In libpq pipeline mode: the lock (with the guard) and the facts query go in
        one round trip; the rules run; the writes and a Sync go in another. The
        statements between two Syncs are one implicit transaction, committed at
        the Sync, with no ``BEGIN``/``COMMIT`` statements (the advisory lock is held
        until then). On any error the pipeline is ended with ``ROLLBACK`` and drained
        before the error propagates (LockNotAvailable included). With ``remember``
        the writes are followed by ``buffer_known``, for the next append (0039).
        """
        kind, checks = guard_form(guard)
        ensure = ensure_form(guard)
        lock = f"timed_lock@{kind}" if kind else "timed_lock"
        ids, want_open = _asked(rows)
        try:
            with _Pipeline(conn, SQL) as db:
                if ensure is not None:  # a claimed session (decision 0032), before the lock
                    db.send(*ensure)
                locked = db.send(lock, (advisory_key(address), timeout, *checks))
                shape = ("@ids" if ids else "@") + ("+open" if want_open else "")
                facts = db.send(
                    "append_facts" + {"@": "", "@+open": "@open"}.get(shape, shape),
                    (ids, *address) if ids else tuple(address),
                )
                found = db.result(facts)
                if not db.has_rows(locked):
                    raise _GuardFailed
                editor = _editor(db, address, found[0] if found else None, ids, want_open)
                outcome = apply_append(editor, rows, max_messages)
                check_buffer_bytes(address, editor.bytes_before, editor.bytes, max_bytes)
                editor.flush()
                whole = db.send("load_all", tuple(address)) if snapshot else None
                if idempotency is not None:  # the key and its answer, before the commit (0031)
                    if whole is not None:  # the answer holds the buffer: one more round trip
                        outcome = replace(outcome, rows=load_rows(db.result(whole)))
                        whole = None
                    status, body = idempotency.answer(outcome)
                    db.send(
                        "idem_insert",
                        (
                            idempotency.owner,
                            idempotency.key,
                            idempotency.fingerprint,
                            status,
                            body,
                            idempotency.expires_at,
                        ),
                    )
                after = db.send("buffer_known", tuple(address)) if remember else None
                db.finish()
                if after is not None:
                    self._known.remember(address, _known(db.result(after)))
                if whole is not None:
                    outcome = replace(outcome, rows=load_rows(db.result(whole)))
            return outcome
        except BaseException as exc:
            if conn.info.transaction_status != TransactionStatus.IDLE:
                conn.execute(SQL["rollback"])
            if isinstance(exc, _GuardFailed):
                raise self._guard_error(conn, guard) from None
            raise

    def _known_append(
        self,
        conn: psycopg.Connection[Any],
        address: Address,
        rows: list[Message],
        max_messages: int,
        max_bytes: int,
        timeout: str,
    ) -> AppendOutcome | None:
        """The append in one round trip, decided on what this store knows (decision 0039).

        The rules run first, on the buffer's facts as this store last saw them
        (``flowmem.store.known.foresee``); the lock, the check that those facts
        still hold, the writes (each running only if they do), what the next append
        may assume, and the Sync go in one send. None when nothing is known, when
        the rules would ask for more, or when a fact no longer held (then nothing
        was written): the caller appends as before. A fact that did not hold
        brought the current ones back, so this tries once more on those.
        """
        ids, heals = _asked(rows)
        for _ in range(2):
            known = self._known.get(address)
            if known is None:
                return None
            try:
                foreseen = foresee(known, address, rows, ids, heals, max_messages, max_bytes)
            except Unforeseen:
                return None
            try:
                with _Pipeline(conn, SQL) as db:
                    db.send("timed_lock", (advisory_key(address), timeout))
                    bid = known.buffer_id
                    head = (known.version, known.count, known.last_major, known.bytes)
                    held = db.send("append_known", (bid, *head, bid, bid, bid, foreseen.fresh))
                    for name, params in foreseen.writes:
                        db.run(f"{name}?", params)
                    after = db.send("buffer_known", tuple(address))
                    db.finish()
                    self._known.remember(address, _known(db.result(after)))
                    if db.result(held) == [("true",)]:
                        return foreseen.outcome
            except BaseException:
                self._known.remember(address, None)
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute(SQL["rollback"])
                raise
        return None

    # --- sessions ---------------------------------------------------------------------------
    def set_session_status(
        self, session_id: str, status: str, expected: frozenset[str] | None = None
    ) -> bool:
        """Set the status (compare-and-set when ``expected`` is given); True if changed."""
        allowed = None if expected is None else sorted(expected)
        with self._connection() as conn:
            cur = conn.execute(SQL["session_status_cas"], (status, session_id, allowed, allowed))
            return cur.rowcount > 0

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()


class _Pipeline:
    """The append's statements at the libpq level, in pipeline mode (docs/decisions/0028).

    psycopg's cursors cost 60–90 µs of client CPU per statement (a cursor, a
    query conversion and a socket wait each); here a statement is one libpq call
    queued without waiting (``run``), and the client waits once per round trip:
    when a question needs its answer (``one``/``all``: everything queued before
    it is sent along) and at the end (``finish``: a Sync). The statements are
    prepared under their own names once per connection. A ``SqlRunner`` for the
    editor.
    """

    def __init__(self, conn: psycopg.Connection[Any], sql: dict[str, str]) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.sql = sql
        self.prepared = _prepared_of(conn)
        if self.prepared.tx is None:
            self.prepared.tx = Transformer(conn)
        # one per connection: a Transformer caches the dumpers and loaders it has looked
        # up, and a new one per append looked them up again (≈ 25 µs; decision 0033)
        self.tx: AbcTransformer = self.prepared.tx
        self.sent = 0  # commands queued
        self.fetched: list[list[PGresult]] = []  # the results of the first len(fetched)
        self.checked = 0  # how many of them ``_raise_first`` found without an error
        self.preparing: dict[int, bytes] = {}  # ticket of a Parse -> its name, until answered
        self.wrote = False  # a statement that may write was sent
        self.held: list[str] = []  # writes not sent yet (see ``run``), their parameters
        self.held_params: list[Any] = []
        self.held_reads: set[str] = set()  # the tables they read and write
        self.held_writes: set[str] = set()

    def __enter__(self) -> _Pipeline:
        self.pgconn.enter_pipeline_mode()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            return
        # end the transaction unwritten (the held writes are dropped, what was sent
        # is rolled back), read what is in flight and leave pipeline mode
        try:
            if self.pgconn.pipeline_status != pq.PipelineStatus.OFF:
                if self.wrote:
                    # in the implicit transaction ROLLBACK aborts it (the server logs
                    # a WARNING that no transaction block is open); in an aborted one
                    # it is skipped. Before any write the Sync may commit: the lock and
                    # the reads change nothing (and log nothing).
                    self.pgconn.send_query_params(b"ROLLBACK", None)
                    self.sent += 1
                self.pgconn.pipeline_sync()
                self.fetched += self.conn.wait(_fetch(self.pgconn, self._pending(), sync=True))
                self.pgconn.exit_pipeline_mode()
                self._settle()
        except psycopg.Error:
            log.debug("leaving pipeline mode after an error failed", exc_info=True)

    def send(self, name: str, params: Sequence[Any]) -> int:
        """Queue the named statement (after the held writes); return its ticket (no waiting)."""
        self._release()
        return self._send(name, params)

    def _send(self, name: str, params: Sequence[Any]) -> int:
        found = self.prepared.statements.get(name)
        if found is None:
            found = self.prepared.statement(name, self.sql)
        key, text, writes = found
        if writes:
            self.wrote = True
        count = len(params)
        formats = _TEXT[:count] if count <= len(_TEXT) else [PyFormat.TEXT] * count
        values = self.tx.dump_sequence(params, formats) if count else None
        if key not in self.prepared.names and key not in self.preparing.values():
            self.pgconn.send_prepare(key, text)
            self.preparing[self.sent] = key
            self.sent += 1
        self.pgconn.send_query_prepared(key, values)
        self.sent += 1
        return self.sent - 1

    def result(self, ticket: int) -> list[tuple[Any, ...]]:
        """The rows of a queued statement: one round trip for it and all queued before."""
        return _rows(self.tx, self._answer(ticket))

    def has_rows(self, ticket: int) -> bool:
        """Whether a queued statement returned a row (not loading it)."""
        return self._answer(ticket).ntuples > 0

    def _answer(self, ticket: int) -> PGresult:
        if ticket >= len(self.fetched):
            self.pgconn.send_flush_request()
            self.fetched += self.conn.wait(_fetch(self.pgconn, self._pending()))
            self._settle()
            self._raise_first()
        return self.fetched[ticket][-1]

    def finish(self) -> None:
        """Send the rest with a Sync and wait for every answer; the first error raises."""
        self._release()
        self.pgconn.pipeline_sync()
        self.fetched += self.conn.wait(_fetch(self.pgconn, self._pending(), sync=True))
        self.pgconn.exit_pipeline_mode()
        self._settle()
        self._raise_first()

    def _pending(self) -> int:
        return self.sent - len(self.fetched)

    def _settle(self) -> None:
        """Record the statements whose Parse the server answered (a failed one is not kept)."""
        if not self.preparing:
            return
        for ticket in [t for t in self.preparing if t < len(self.fetched)]:
            key = self.preparing.pop(ticket)
            if self.fetched[ticket][-1].status == _COMMAND_OK:
                self.prepared.names.add(key)

    def _raise_first(self) -> None:
        """Raise the first error among the results not checked yet (as psycopg would)."""
        for results in self.fetched[self.checked :]:
            for res in results:
                status = res.status
                if status == _FATAL_ERROR:
                    error = psycopg.errors.error_from_result(res, encoding=self.pgconn._encoding)
                    if isinstance(error, psycopg.errors.InvalidSqlStatementName):
                        self.prepared.forget()
                        self.conn.__dict__.pop(_QUOTAS, None)  # DISCARD ALL reset them too
                    raise error
                if status == _PIPELINE_ABORTED:
                    raise psycopg.errors.PipelineAborted("pipeline aborted")
        self.checked = len(self.fetched)

    # --- SqlRunner ---------------------------------------------------------------------
    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run a named statement; return its first row."""
        found = self.result(self.send(name, params))
        return found[0] if found else None

    def all(self, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a named statement; return every row."""
        return self.result(self.send(name, params))

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Queue a named write (its error raises by ``finish``).

        Writes are held and sent as one statement (``WITH`` sub-statements, see
        ``WRITES``) while each touches no table an earlier held one writes and
        writes none an earlier one reads: then running them together, on one
        snapshot, is running them in order. Any other statement sends them first.
        """
        touched = WRITES.get(name)
        if touched is None:
            self.send(name, params)
            return
        reads, writes = touched
        if (reads | writes) & self.held_writes or writes & self.held_reads:
            self._release()
        self.held.append(name)
        self.held_params.extend(params)
        self.held_reads |= reads
        self.held_writes |= writes

    def _release(self) -> None:
        """Send the held writes, as one statement."""
        if self.held:
            self._send("+".join(self.held), self.held_params)
            self.held, self.held_params = [], []
            self.held_reads, self.held_writes = set(), set()


# The editor's writes the pipeline may send together (``_Pipeline.run``): the tables
# each reads and writes. ``call_insert`` reads ``buffer_calls`` too (its ON CONFLICT).
# Not here (always sent alone): the shifts and unflips of a healing insert.
_ROWS, _CALLS, _ANSWERS, _HEADER = "buffer_rows", "buffer_calls", "buffer_answers", "buffers"
WRITES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    name: (frozenset(reads), frozenset(writes))
    for name, reads, writes in (
        ("row_insert", (), (_ROWS,)),
        ("row_update", (_ROWS,), (_ROWS,)),
        ("row_delete", (_ROWS,), (_ROWS,)),
        ("call_insert", (_ANSWERS, _CALLS), (_CALLS,)),
        ("calls_delete", (_CALLS,), (_CALLS,)),
        ("answer_insert", (), (_ANSWERS,)),
        ("answer_delete", (_ANSWERS,), (_ANSWERS,)),
        ("calls_answered", (_CALLS,), (_CALLS,)),
        ("calls_reopen", (_CALLS, _ANSWERS), (_CALLS,)),
        ("header_update", (_HEADER,), (_HEADER,)),
    )
}
WRITES.update({f"{name}?": WRITES[name] for name in FORESEEABLE})


def _merged(name: str) -> str:
    """The statement running held writes ``a+b+c`` together: ``WITH`` for all but the last."""
    *first, last = name.split("+")
    if not first:
        return SQL[last]
    ctes = ", ".join(f"w{n} AS ({SQL[part]})" for n, part in enumerate(first))
    return f"WITH {ctes} {SQL[last]}"


class _Prepared:
    """The append's statements prepared on one connection (names carry a generation).

    Also the connection's ``Transformer`` for the append's parameters and rows.
    """

    def __init__(self) -> None:
        self.generation = 0
        self.names: set[bytes] = set()
        self.tx: AbcTransformer | None = None
        # statement -> (prepared name, numbered text, may write), this generation
        self.statements: dict[str, tuple[bytes, bytes, bool]] = {}

    def statement(self, name: str, sql: dict[str, str]) -> tuple[bytes, bytes, bool]:
        """A statement's prepared name, its text for libpq and whether it may write, cached.

        Every statement but the lock and the facts query may write (``header_insert``
        may: it is sent like a write).
        """
        text = _numbered(name, sql[name] if name in sql else _merged(name))
        writes = not name.startswith(("timed_lock", "append_facts", "append_known", "buffer_known"))
        found = self.statements[name] = (self.name(name), text, writes)
        return found

    def name(self, statement: str) -> bytes:
        """The prepared name of a statement in the current generation.

        A number per statement, not its name: the server keeps 63 bytes of a
        prepared statement's name, and merged names (``a+b+c``) grow past that.
        """
        number = _NUMBERS.get(statement)
        if number is None:  # next() on a count is atomic: two threads never share a number
            number = _NUMBERS.setdefault(statement, next(_COUNT))
        return f"flowmem{self.generation}_{number}".encode()

    def forget(self) -> None:
        """The server lost some (``DISCARD ALL``, ``DEALLOCATE``): prepare anew, under new names."""
        self.generation += 1
        self.names.clear()
        self.statements.clear()


_TEXT = [PyFormat.TEXT] * 64  # parameter formats (a slice of it per statement)
_COMMAND_OK, _FATAL_ERROR = pq.ExecStatus.COMMAND_OK, pq.ExecStatus.FATAL_ERROR
_PIPELINE_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_STATE = "_flowmem_prepared"  # the attribute of a connection holding its ``_Prepared``
_QUOTAS = "_flowmem_quotas"  # the attribute of a connection holding the quotas it was given


def _quota_refused(exc: psycopg.errors.RaiseException) -> QuotaExceededError | None:
    """The QuotaExceededError a quota trigger raised (``flowmem_quota_check``), or None."""
    if exc.diag.message_primary != "flowmem_quota":
        return None
    quota, _, limit = (exc.diag.message_detail or "").partition(" ")
    return QuotaExceededError.reached(quota, exc.diag.message_hint or "", int(limit or 0))


def _prepared_of(conn: psycopg.Connection[Any]) -> _Prepared:
    """The append's state of one connection, kept on the connection: it goes with it.

    Not a weak-keyed table: its ``Transformer`` refers to the connection, so an
    entry would keep its own key alive.
    """
    found: _Prepared | None = conn.__dict__.get(_STATE)
    if found is None:
        found = conn.__dict__.setdefault(_STATE, _Prepared())
    return found

_NUMBERED: dict[str, bytes] = {}
_NUMBERS: dict[str, int] = {}  # statement -> its number in prepared names (this process)
_COUNT = itertools.count()


def _numbered(name: str, text: str) -> bytes:
    """A statement's text with ``%s`` numbered ``$1, $2…`` (what libpq takes), cached."""
    found = _NUMBERED.get(name)
    if found is None:
        parts = text.split("%s")
        if any("%" in part for part in parts):
            raise StoreError(f"statement {name} has a % other than %s")
        numbered = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
        found = _NUMBERED[name] = numbered.encode()
    return found


def _fetch(pgconn: PGconn, count: int, sync: bool = False) -> PQGen[list[list[PGresult]]]:
    """Send what is queued, then read the results of ``count`` commands (and the Sync)."""
    yield from send(pgconn)
    out = []
    for _ in range(count):
        out.append((yield from fetch_many(pgconn)))
    if sync:  # the commit happens at the Sync: its error comes before the Sync's result
        late: list[PGresult] = []
        while True:
            done = yield from fetch_many(pgconn)
            if done and done[0].status == pq.ExecStatus.PIPELINE_SYNC:
                break
            late += done
        if late:
            out.append(late)
    return out


def _rows(tx: AbcTransformer, res: PGresult) -> list[tuple[Any, ...]]:
    """The rows of a statement's result, loaded like psycopg's cursors load them."""
    if res.status != pq.ExecStatus.TUPLES_OK or not res.ntuples:
        return []
    tx.set_pgresult(res)
    rows: list[tuple[Any, ...]] = tx.load_rows(0, res.ntuples, tuple)
    return rows


def _known(found: list[tuple[Any, ...]]) -> Known | None:
    """What ``buffer_known`` read (None: no buffer there, or more open calls than are kept)."""
    if not found:
        return None
    bid, version, count, last_major, size, open_ids = found[0]
    if open_ids is not None and len(open_ids) > MAX_KNOWN_OPEN:
        return None
    head = (int(bid), int(version), int(count), int(last_major), int(size))
    return Known(*head, frozenset(open_ids or ()))


class _GuardFailed(Exception):
    """The append's guard did not hold (its error is found after the rollback)."""


def _asked(rows: list[Message]) -> tuple[list[str], bool]:
    """The call ids the incoming rows name, and whether one is a user turn (it heals).

    What the append's one facts query fetches ahead; a question it did not foresee
    is asked by the editor as before, so this guesses cost, never results.
    """
    ids: dict[str, None] = {}
    want_open = False
    for row in rows:
        for cid in call_ids(row):
            ids[cid] = None
        rid = result_id(row)
        if rid is not None:
            ids[rid] = None
        want_open = want_open or row.get("role") == "user"
    return list(ids), want_open


def _editor(
    db: SqlRunner,
    address: Address,
    facts: tuple[Any, ...] | None,
    ids: list[str],
    want_open: bool = False,
) -> SqlBufferEditor:
    """The append's editor, seeded with the row of ``append_facts`` (None: no buffer yet).

    ``want_open``: the facts hold the open calls (NULL there is none open).
    """
    if facts is None:
        editor = SqlBufferEditor(db, address, None)
        editor.know(dict.fromkeys(ids, False), dict.fromkeys(ids), [], evicted=dict.fromkeys(ids, False))
        return editor
    editor = SqlBufferEditor(db, address, facts[:4])
    declared = dict.fromkeys(ids, False)
    answers: dict[str, Answer | None] = dict.fromkeys(ids)
    evicted = dict.fromkeys(ids, False)
    for cid, is_declared, pos, healed, was_evicted in facts[4] or ():
        declared[cid] = bool(is_declared)
        evicted[cid] = bool(was_evicted)
        if pos is not None:
            answers[cid] = Answer(int(pos), bool(healed))
    open_calls = None
    following: dict[int, int | None] = {}
    if want_open:
        found = facts[5] or ()
        open_calls = [(str(cid), int(pos), int(end)) for cid, pos, end, _ in found]
        following = {int(end): None if n is None else int(n) for _, _, end, n in found}
    editor.know(declared, answers, open_calls, following, evicted)
    return editor


def _safe(url: str) -> str:
    """Return ``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


if TYPE_CHECKING:

    def _conforms(store: PostgresStore) -> Store:
        """Let mypy prove that ``PostgresStore`` implements the ``Store`` protocol."""
        return store


__all__ = ["MIGRATIONS", "SQL", "PostgresStore", "advisory_key", "parse_url"]
