"""PostgreSQL's schema: flowmem's migrations, in order (append-only).

The store's own tables are numbered here (``_OWN``); each kind of data numbers its
own in its ``postgres.py``, and ``flowmem.store.migrations.collect`` joins them.
"""

from __future__ import annotations

from flowmem.store.migrations import collect
from flowmem.store.postgres import callids, granted, reserved
from flowmem.store.quotasql import OWNER_OF, pg_grown_end
from flowmem.store.repairs import KEPT
from flowmem.store.repairs.postgres import HELD_CHARS

MIGRATION_LOCK = 0x666C6F776D656D  # advisory key serializing schema migrations ("flowmem")

# 26 (issue 42 §1, decision 0153, as SQLite's 23, decision 0137): the unanswered
# declarations listed in the header ([call id, position, order], JSON), which the
# editor writes once per append with the header's own update: no partial index of
# open calls and no answered flag flipped on a result (it says what held when the call
# was declared; whether a call is answered now is whether ``buffer_answers`` has its
# id). The list goes before the held repair log entries in the row (their column is
# written anew after it, the old one dropped): a HOT update's WAL record carries the
# changed middle of the tuple, which then ends at the list, not after the held log
LISTED_CALLS: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS buffers_repairs_held ON buffers",
    # idempotent, as the upgrade tests run it again on a schema taken back in parts
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS unanswered TEXT NOT NULL DEFAULT '[]'",
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS log_newest TEXT NOT NULL DEFAULT ''",
    "UPDATE buffers SET log_newest = log_held WHERE log_held <> ''",
    "ALTER TABLE buffers DROP COLUMN log_held",
    "ALTER TABLE buffers RENAME COLUMN log_newest TO log_held",
    f"""CREATE TRIGGER buffers_repairs_held AFTER UPDATE OF log_held ON buffers FOR EACH ROW
        WHEN (length(NEW.log_held) > {HELD_CHARS} OR NEW.log_count > {KEPT})
        EXECUTE FUNCTION flowmem_repairs_held()""",
    """UPDATE buffers AS b SET unanswered = o.listed FROM (SELECT c.buffer_id,
            json_agg(json_build_array(c.call_id, c.declared_pos, c.ord) ORDER BY c.declared_pos, c.ord)::text AS listed
        FROM buffer_calls AS c WHERE NOT EXISTS (SELECT 1 FROM buffer_answers AS a
            WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id) GROUP BY c.buffer_id) AS o
        WHERE b.id = o.buffer_id""",
    "DROP INDEX IF EXISTS buffer_calls_open",
)

# 31 (issue 42 §1, decision 0175): the headers' pages keep half their room for updates. A
# header's update is HOT (one WAL record, no index entry) only when its new version fits on
# its page, and one holding its repair log (decision 0148) is up to ~2 KB a version; at the
# default fillfactor a page's dead versions are pruned only once less than a tenth of it is
# free, so a heal's next version often went to a new page with an entry in each of the
# header's three indexes (and their full-page images after a checkpoint). At 50 the page is
# pruned once half of it is used. No rewrite: the pruning threshold holds for every page at
# once, the room left at insertion for pages filled from now on
HEADER_ROOM: tuple[str, ...] = ("ALTER TABLE buffers SET (fillfactor = 50)",)

