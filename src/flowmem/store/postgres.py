"""``PostgresStore``: PostgreSQL through psycopg 3 and a ``psycopg_pool`` pool.

For deployments with many processes or machines (``postgresql://user@host/db``).
Appends run ``flowmem.core.apply_append`` through ``SqlBufferEditor`` inside one
transaction that first takes a transaction-scoped advisory lock on the buffer's
address under ``lock_timeout`` (MEM-12).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from flowmem.core import Answer, AppendOutcome, Message, call_ids, result_id
from flowmem.errors import (
    ConfigurationError,
    IdempotencyKeyInFlightError,
    InvalidInputError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from flowmem.store.base import DEFAULT_LOCK_TIMEOUT, Address, Idempotency, Store, WriteGuard
from flowmem.store.editor import SqlBufferEditor
from flowmem.store.rows import check_address, check_lock_timeout, check_rows, guard_form
from flowmem.store.sqlbase import SqlStore, StatementRunner

log = logging.getLogger("flowmem")

T = TypeVar("T")

UNSERIALIZED_ATTEMPTS = 20  # retries of an unserialized append that collided with another
MIGRATION_LOCK = 0x666C6F776D656D  # advisory key serializing schema migrations ("flowmem")
POOL_PARAMS = ("pool_min", "pool_max", "connect_timeout_s")

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
    (  # 4: idempotency keys with the answer to repeat (docs/decisions/0031)
        """CREATE TABLE idempotency_keys (
            owner TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
            status INTEGER NOT NULL, body TEXT NOT NULL, expires_at DOUBLE PRECISION,
            PRIMARY KEY (owner, key))""",
        """CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)
            WHERE expires_at IS NOT NULL""",
    ),
)

_B = "buffer_id = %s"
_ADDR = "scope = %s AND scope_id = %s AND key = %s"
SQL: dict[str, str] = {
    "header_get": f"SELECT id, count, last_major, bytes FROM buffers WHERE {_ADDR}",
    "header_insert": "INSERT INTO buffers (scope, scope_id, key) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
    "header_update": "UPDATE buffers SET count = %s, last_major = %s, bytes = %s WHERE id = %s",
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
    # What the append's editor will ask, in one statement run right after the lock
    # (its own statement: a statement's snapshot predates a lock it waits for):
    # the header; for the call ids the incoming rows name (a text[]), which are
    # declared and their first answer; and, when asked, the open calls with the end
    # of each declaring turn's result run (the editor's ``run_end``) and the position
    # of the row after that end (``next_pos``, where healing inserts).
    "append_facts": f"""SELECT b.id, b.count, b.last_major, b.bytes,
        ARRAY(SELECT DISTINCT c.call_id FROM buffer_calls c
            WHERE c.buffer_id = b.id AND c.call_id = ANY(%s::text[])),
        (SELECT json_agg(json_build_array(a.call_id, a.pos, a.healed)) FROM
            (SELECT DISTINCT ON (call_id) call_id, pos, healed FROM buffer_answers
             WHERE buffer_id = b.id AND call_id = ANY(%s::text[]) ORDER BY call_id, pos) AS a),
        CASE WHEN %s THEN COALESCE((SELECT json_agg(json_build_array(e.call_id,
            e.declared_pos, e.run_end, (SELECT MIN(n.pos) FROM buffer_rows n
                WHERE n.buffer_id = b.id AND n.pos > e.run_end)) ORDER BY e.declared_pos, e.ord)
            FROM (SELECT o.call_id, o.declared_pos, o.ord, COALESCE((SELECT MAX(r.pos)
                FROM buffer_rows r WHERE r.buffer_id = b.id AND r.pos > o.declared_pos
                AND r.pos < COALESCE((SELECT MIN(t.pos) FROM buffer_rows t
                WHERE t.buffer_id = b.id AND t.pos > o.declared_pos AND t.role <> 'tool'),
                9223372036854775807)), o.declared_pos) AS run_end
            FROM buffer_calls o WHERE o.buffer_id = b.id AND NOT o.answered) AS e), '[]') END
        FROM buffers b WHERE {_ADDR}""",
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
    "clear_rows": f"DELETE FROM buffer_rows WHERE {_B}",
    "clear_calls": f"DELETE FROM buffer_calls WHERE {_B}",
    "clear_answers": f"DELETE FROM buffer_answers WHERE {_B}",
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
}
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

_RETRYABLE = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)


def advisory_key(address: Address) -> int:
    """Return the signed 64-bit advisory lock key of an address (MEM-12)."""
    digest = hashlib.blake2b("\x1f".join(address).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def parse_url(url: str) -> tuple[str, dict[str, float]]:
    """Split flowmem's pool parameters (``pool_min``, ``pool_max``, ``connect_timeout_s``) off a URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigurationError(f"not a postgresql URL: {url!r}")
    kept: list[tuple[str, str]] = []
    options: dict[str, float] = {"pool_min": 1, "pool_max": 10, "connect_timeout_s": 10.0}
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
    # quote, not quote_plus: libpq reads "+" literally (options=-ca%3D1%20-cb%3D2 must keep its space)
    query = urlencode(kept, quote_via=quote)
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, query, parts.fragment))
    return conninfo, options


