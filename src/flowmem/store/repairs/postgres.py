"""PostgreSQL's repair log table (its migration) and its statements, by name.

The entries' bytes count against the buffer's owner's ``bytes`` quota in a trigger, as
the buffers' own do (decision 0044: ``flowmem_usage_add``, ``flowmem_quota_check``):
counted on insert (refused past the quota, the transaction rolled back), uncounted on
delete (a trim, the buffer's deletion). Since migration 19 an entry is written by one
statement, ``repairs_log``, that also counts it (and checks the quota) and trims the log:
the insert's trigger is gone, the delete's stays (decision 0124).

Since migration 23 (decision 0135) the log's bytes are the header's: ``buffers.log_bytes``
is the size of the buffer's entries, and the header's usage trigger counts and checks its
rows and its log together. An append writes its entries with ``repairs_add`` (no trigger
under the bound, merged into the append's one write statement) and adds their bytes in
the header's own update (``header_logged``); a trigger of the insert trims the log past
``KEPT`` and takes the trimmed bytes off the header; the header's deletion uncounts the
rest.

Since migration 25 (decision 0148) the newest entries are held in the header row, as on
SQLite (``log_held``, newest first and the row's last column, so a HOT update's WAL record
leaves the older ones out; ``log_count``): an entry is no insert, no index entry and no
trigger; a trigger of the header's update moves them to the table in batches and trims
past ``KEPT``.
"""

from __future__ import annotations

