"""The SQLite schema: ``MIGRATIONS``, applied in order and recorded in ``flowmem_schema``.

Append-only: a released migration is never edited; a change is a new one. The
store's own tables are numbered here (``_OWN``); each kind of data numbers its own
in its ``sqlite.py``, and ``flowmem.store.migrations.collect`` joins them in order.
"""

from __future__ import annotations

from flowmem.store import quotasql
from flowmem.store.migrations import collect
from flowmem.store.sqlite import reserved

# an owner's bytes since migration 23: what ``user_usage`` counts (records, vectors, repair
# logs) and the rows of their buffers, summed from the headers (``usage_get`` too)
_BYTES_USED = quotasql.bytes_used("b.bytes")
# the same, summed only when a bytes quota is set (else NULL: flowmem_over_quota says no)
_BYTES_CHECKED = quotasql.bytes_used("b.bytes", when_set=True)
_REPAIRS_OWNER = "(SELECT owner FROM buffers WHERE id = NEW.buffer_id)"

# Append-only: never edit a released migration, add a new one.
_OWN: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE records (
            scope TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL,
            value TEXT NOT NULL, expires_at REAL,
            PRIMARY KEY (scope, scope_id, key)) WITHOUT ROWID""",
        """CREATE TABLE buffers (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL,
            count INTEGER NOT NULL DEFAULT 0, last_major INTEGER NOT NULL DEFAULT 0,
            UNIQUE (scope, scope_id, key))""",
        """CREATE TABLE buffer_rows (
            buffer_id INTEGER NOT NULL, pos INTEGER NOT NULL,
            role TEXT NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (buffer_id, pos)) WITHOUT ROWID""",
        "CREATE INDEX buffer_rows_turns ON buffer_rows (buffer_id, pos) WHERE role <> 'tool'",
        """CREATE TABLE buffer_calls (
            buffer_id INTEGER NOT NULL, call_id TEXT NOT NULL,
            declared_pos INTEGER NOT NULL, ord INTEGER NOT NULL, answered INTEGER NOT NULL,
            PRIMARY KEY (buffer_id, call_id, declared_pos)) WITHOUT ROWID""",
        "CREATE INDEX buffer_calls_pos ON buffer_calls (buffer_id, declared_pos)",
        """CREATE INDEX buffer_calls_open ON buffer_calls (buffer_id, declared_pos, ord)
            WHERE answered = 0""",
        """CREATE TABLE buffer_answers (
            buffer_id INTEGER NOT NULL, call_id TEXT NOT NULL, pos INTEGER NOT NULL,
            healed INTEGER NOT NULL,
            PRIMARY KEY (buffer_id, call_id, pos)) WITHOUT ROWID""",
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, owner TEXT, status TEXT NOT NULL,
            agent TEXT, metadata TEXT NOT NULL, created_at REAL NOT NULL,
            updated_at REAL NOT NULL) WITHOUT ROWID""",
        "CREATE INDEX sessions_owner ON sessions (owner, created_at, id)",
        "CREATE INDEX sessions_created ON sessions (created_at, id)",
        """CREATE TABLE transcript_seq (
            session_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL) WITHOUT ROWID""",
        """CREATE TABLE transcripts (
            session_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)) WITHOUT ROWID""",
        """CREATE TABLE tokens (
            id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, user_id TEXT,
            permissions TEXT NOT NULL, created_at REAL NOT NULL,
            revoked INTEGER NOT NULL DEFAULT 0, label TEXT NOT NULL DEFAULT '')""",
    ),
    2: (  # expired records are found by expiry (purge_expired)
        "CREATE INDEX records_expiry ON records (expires_at) WHERE expires_at IS NOT NULL",
    ),
    3: (  # the buffer header keeps the UTF-8 size of its rows (the buffer_bytes limit)
        "ALTER TABLE buffers ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
        """UPDATE buffers SET bytes = (SELECT COALESCE(SUM(length(CAST(body AS BLOB))), 0)
            FROM buffer_rows WHERE buffer_rows.buffer_id = buffers.id)""",
    ),
    4: (  # session-scope data written without a session record gets one, owned by nobody
        """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at, updated_at)
            SELECT scope_id, '', NULL, 'idle', NULL, '{}',
                (julianday('now') - 2440587.5) * 86400.0, (julianday('now') - 2440587.5) * 86400.0
            FROM (SELECT scope_id FROM buffers WHERE scope = 'session'
                UNION SELECT scope_id FROM records WHERE scope = 'session')
            WHERE scope_id NOT IN (SELECT id FROM sessions)""",
    ),
    5: (  # idempotency keys with the answer to repeat (docs/decisions/0031)
        """CREATE TABLE idempotency_keys (
            owner TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
            status INTEGER NOT NULL, body TEXT NOT NULL, expires_at REAL,
            PRIMARY KEY (owner, key)) WITHOUT ROWID""",
        """CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)
            WHERE expires_at IS NOT NULL""",
    ),
    6: (  # every header write increments the version (as on PostgreSQL, decision 0039)
        "ALTER TABLE buffers ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
    ),
    8: (  # a deleted session's id is remembered: no write brings it back (issue 24 §2)
        "CREATE TABLE deleted_sessions (id TEXT PRIMARY KEY, deleted_at REAL NOT NULL)",
    ),
    11: (  # the call ids of turns a window evicted, the latest remembered (issue 24 §2)
        """CREATE TABLE buffer_evicted (
            buffer_id INTEGER NOT NULL, call_id TEXT NOT NULL, seq INTEGER NOT NULL,
            PRIMARY KEY (buffer_id, call_id)) WITHOUT ROWID""",
        "CREATE INDEX buffer_evicted_seq ON buffer_evicted (buffer_id, seq)",
    ),
    # 12: per-user quotas, counted in the write's own transaction (docs/decisions/0044):
    # whose quota each buffer and record counts against, what each user has, and the
    # triggers that keep the count (flowmem_over_quota is the store's own function)
    12: (
        "ALTER TABLE buffers ADD COLUMN owner TEXT",
        "ALTER TABLE records ADD COLUMN owner TEXT",
        # a number no other buffer ever had (a rowid is reused after the largest is deleted):
        # what a paged read compares, with the version, to see that its buffer is the same one
        "ALTER TABLE buffers ADD COLUMN born INTEGER NOT NULL DEFAULT 0",
        "UPDATE buffers SET born = id",
        "CREATE TABLE buffer_births (n INTEGER NOT NULL)",
        "INSERT INTO buffer_births (n) SELECT COALESCE(MAX(id), 0) FROM buffers",
        f"UPDATE buffers SET owner = {quotasql.OWNER_OF.format(t='buffers')}",
        f"UPDATE records SET owner = {quotasql.OWNER_OF.format(t='records')}",
        """CREATE TABLE user_usage (
            user_id TEXT PRIMARY KEY, bytes INTEGER NOT NULL DEFAULT 0,
            buffers INTEGER NOT NULL DEFAULT 0, records INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID""",
        """INSERT INTO user_usage (user_id, bytes, buffers, records)
            SELECT owner, SUM(b), SUM(n), SUM(r) FROM (
                SELECT owner, bytes AS b, 1 AS n, 0 AS r FROM buffers WHERE owner IS NOT NULL
                UNION ALL SELECT owner, length(CAST(value AS BLOB)), 0, 1 FROM records
                    WHERE owner IS NOT NULL) AS owned GROUP BY owner""",
        f"""CREATE TRIGGER usage_buffer_insert AFTER INSERT ON buffers BEGIN
            UPDATE buffer_births SET n = n + 1;
            UPDATE buffers SET owner = {quotasql.OWNER_OF.format(t='NEW')},
                born = (SELECT n FROM buffer_births) WHERE id = NEW.id;
            INSERT INTO user_usage (user_id, bytes, buffers, records)
                SELECT owner, bytes, 1, 0 FROM buffers WHERE id = NEW.id AND owner IS NOT NULL
                ON CONFLICT (user_id) DO UPDATE SET bytes = bytes + excluded.bytes, buffers = buffers + 1;
            SELECT RAISE(ABORT, 'flowmem_quota') FROM buffers JOIN user_usage ON user_id = owner
                WHERE id = NEW.id AND flowmem_over_quota('buffers', user_id, user_usage.buffers);
        END""",
        """CREATE TRIGGER usage_buffer_bytes AFTER UPDATE OF bytes ON buffers
            WHEN NEW.owner IS NOT NULL AND NEW.bytes <> OLD.bytes BEGIN
            UPDATE user_usage SET bytes = bytes + NEW.bytes - OLD.bytes WHERE user_id = NEW.owner;
            SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage WHERE user_id = NEW.owner
                AND NEW.bytes > OLD.bytes AND flowmem_over_quota('bytes', user_id, bytes);
        END""",
        """CREATE TRIGGER usage_buffer_delete AFTER DELETE ON buffers WHEN OLD.owner IS NOT NULL BEGIN
            UPDATE user_usage SET bytes = bytes - OLD.bytes, buffers = buffers - 1
                WHERE user_id = OLD.owner;
        END""",
        quotasql.record_insert(None, end=8),
        """CREATE TRIGGER usage_record_value AFTER UPDATE OF value ON records
            WHEN NEW.owner IS NOT NULL BEGIN
            UPDATE user_usage SET bytes = bytes + length(CAST(NEW.value AS BLOB))
                - length(CAST(OLD.value AS BLOB)) WHERE user_id = NEW.owner;
            SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage WHERE user_id = NEW.owner
                AND length(CAST(NEW.value AS BLOB)) > length(CAST(OLD.value AS BLOB))
                AND flowmem_over_quota('bytes', user_id, bytes);
        END""",
        """CREATE TRIGGER usage_record_delete AFTER DELETE ON records WHEN OLD.owner IS NOT NULL BEGIN
            UPDATE user_usage SET bytes = bytes - length(CAST(OLD.value AS BLOB)),
                records = records - 1 WHERE user_id = OLD.owner;
        END""",
    ),
    13: (  # each row's tokens by the default counter and the buffer's total (issue 28 §1):
        # NULL for a row or buffer stored before, counted when read; system rows found by index
        "ALTER TABLE buffer_rows ADD COLUMN tokens INTEGER",
        "ALTER TABLE buffers ADD COLUMN tokens INTEGER DEFAULT 0",
        "UPDATE buffers SET tokens = NULL WHERE count > 0",
        "CREATE INDEX buffer_rows_systems ON buffer_rows (buffer_id, pos) WHERE role = 'system'",
    ),
    # 15 (issue 26 §3, decision 0094): a result run's end is found on the primary key, as
    # on PostgreSQL (decision 0068); every user and assistant row wrote this index too
    15: ("DROP INDEX IF EXISTS buffer_rows_turns",),
    # 23 (issue 42 §1, decision 0137): an append writes its row, its header and, for a call
    # or a result, the one entry that finds it by id (MEM-1). No usage row per append:
    # ``user_usage.bytes`` no longer holds the buffers' rows; an owner's bytes are it plus
    # the sum over their buffers' headers (``buffers_owner``), summed by a quota trigger
    # only where a bytes quota is set (``flowmem_quota_set``)
    23: (
        "CREATE INDEX buffers_owner ON buffers (owner) WHERE owner IS NOT NULL",
        """UPDATE user_usage SET bytes = bytes - (SELECT COALESCE(SUM(b.bytes), 0)
            FROM buffers AS b WHERE b.owner = user_usage.user_id)""",
        "DROP TRIGGER usage_buffer_insert",
        f"""CREATE TRIGGER usage_buffer_insert AFTER INSERT ON buffers BEGIN
            UPDATE buffer_births SET n = n + 1;
            UPDATE buffers SET owner = {quotasql.OWNER_OF.format(t='NEW')},
                born = (SELECT n FROM buffer_births) WHERE id = NEW.id;
            INSERT INTO user_usage (user_id, bytes, buffers, records)
                SELECT owner, 0, 1, 0 FROM buffers WHERE id = NEW.id AND owner IS NOT NULL
                ON CONFLICT (user_id) DO UPDATE SET buffers = buffers + 1;
            SELECT RAISE(ABORT, 'flowmem_quota') FROM buffers JOIN user_usage ON user_id = owner
                WHERE id = NEW.id AND flowmem_over_quota('buffers', user_id, user_usage.buffers);
        END""",
        "DROP TRIGGER usage_buffer_bytes",
        f"""CREATE TRIGGER usage_buffer_bytes AFTER UPDATE OF bytes ON buffers
            WHEN NEW.owner IS NOT NULL AND NEW.bytes > OLD.bytes AND flowmem_quota_set('bytes') BEGIN
            SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage AS u WHERE u.user_id = NEW.owner
                AND flowmem_over_quota('bytes', u.user_id, {_BYTES_USED});
        END""",
        "DROP TRIGGER usage_buffer_delete",
        """CREATE TRIGGER usage_buffer_delete AFTER DELETE ON buffers WHEN OLD.owner IS NOT NULL BEGIN
            UPDATE user_usage SET buffers = buffers - 1 WHERE user_id = OLD.owner;
        END""",
        "DROP TRIGGER usage_record_insert",
        quotasql.record_insert(_BYTES_CHECKED, end=8),
        "DROP TRIGGER usage_record_value",
        quotasql.record_value(_BYTES_CHECKED, end=8),
        # the kinds' triggers that check the bytes quota (repairs: 17, vectors: 18) check
        # the same total; they count their own bytes in user_usage as before
        "DROP TRIGGER usage_repairs_insert",
        f"""CREATE TRIGGER usage_repairs_insert AFTER INSERT ON buffer_repairs BEGIN
            UPDATE user_usage SET bytes = bytes + length(CAST(NEW.entry AS BLOB))
                WHERE user_id = {_REPAIRS_OWNER};
            SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage AS u WHERE u.user_id = {_REPAIRS_OWNER}
                AND flowmem_over_quota('bytes', u.user_id, {_BYTES_CHECKED});
        END""",
        "DROP TRIGGER usage_vectors_insert",
        quotasql.vectors_insert(_BYTES_CHECKED, end=8),
        # a row's call ids on the row, written with it (``row_insert``): the window's facts
        # read them there and a row's declarations are found by them, so no index of
        # declarations by position is written. The unanswered declarations listed in the
        # header ([call id, position, order], JSON), which the editor writes once per
        # append with the header: no partial index, and no answered flag written (it says
        # what held when the call was declared; whether a call is answered now is whether
        # ``buffer_answers`` has its id)
        "ALTER TABLE buffer_rows ADD COLUMN calls TEXT",
        """UPDATE buffer_rows SET calls = (SELECT json_group_array(call_id) FROM (SELECT c.call_id
                FROM buffer_calls AS c WHERE c.buffer_id = buffer_rows.buffer_id
                AND c.declared_pos = buffer_rows.pos ORDER BY c.ord))
            WHERE role = 'assistant' AND EXISTS (SELECT 1 FROM buffer_calls AS c
                WHERE c.buffer_id = buffer_rows.buffer_id AND c.declared_pos = buffer_rows.pos)""",
        "ALTER TABLE buffers ADD COLUMN unanswered TEXT NOT NULL DEFAULT '[]'",
        """UPDATE buffers SET unanswered = (SELECT json_group_array(json_array(call_id, declared_pos, ord))
                FROM (SELECT c.call_id, c.declared_pos, c.ord FROM buffer_calls AS c
                    WHERE c.buffer_id = buffers.id AND NOT EXISTS (SELECT 1 FROM buffer_answers AS a
                        WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id)
                    ORDER BY c.declared_pos, c.ord))
            WHERE id IN (SELECT buffer_id FROM buffer_calls WHERE answered = 0)""",
        "DROP INDEX buffer_calls_pos",
        "DROP INDEX buffer_calls_open",
    ),
    # 25 (decision 0137, "the reservation"): a buffer's bytes reserved in ``user_usage``
    # with slack, so a growing append checks the bytes quota on one row and sums the
    # owner's buffers only near the quota (``flowmem.store.sqlite.reserved``)
    25: reserved.MIGRATION,
    # 26 (decision 0144): the growth trigger's body only when it has work (a new
    # reservation, or the upper bound over the bytes quota): ``reserved.GATED``
    26: reserved.GATED,
    # 28 (issue 42 §1, decision 0180): an open call's only entry is the header's list; an
    # answer's entry carries the declaration it answered (``declared_pos``, ``ord``: NULL when
    # none), one entry for both, so a call costs one entry when answered, none when declared.
    # The open calls' declarations go (listed already); each answered call's first declaration
    # moves onto its first answer's entry; any other declaration keeps its own entry
    28: (
        "ALTER TABLE buffer_answers ADD COLUMN declared_pos INTEGER",
        "ALTER TABLE buffer_answers ADD COLUMN ord INTEGER",
        """DELETE FROM buffer_calls WHERE NOT EXISTS (SELECT 1 FROM buffer_answers AS a
            WHERE a.buffer_id = buffer_calls.buffer_id AND a.call_id = buffer_calls.call_id)""",
        """UPDATE buffer_answers SET (declared_pos, ord) = (SELECT c.declared_pos, c.ord
                FROM buffer_calls AS c WHERE c.buffer_id = buffer_answers.buffer_id
                AND c.call_id = buffer_answers.call_id ORDER BY c.declared_pos, c.ord LIMIT 1)
            WHERE pos = (SELECT MIN(a.pos) FROM buffer_answers AS a
                WHERE a.buffer_id = buffer_answers.buffer_id AND a.call_id = buffer_answers.call_id)""",
        """DELETE FROM buffer_calls WHERE EXISTS (SELECT 1 FROM buffer_answers AS a
            WHERE a.buffer_id = buffer_calls.buffer_id AND a.call_id = buffer_calls.call_id
            AND a.declared_pos = buffer_calls.declared_pos)""",
    ),
}

LISTED_CALLS = _OWN[23]  # an append writes its row, its header and one index entry (issue 42 §1)
CARRIED_CALLS = _OWN[28]  # a call's declaration entry written with its answer (decision 0180)
MIGRATIONS: tuple[tuple[str, ...], ...] = collect(_OWN, "sqlite")


__all__ = ["CARRIED_CALLS", "LISTED_CALLS", "MIGRATIONS"]