# Append-only: never edit a released migration, add a new one.
_OWN: dict[int, tuple[str, ...]] = {
    1: (
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
    2: (  # expired records are found by expiry (purge_expired)
        "CREATE INDEX records_expiry ON records (expires_at) WHERE expires_at IS NOT NULL",
    ),
    3: (  # the buffer header keeps the UTF-8 size of its rows (the buffer_bytes limit)
        "ALTER TABLE buffers ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0",
        """UPDATE buffers SET bytes = COALESCE((SELECT SUM(octet_length(body))
            FROM buffer_rows WHERE buffer_rows.buffer_id = buffers.id), 0)""",
    ),
    4: (  # session-scope data written without a session record gets one, owned by nobody
        """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at, updated_at)
            SELECT scope_id, '', NULL, 'idle', NULL, '{}',
                EXTRACT(EPOCH FROM now())::double precision,
                EXTRACT(EPOCH FROM now())::double precision
            FROM (SELECT scope_id FROM buffers WHERE scope = 'session'
                UNION SELECT scope_id FROM records WHERE scope = 'session') AS scoped
            WHERE scope_id NOT IN (SELECT id FROM sessions)""",
    ),
    5: (  # idempotency keys with the answer to repeat (docs/decisions/0031)
        """CREATE TABLE idempotency_keys (
            owner TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
            status INTEGER NOT NULL, body TEXT NOT NULL, expires_at DOUBLE PRECISION,
            PRIMARY KEY (owner, key))""",
        """CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)
            WHERE expires_at IS NOT NULL""",
    ),
    6: (  # every header write increments the version (known buffers, docs/decisions/0039)
        "ALTER TABLE buffers ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
    ),
    8: (  # a deleted session's id is remembered: no write brings it back (issue 24 §2)
        "CREATE TABLE deleted_sessions (id TEXT PRIMARY KEY, deleted_at DOUBLE PRECISION NOT NULL)",
    ),
    11: (  # the call ids of turns a window evicted, the latest remembered (issue 24 §2)
        """CREATE TABLE buffer_evicted (
            buffer_id BIGINT NOT NULL, call_id TEXT NOT NULL, seq BIGINT NOT NULL,
            PRIMARY KEY (buffer_id, call_id))""",
        "CREATE INDEX buffer_evicted_seq ON buffer_evicted (buffer_id, seq)",
    ),
    # 12: per-user quotas, counted in the write's own transaction (docs/decisions/0044):
    # whose quota each buffer and record counts against, what each user has, and the
    # triggers that keep the count; the quotas are the connection's flowmem.quota_* settings
    12: (
        "ALTER TABLE buffers ADD COLUMN owner TEXT",
        "ALTER TABLE records ADD COLUMN owner TEXT",
        f"UPDATE buffers SET owner = {OWNER_OF.format(t='buffers')}",
        f"UPDATE records SET owner = {OWNER_OF.format(t='records')}",
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
                NEW.owner := {OWNER_OF.format(t='NEW')};
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
        f"""CREATE FUNCTION flowmem_buffer_grown() RETURNS trigger LANGUAGE plpgsql AS $$
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
                {pg_grown_end("NEW.bytes - OLD.bytes", "NEW.bytes > OLD.bytes", at=16)}
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
    13: (  # each row's tokens by the default counter and the buffer's total (issue 28 §1):
        # NULL for a row or buffer stored before, counted when read; system rows found by index
        "ALTER TABLE buffer_rows ADD COLUMN tokens INTEGER",
        "ALTER TABLE buffers ADD COLUMN tokens BIGINT DEFAULT 0",
        "UPDATE buffers SET tokens = NULL WHERE count > 0",
        "CREATE INDEX buffer_rows_systems ON buffer_rows (buffer_id, pos) WHERE role = 'system'",
    ),
    # 15 (issue 26 §2): no
    # index of the non-tool rows, one entry and one WAL record fewer per message; a
    # result run's end is found on the primary key (docs/decisions/0068)
    15: ("DROP INDEX IF EXISTS buffer_rows_turns",),
    # 24 (issue 42 §1, decision 0139): no index of declarations by position, one entry
    # fewer for each declared call and for each answer's flip; a row's declarations are
    # found by the call ids its body names (calls_delete, shift_calls), moved ones by a
    # partial index that holds entries only in the middle of a shift
    24: (
        "CREATE INDEX IF NOT EXISTS buffer_calls_moved ON buffer_calls (buffer_id) WHERE declared_pos < 0",
        "DROP INDEX IF EXISTS buffer_calls_pos",
    ),
    26: LISTED_CALLS,
    # 27 (issue 42 §1/§3, decision 0153, as SQLite's 25): a buffer's bytes reserved in
    # ``user_usage`` with slack, so a growing append checks the bytes quota on one row read
    # and writes the owner's usage row only when its reservation runs out
    # (``flowmem.store.postgres.reserved``)
    27: reserved.MIGRATION,
    # 28 (issue 42 §1, decision 0159): a call's declaration and its answer in one row of
    # ``buffer_call_ids`` (``buffer_calls`` and ``buffer_answers`` its views): an answer is a
    # HOT update of its declaration's row, not a row and a key (``flowmem.store.postgres.callids``)
    28: callids.MIGRATION,
    # 29 (issue 42 §3, decision 0158): the bytes quota checked when a reservation is granted
    # and when the quota in force changes, not on every growth; the reservation trigger's
    # condition without a cast (``flowmem.store.postgres.granted``)
    29: granted.MIGRATION,
    # 30 (decision 0158): 29's condition in the function, the trigger's WHEN the owner alone
    # (a trigger's condition is prepared in every header update, a function's once a session)
    30: granted.GATED,
    31: HEADER_ROOM,
    # 32 (issue 42 §1, decision 0181): ``buffer_call_ids``' pages keep a tenth of their room,
    # so an answer stays a HOT update on its declaration's page after a vacuum has handed the
    # pages' pruned room to new declarations (``flowmem.store.postgres.callids``)
    32: callids.ANSWERS_ROOM,
    # 33 (issue 42 §3, decision 0189): the reservation trigger's function tests the common case
    # (a growth inside a reservation checked under the quota in force) first (``postgres.granted``)
    33: granted.FIRST_TEST,
    # 34 (issue 42 §1, decision 0190): an open call's only entry is the header's list, and
    # its answer inserts one row carrying the declaration (``flowmem.store.postgres.callids``)
    34: callids.CARRIED,
    # 35 (issue 42 §1, decision 0194): an answer is its tool row, found by a partial key on
    # ``buffer_rows``, carrying the declaration it answered in its own columns: a result
    # writes nothing to ``buffer_call_ids`` (``flowmem.store.postgres.callids``)
    35: callids.ANSWERED_ROWS,
    # 36 (issue 42 §1, decision 0199): the give-back of unused reservations over each buffer's
    # bytes as derived with its header's tail (decision 0195; ``flowmem.store.postgres.reserved``)
    36: reserved.DERIVED,
}

MIGRATIONS: tuple[tuple[str, ...], ...] = collect(_OWN, "postgres")