from flowmem.store.quotasql import pg_grown_end
from flowmem.store.repairs import KEPT
from flowmem.store.repairs.statements import statements

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_repairs (
        buffer_id BIGINT NOT NULL, seq BIGINT NOT NULL, entry TEXT NOT NULL,
        PRIMARY KEY (buffer_id, seq))""",
    """CREATE FUNCTION flowmem_repairs_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE who TEXT; used user_usage%ROWTYPE;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT owner INTO who FROM buffers WHERE id = NEW.buffer_id;
                IF who IS NOT NULL THEN
                    used := flowmem_usage_add(who, octet_length(NEW.entry), 0, 0);
                    PERFORM flowmem_quota_check(who, 'bytes', used.bytes);
                END IF;
            ELSE
                SELECT owner INTO who FROM buffers WHERE id = OLD.buffer_id;
                IF who IS NOT NULL THEN
                    PERFORM flowmem_usage_add(who, -octet_length(OLD.entry), 0, 0);
                END IF;
            END IF;
            RETURN NULL;
        END $$""",
    """CREATE TRIGGER buffer_repairs_usage AFTER INSERT OR DELETE ON buffer_repairs
        FOR EACH ROW EXECUTE FUNCTION flowmem_repairs_usage()""",
)

# the entries' quota counted by the statement that writes them, not by a trigger (decision
# 0124): the insert's trigger goes, the delete's stays (a trim, the buffer's deletion)
COUNTED_BY_THE_INSERT: tuple[str, ...] = (
    "DROP TRIGGER buffer_repairs_usage ON buffer_repairs",
    """CREATE TRIGGER buffer_repairs_uncount AFTER DELETE ON buffer_repairs
        FOR EACH ROW EXECUTE FUNCTION flowmem_repairs_usage()""",
)

# the log's bytes in the header, counted with its rows by the header's usage trigger
# (decision 0135): no usage update, no quota function and no trim statement per entry
IN_THE_HEADER: tuple[str, ...] = (
    # idempotent, as the upgrade tests run it again on a schema taken back in parts
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS log_bytes BIGINT NOT NULL DEFAULT 0",
    # the old trigger counts only ``bytes``: this update leaves the usage as it is
    "DROP TRIGGER IF EXISTS buffers_usage_update ON buffers",
    """UPDATE buffers AS b SET log_bytes = s.size FROM (SELECT b2.id, COALESCE((SELECT SUM(octet_length(r.entry))
        FROM buffer_repairs AS r WHERE r.buffer_id = b2.id), 0) AS size FROM buffers AS b2) AS s
        WHERE b.id = s.id AND b.log_bytes <> s.size""",
    "DROP TRIGGER IF EXISTS buffer_repairs_uncount ON buffer_repairs",
    f"""CREATE OR REPLACE FUNCTION flowmem_buffer_grown() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE used user_usage%ROWTYPE; quota_limit BIGINT; grown BIGINT;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                used := flowmem_usage_add(NEW.owner, NEW.bytes + NEW.log_bytes, 1, 0);
                PERFORM flowmem_quota_check(NEW.owner, 'buffers', used.buffers);
                RETURN NULL;
            END IF;
            -- the append's own path, once per append: written out, no call
            grown := (NEW.bytes + NEW.log_bytes) - (OLD.bytes + OLD.log_bytes);
            UPDATE user_usage SET bytes = bytes + grown WHERE user_id = NEW.owner RETURNING * INTO used;
            {pg_grown_end("grown", "grown > 0", at=12)}
        END $$""",
    """CREATE OR REPLACE FUNCTION flowmem_buffer_dropped() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM flowmem_usage_add(OLD.owner, -(OLD.bytes + OLD.log_bytes), -1, 0);
            RETURN NULL;
        END $$""",
    """CREATE TRIGGER buffers_usage_update AFTER UPDATE OF bytes, log_bytes ON buffers FOR EACH ROW
        WHEN (NEW.owner IS NOT NULL AND NEW.bytes + NEW.log_bytes <> OLD.bytes + OLD.log_bytes)
        EXECUTE FUNCTION flowmem_buffer_grown()""",
    # the trim past ``KEPT``, in the entry's own statement (its WHEN: a log under the bound
    # pays nothing); the trimmed bytes come off the header (and so off the owner's usage)
    f"""CREATE OR REPLACE FUNCTION flowmem_repairs_kept() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            WITH gone AS (DELETE FROM buffer_repairs WHERE buffer_id = NEW.buffer_id
                AND seq <= NEW.seq - {KEPT} RETURNING octet_length(entry) AS size)
            UPDATE buffers SET log_bytes = log_bytes - (SELECT COALESCE(SUM(size), 0) FROM gone)
                WHERE id = NEW.buffer_id;
            RETURN NULL;
        END $$""",
    "DROP TRIGGER IF EXISTS buffer_repairs_kept ON buffer_repairs",
    f"""CREATE TRIGGER buffer_repairs_kept AFTER INSERT ON buffer_repairs FOR EACH ROW
        WHEN (NEW.seq > {KEPT}) EXECUTE FUNCTION flowmem_repairs_kept()""",
)

HELD_CHARS = 1500
"""The held entries' text a header keeps before they move to the table (decision 0148; SQLite's too)."""

# the newest entries held in the header row (decision 0148), as on SQLite: an append that
# logs adds its entries' text, bytes and number to the header's own update; a trigger of
# that update moves them to the table once they pass ``HELD_CHARS`` (and trims), and trims
# the log to the newest ``KEPT`` once it passes it (the insert's trim trigger goes)
HELD: tuple[str, ...] = (
    # the held text last, and newest first: an update that adds an entry leaves the older
    # ones as the tuple's unchanged end, which the WAL record of a HOT update leaves out
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS log_count BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS log_held TEXT NOT NULL DEFAULT ''",
    # every entry a log holds (idempotent, as the upgrade tests run it again: the held ones too)
    """UPDATE buffers AS b SET log_count = (SELECT COUNT(*) FROM buffer_repairs AS r WHERE r.buffer_id = b.id)
        + json_array_length(('[' || substr(b.log_held, 2) || ']')::json) WHERE b.log_bytes > 0""",
    "DROP TRIGGER IF EXISTS buffer_repairs_kept ON buffer_repairs",
    "DROP FUNCTION IF EXISTS flowmem_repairs_kept()",
    """CREATE OR REPLACE FUNCTION flowmem_repairs_spill(which BIGINT, kept BIGINT) RETURNS void
        LANGUAGE plpgsql AS $$
        DECLARE base BIGINT; moved BIGINT;
        BEGIN
            SELECT COALESCE(MAX(seq), 0) INTO base FROM buffer_repairs WHERE buffer_id = which;
            SELECT json_array_length(('[' || substr(log_held, 2) || ']')::json) INTO moved
                FROM buffers WHERE id = which;
            INSERT INTO buffer_repairs (buffer_id, seq, entry)
                SELECT which, base + moved + 1 - h.n, h.e::text FROM buffers AS b,
                    json_array_elements(('[' || substr(b.log_held, 2) || ']')::json) WITH ORDINALITY AS h(e, n)
                WHERE b.id = which;
            WITH gone AS (DELETE FROM buffer_repairs WHERE buffer_id = which AND seq <= base + moved - kept
                RETURNING octet_length(entry) AS size)
            UPDATE buffers SET log_held = '', log_count = LEAST(log_count, kept),
                log_bytes = log_bytes - (SELECT COALESCE(SUM(size), 0) FROM gone) WHERE id = which;
        END $$""",
    f"""CREATE OR REPLACE FUNCTION flowmem_repairs_held() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF length(NEW.log_held) > {HELD_CHARS} THEN  -- the held entries move, the log is trimmed
                PERFORM flowmem_repairs_spill(NEW.id, {KEPT});
            ELSE  -- a log past its bound: its oldest entries (the table's) go, their bytes off the header
                WITH gone AS (DELETE FROM buffer_repairs WHERE buffer_id = NEW.id AND seq <
                    (SELECT MIN(seq) FROM buffer_repairs WHERE buffer_id = NEW.id) + NEW.log_count - {KEPT}
                    RETURNING octet_length(entry) AS size)
                UPDATE buffers SET log_count = {KEPT},
                    log_bytes = log_bytes - (SELECT COALESCE(SUM(size), 0) FROM gone) WHERE id = NEW.id;
            END IF;
            RETURN NULL;
        END $$""",
    "DROP TRIGGER IF EXISTS buffers_repairs_held ON buffers",
    f"""CREATE TRIGGER buffers_repairs_held AFTER UPDATE OF log_held ON buffers FOR EACH ROW
        WHEN (length(NEW.log_held) > {HELD_CHARS} OR NEW.log_count > {KEPT})
        EXECUTE FUNCTION flowmem_repairs_held()""",
)

_HELD_READ = "b.log_held, (SELECT COALESCE(MAX(seq), 0) FROM buffer_repairs WHERE buffer_id = b.id)"

SQL: dict[str, str] = {
    **statements("%s"),
    # since migration 25 (decision 0148): a write's entries held in its header's own update
    # (``header_logged``) or in ``repairs_counted``: their bytes, their texts before the
    # held ones (newest first, each after a comma) and their number
    "header_logged": """UPDATE buffers SET count = %s, last_major = %s, bytes = %s, tokens = tokens + %s,
        version = version + 1, log_bytes = log_bytes + %s, log_held = %s || log_held,
        log_count = log_count + %s WHERE id = %s""",
    # the same with the header's list of unanswered calls (migration 26, decision 0153)
    "header_listed_logged": """UPDATE buffers SET count = %s, last_major = %s, bytes = %s, tokens = tokens + %s,
        unanswered = %s, version = version + 1, log_bytes = log_bytes + %s, log_held = %s || log_held,
        log_count = log_count + %s WHERE id = %s""",
    "repairs_counted": """UPDATE buffers SET log_bytes = log_bytes + %s, log_held = %s || log_held,
        log_count = log_count + %s WHERE id = %s""",
    # a store keeping fewer than ``KEPT``: the held entries moved and the log trimmed now
    "repairs_spill_kept": "SELECT flowmem_repairs_spill(%s::bigint, %s::bigint)",
    "repairs_held": f"SELECT {_HELD_READ} FROM buffers AS b WHERE b.id = %s",
    "repairs_held@address": f"""SELECT {_HELD_READ} FROM buffers AS b
        WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    17: MIGRATION,  # the buffers' repair logs, counted against the owner's bytes quota (issue 37 §2)
    19: COUNTED_BY_THE_INSERT,  # an entry's quota and trim in its insert: one statement (decision 0124)
    23: IN_THE_HEADER,  # the log's bytes in the header, counted with its rows (decision 0135)
    25: HELD,  # the newest entries held in the header, moved to the table in batches (decision 0148)
}
