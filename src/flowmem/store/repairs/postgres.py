"""PostgreSQL's repair log table (its migration) and its statements, by name.

The entries' bytes count against the buffer's owner's ``bytes`` quota in a trigger, as
the buffers' own do (decision 0044: ``flowmem_usage_add``, ``flowmem_quota_check``):
counted on insert (refused past the quota, the transaction rolled back), uncounted on
delete (a trim, the buffer's deletion). Since migration 19 an entry is written by one
statement, ``repairs_log``, that also counts it (and checks the quota) and trims the log:
the insert's trigger is gone, the delete's stays (decision 0124).
"""

from __future__ import annotations

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

SQL: dict[str, str] = {
    **statements("%s"),
    # one entry in one statement (decision 0124): its number (the log's next), the
    # insert, the trim to the newest ``kept`` (%s), the owner's usage counted, and the
    # bytes quota checked unless lifted (the last %s false: a write that frees more than
    # its entries take); the trim's rows are uncounted by the delete's trigger
    "repairs_log": """WITH next AS (
            SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM buffer_repairs WHERE buffer_id = %s),
        added AS (INSERT INTO buffer_repairs (buffer_id, seq, entry) SELECT %s, seq, %s FROM next
            RETURNING octet_length(entry) AS size),
        trimmed AS (DELETE FROM buffer_repairs WHERE buffer_id = %s
            AND seq <= (SELECT seq FROM next) - %s),
        used AS (UPDATE user_usage AS u SET bytes = u.bytes + added.size FROM added, buffers AS b
            WHERE b.id = %s AND u.user_id = b.owner RETURNING u.user_id, u.bytes)
        SELECT flowmem_quota_check(user_id, 'bytes', bytes) FROM used WHERE %s""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    17: MIGRATION,  # the buffers' repair logs, counted against the owner's bytes quota (issue 37 §2)
    19: COUNTED_BY_THE_INSERT,  # an entry's quota and trim in its insert: one statement (decision 0124)
}
