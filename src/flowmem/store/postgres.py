"""``PostgresStore``: PostgreSQL through psycopg 3 and a ``psycopg_pool`` pool.

For deployments with many processes or machines (``postgresql://user@host/db``).
Appends run ``flowmem.core.apply_append`` through ``SqlBufferEditor`` inside one
transaction that first takes a transaction-scoped advisory lock on the buffer's
address under ``lock_timeout`` (MEM-12).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from flowmem.core import AppendOutcome, Message, apply_append
from flowmem.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    SchemaTooNewError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
)
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    Address,
    SessionRecord,
    Store,
    TokenRecord,
    TranscriptMessage,
)
from flowmem.store.editor import SqlBufferEditor, load_rows
from flowmem.store.memory import to_json
from flowmem.store.rows import (
    check_address,
    check_last,
    check_lock_timeout,
    check_page,
    dump_json,
    session_from_row,
    token_from_row,
)

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
)

_B = "buffer_id = %s"
_ADDR = "scope = %s AND scope_id = %s AND key = %s"
SQL: dict[str, str] = {
    "header_get": f"SELECT id, count, last_major FROM buffers WHERE {_ADDR}",
    "header_insert": "INSERT INTO buffers (scope, scope_id, key) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
    "header_update": "UPDATE buffers SET count = %s, last_major = %s WHERE id = %s",
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
    # set_config runs in the FROM subquery (volatile: never pulled up), so before the lock
    "timed_lock": """SELECT pg_advisory_xact_lock(%s)
        FROM (SELECT set_config('lock_timeout', %s, true)) AS bound""",
    "advisory_lock": "SELECT pg_advisory_xact_lock(%s)",
    # the buffer id first (a scalar subquery), so the rows come from the (buffer_id, pos) index
    "load_all": f"""SELECT body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE {_ADDR}) ORDER BY pos""",
    # run unprepared with the buffer id known, so the planner sees how many rows this
    # buffer has and walks the primary key backwards instead of sorting the buffer
    "load_last": """SELECT body FROM (SELECT pos, body FROM buffer_rows WHERE buffer_id = %s
        ORDER BY pos DESC LIMIT %s) AS tail ORDER BY pos""",
    "count": f"SELECT count FROM buffers WHERE {_ADDR}",
    "clear_rows": f"DELETE FROM buffer_rows WHERE {_B}",
    "clear_calls": f"DELETE FROM buffer_calls WHERE {_B}",
    "clear_answers": f"DELETE FROM buffer_answers WHERE {_B}",
    "clear_header": "DELETE FROM buffers WHERE id = %s",
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
    "session_status_cas": """UPDATE sessions SET status = %s WHERE id = %s
        AND (%s::text[] IS NULL OR status = ANY(%s::text[]))""",
    "session_delete": "DELETE FROM sessions WHERE id = %s",
    "transcript_seq_next": """INSERT INTO transcript_seq (session_id, last_seq) VALUES (%s, 1)
        ON CONFLICT (session_id) DO UPDATE SET last_seq = transcript_seq.last_seq + 1
        RETURNING last_seq""",
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
}

_SEQ_MAX = 9223372036854775807
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
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return conninfo, options


class _Runner:
    """``SqlRunner`` over one psycopg connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run a named statement; return its first row."""
        row: tuple[Any, ...] | None = self.conn.execute(SQL[name], params).fetchone()
        return row

    def all(self, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a named statement; return every row."""
        return self.conn.execute(SQL[name], params).fetchall()

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Run a named statement for its effect."""
        self.conn.execute(SQL[name], params)


class PostgresStore:
    """The ``Store`` protocol on a PostgreSQL database."""

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
        """Lend a pooled connection; translate driver errors to ``StoreError``."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailableError(f"no PostgreSQL connection available: {exc}") from exc
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

    # --- schema ------------------------------------------------------------------------
    def _migrate(self) -> None:
        """Apply missing migrations in one transaction under an advisory lock; refuse a newer schema."""

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS flowmem_schema ("
                "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM flowmem_schema").fetchone()
            current = int(row[0]) if row else 0
            if current > len(MIGRATIONS):
                raise SchemaTooNewError(
                    f"the database at {_safe(self.url)} has schema version {current}, but this "
                    f"flowmem knows only up to {len(MIGRATIONS)}: upgrade flowmem to open it",
                    found=current,
                    supported=len(MIGRATIONS),
                )
            for version in range(current + 1, len(MIGRATIONS) + 1):
                for statement in MIGRATIONS[version - 1]:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO flowmem_schema (version, applied_at) VALUES (%s, %s)",
                    (version, time.time()),
                )

        self._write(work)

    def schema_version(self) -> int:
        """Return the schema version recorded in the database."""
        with self._connection() as conn:
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM flowmem_schema").fetchone()
            return int(row[0]) if row else 0

    # --- memory records ------------------------------------------------------------------
    def get_record(self, address: Address, now: float) -> tuple[bool, Any]:
        """Return (found, value); an expired record is not found."""
        check_address(address)
        with self._connection() as conn:
            row = conn.execute(SQL["record_get"], tuple(address)).fetchone()
        if row is None or (row[1] is not None and row[1] <= now):
            return False, None
        return True, json.loads(row[0])

    def put_record(self, address: Address, value: Any, expires_at: float | None) -> None:
        """Store a JSON value (NotSerializableError, nothing written, otherwise)."""
        check_address(address)
        text = to_json(value)
        with self._connection() as conn:
            conn.execute(SQL["record_put"], (*address, text, expires_at))

    def delete_record(self, address: Address) -> bool:
        """Delete a record; True when one existed."""
        check_address(address)
        with self._connection() as conn:
            return conn.execute(SQL["record_delete"], tuple(address)).rowcount > 0

    # --- conversation buffers --------------------------------------------------------------
    def append(
        self,
        address: Address,
        rows: list[Message],
        max_messages: int = 0,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        snapshot: bool = False,
    ) -> AppendOutcome:
        """Run the core append rules on the stored buffer in one transaction.

        With ``snapshot`` the whole buffer is read back inside that transaction.

        Implements MEM-12: the transaction first takes ``pg_advisory_xact_lock`` on
        the address under ``lock_timeout`` (released at commit or rollback, so also
        when the append raises). Past the bound the append runs without the lock
        after exactly one WARNING, retrying if it collides with another writer.
        Different addresses take different locks and never wait for each other.
        """
        check_address(address)
        lock_timeout = check_lock_timeout(lock_timeout)
        key = advisory_key(address)
        timeout = f"{max(int(lock_timeout * 1000), 1)}ms"
        with self._connection() as conn:
            try:
                with conn.transaction():
                    conn.execute(SQL["timed_lock"], (key, timeout))
                    return self._apply(conn, address, rows, max_messages, snapshot)
            except psycopg.errors.LockNotAvailable:
                log.warning(
                    "append to %s/%s/%s waited %.1fs for its turn; proceeding unserialized",
                    *address,
                    lock_timeout,
                )
            for attempt in range(UNSERIALIZED_ATTEMPTS):
                try:
                    with conn.transaction():
                        return self._apply(conn, address, rows, max_messages, snapshot)
                except _RETRYABLE as exc:
                    if attempt == UNSERIALIZED_ATTEMPTS - 1:
                        raise StoreBusyError(
                            f"unserialized append kept colliding with other writers: {exc}"
                        ) from exc
                    time.sleep(0.01 * (attempt + 1))
        raise StoreBusyError("unserialized append did not complete")  # pragma: no cover

    @staticmethod
    def _apply(
        conn: psycopg.Connection[Any],
        address: Address,
        rows: list[Message],
        max_messages: int,
        snapshot: bool,
    ) -> AppendOutcome:
        editor = SqlBufferEditor(_Runner(conn), address)
        outcome = apply_append(editor, rows, max_messages)
        editor.flush()
        if snapshot:
            found = conn.execute(SQL["load_all"], tuple(address)).fetchall()
            outcome = replace(outcome, rows=load_rows(found))
        return outcome

    def pop_last(self, address: Address) -> Message | None:
        """Remove and return the buffer's last row (None when empty), serialized like an append."""
        check_address(address)

        def work(conn: psycopg.Connection[Any]) -> Message | None:
            editor = SqlBufferEditor(_Runner(conn), address)
            last = editor.newest()
            if last is None:
                return None
            editor.delete(last.position)
            editor.flush()
            return last.row

        def locked(conn: psycopg.Connection[Any]) -> Message | None:
            conn.execute(SQL["advisory_lock"], (advisory_key(address),))
            return work(conn)

        return self._write(locked)

    def load(self, address: Address, last: int | None = None) -> list[Message]:
        """Return the buffer's rows in order; only the last ``last`` (indexed reads) when given."""
        check_address(address)
        check_last(last)
        if last == 0:
            return []
        with self._connection() as conn:
            if last is None:
                found = conn.execute(SQL["load_all"], tuple(address)).fetchall()
            else:
                head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
                if head is None:
                    return []
                params = (head[0], min(last, 2**62))
                found = conn.execute(SQL["load_last"], params, prepare=False).fetchall()
        return load_rows(found)

    def count(self, address: Address) -> int:
        """Return the number of rows (from the buffer header)."""
        check_address(address)
        with self._connection() as conn:
            row = conn.execute(SQL["count"], tuple(address)).fetchone()
        return int(row[0]) if row else 0

    def clear(self, address: Address) -> int:
        """Delete every row of the buffer under its advisory lock; return how many were removed."""
        check_address(address)

        def work(conn: psycopg.Connection[Any]) -> int:
            conn.execute(SQL["advisory_lock"], (advisory_key(address),))
            head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
            if head is None:
                return 0
            for name in ("clear_rows", "clear_calls", "clear_answers", "clear_header"):
                conn.execute(SQL[name], (head[0],))
            return int(head[1])

        return self._write(work)

    # --- sessions ---------------------------------------------------------------------------
    def create_session(self, session: SessionRecord) -> SessionRecord:
        """Insert a new session (ConflictError when the id exists)."""
        metadata = dump_json(dict(session.metadata), "session metadata")
        params = (
            session.id,
            session.name,
            session.owner,
            session.status,
            session.agent,
            metadata,
            session.created_at,
            session.updated_at,
        )
        try:
            with self._connection() as conn:
                conn.execute(SQL["session_insert"], params)
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise ConflictError(f"session {session.id} already exists") from exc
            raise
        return session

    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the session or None."""
        with self._connection() as conn:
            row = conn.execute(SQL["session_get"], (session_id,)).fetchone()
        return None if row is None else session_from_row(row)

    def list_sessions(
        self, owner: str | None, include_all: bool, limit: int, offset: int
    ) -> tuple[list[SessionRecord], int]:
        """Return a page of sessions (newest first) and the total under the same filter."""
        check_page(limit, offset)
        if not include_all and owner is None:
            return [], 0
        with self._connection() as conn, conn.transaction():
            if include_all:
                rows = conn.execute(SQL["sessions_all"], (limit, offset)).fetchall()
                total = conn.execute(SQL["sessions_all_count"]).fetchone()
            else:
                rows = conn.execute(SQL["sessions_owned"], (owner, limit, offset)).fetchall()
                total = conn.execute(SQL["sessions_owned_count"], (owner,)).fetchone()
        return [session_from_row(r) for r in rows], int(total[0]) if total else 0

    def set_session_status(
        self, session_id: str, status: str, expected: frozenset[str] | None = None
    ) -> bool:
        """Set the status (compare-and-set when ``expected`` is given); True if changed."""
        allowed = None if expected is None else sorted(expected)
        with self._connection() as conn:
            cur = conn.execute(SQL["session_status_cas"], (status, session_id, allowed, allowed))
            return cur.rowcount > 0

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript; True when it existed."""

        def work(conn: psycopg.Connection[Any]) -> bool:
            conn.execute(SQL["transcript_delete_all"], (session_id,))
            conn.execute(SQL["transcript_seq_delete"], (session_id,))
            return conn.execute(SQL["session_delete"], (session_id,)).rowcount > 0

        return self._write(work)

    # --- transcripts -------------------------------------------------------------------------
    def add_transcript(self, session_id: str, row: Message) -> TranscriptMessage:
        """Append a row with the next sequence number (never reused)."""
        body = dump_json(row, "transcript row")
        if "\x00" in session_id:
            raise InvalidInputError("session ids must not contain NUL characters")

        def work(conn: psycopg.Connection[Any]) -> int:
            found = conn.execute(SQL["transcript_seq_next"], (session_id,)).fetchone()
            seq = int(found[0]) if found else 0
            conn.execute(SQL["transcript_insert"], (session_id, seq, body))
            return seq

        seq = self._write(work)
        return TranscriptMessage(session_id, seq, json.loads(body))

    def list_transcript(
        self,
        session_id: str,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> tuple[list[TranscriptMessage], bool]:
        """Return a page of transcript rows by sequence cursor and whether more exist."""
        check_page(limit)
        low = -1 if since is None else since
        high = _SEQ_MAX if before is None else before
        name = "transcript_page_desc" if newest_first else "transcript_page_asc"
        with self._connection() as conn:
            rows = conn.execute(SQL[name], (session_id, low, high, limit + 1)).fetchall()
        items = [TranscriptMessage(session_id, int(s), json.loads(b)) for s, b in rows[:limit]]
        return items, len(rows) > limit

    def edit_transcript(self, session_id: str, seq: int, row: Message) -> bool:
        """Replace one transcript row (administrative tier); True if it existed."""
        body = dump_json(row, "transcript row")
        with self._connection() as conn:
            return conn.execute(SQL["transcript_update"], (body, session_id, seq)).rowcount > 0

    def delete_transcript(self, session_id: str, seq: int) -> bool:
        """Delete one transcript row (administrative tier); True if it existed."""
        with self._connection() as conn:
            return conn.execute(SQL["transcript_delete"], (session_id, seq)).rowcount > 0

    # --- tokens ------------------------------------------------------------------------------
    def create_token(self, token: TokenRecord) -> None:
        """Store a token record (its hash only); ConflictError on a duplicate id or hash."""
        params = (
            token.id,
            token.token_hash,
            token.user_id,
            json.dumps(sorted(token.permissions)),
            token.created_at,
            token.revoked,
            token.label,
        )
        try:
            with self._connection() as conn:
                conn.execute(SQL["token_insert"], params)
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise ConflictError(f"token {token.id} already exists") from exc
            raise

    def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        """Return the token with this hash, revoked or not."""
        with self._connection() as conn:
            row = conn.execute(SQL["token_by_hash"], (token_hash,)).fetchone()
        return None if row is None else token_from_row(row)

    def list_tokens(self) -> list[TokenRecord]:
        """Return every token record, oldest first."""
        with self._connection() as conn:
            rows = conn.execute(SQL["tokens_all"]).fetchall()
        return [token_from_row(r) for r in rows]

    def revoke_token(self, token_id: str) -> bool:
        """Mark a token revoked; True when it existed."""
        with self._connection() as conn:
            return conn.execute(SQL["token_revoke"], (token_id,)).rowcount > 0

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()


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
