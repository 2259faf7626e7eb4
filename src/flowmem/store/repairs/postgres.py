"""PostgreSQL's repair log table (its migration) and its statements, by name.

The entries' bytes count against the buffer's owner's ``bytes`` quota in a trigger, as
the buffers' own do (decision 0044: ``flowmem_usage_add``, ``flowmem_quota_check``):
counted on insert (refused past the quota, the transaction rolled back), uncounted on
delete (a trim, the buffer's deletion).
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

SQL: dict[str, str] = {
    **statements("%s"),
    # the bytes quota off for the rest of the transaction, then the session's again
    "repairs_lift": "SELECT set_config('flowmem.quota_bytes', '0', true)",
    "repairs_unlift": """SELECT set_config('flowmem.quota_bytes',
        COALESCE(current_setting('flowmem.quota_bytes_kept', true), ''), true)""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    17: MIGRATION,  # the buffers' repair logs, counted against the owner's bytes quota (issue 37 §2)
}