class PostgresStore(SqlStore[psycopg.Connection[Any]]):
    """The ``Store`` protocol on a PostgreSQL database."""

    SQL = SQL
    MIGRATIONS = MIGRATIONS
    inline_calls = False  # every call is network round trips: worker threads wait for them

    def sync_barrier(self) -> int | None:
        """Every commit is durable when it returns (the server's own WAL flush)."""
        return None

    def sync(self) -> int:
        """Nothing to sync: the server flushed at commit."""
        return 0

    def __init__(self, url: str) -> None:
        self.url = url
        conninfo, options = parse_url(url)
        self._pool = ConnectionPool(
            conninfo,
            min_size=int(options["pool_min"]),
            max_size=int(options["pool_max"]),
            kwargs={"autocommit": True},
            open=False,
            timeout=options["connect_timeout_s"],
            name="flowmem",
        )
        try:
            self._pool.open(wait=True, timeout=options["connect_timeout_s"])
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailableError(f"cannot connect to PostgreSQL at {_safe(url)}") from exc
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
                yield conn
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
        pipeline before COMMIT (one statement, no round trip): a key recorded
        already fails it, and nothing is appended (IdempotencyKeyInFlightError).

        Implements MEM-12: the transaction first takes ``pg_advisory_xact_lock`` on
        the address under ``lock_timeout`` (released at commit or rollback, so also
        when the append raises). Past the bound the append runs without the lock
        after exactly one WARNING, retrying if it collides with another writer.
        Different addresses take different locks and never wait for each other.
        """
        check_address(address)
        check_rows(rows)
        lock_timeout = check_lock_timeout(lock_timeout)
        key = advisory_key(address)
        timeout = f"{max(int(lock_timeout * 1000), 1)}ms"
        kind, checks = guard_form(guard)
        lock = SQL[f"timed_lock@{kind}" if kind else "timed_lock"]
        ids, want_open = _asked(rows)
        with self._connection() as conn:
            try:
                # pipeline mode: BEGIN, the lock and the facts go in one round trip,
                # the writes and COMMIT in another (docs/decisions/0024). BEGIN and
                # COMMIT are ours: conn.transaction() would add a Sync (a round trip).
                try:
                    with conn.pipeline():
                        conn.execute(SQL["begin"])
                        locked = conn.execute(lock, (key, timeout, *checks))
                        facts = conn.execute(SQL["append_facts"], (ids, ids, want_open, *address))
                        if locked.fetchone() is None:
                            raise self._guard_error(conn, guard)
                        editor = _editor(self._runner(conn), address, facts.fetchone(), ids)
                        outcome = self._run_append(
                            conn, editor, rows, max_messages, snapshot, max_bytes
                        )
                        self._record_key(conn, idempotency, outcome)  # idempotency (0031)
                        conn.execute(SQL["commit"])
                    return outcome
                except BaseException:
                    if conn.info.transaction_status != TransactionStatus.IDLE:
                        conn.execute(SQL["rollback"])
                    raise
            except psycopg.errors.UniqueViolation as exc:  # idempotency (0031)
                if exc.diag.table_name == "idempotency_keys":
                    raise IdempotencyKeyInFlightError("this idempotency key is recorded already") from None
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
    db: StatementRunner, address: Address, facts: tuple[Any, ...] | None, ids: list[str]
) -> SqlBufferEditor:
    """The append's editor, seeded with the row of ``append_facts`` (None: no buffer yet)."""
    if facts is None:
        editor = SqlBufferEditor(db, address, None)
        editor.know(dict.fromkeys(ids, False), dict.fromkeys(ids), [])
        return editor
    editor = SqlBufferEditor(db, address, facts[:4])
    declared = set(facts[4])
    answers: dict[str, Answer | None] = dict.fromkeys(ids)
    for cid, pos, healed in facts[5] or ():
        answers[cid] = Answer(int(pos), bool(healed))
    open_calls = None
    following: dict[int, int | None] = {}
    if facts[6] is not None:
        open_calls = [(str(cid), int(pos), int(end)) for cid, pos, end, _ in facts[6]]
        following = {int(end): None if n is None else int(n) for _, _, end, n in facts[6]}
    editor.know({cid: cid in declared for cid in ids}, answers, open_calls, following)
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
