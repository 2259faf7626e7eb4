"""SQLite's repair log table (its migration) and its statements, by name.

The entries' bytes count against the buffer's owner's ``bytes`` quota in triggers, as
the buffers' own do (decision 0044): counted on insert (refused past the quota, the
write rolled back), uncounted on delete (a trim, the buffer's deletion). Since
migration 19 a trigger of the insert also trims the log to its newest ``KEPT`` entries
(decision 0124): an entry is one statement.
"""

from __future__ import annotations

from flowmem.store.repairs import KEPT
from flowmem.store.repairs.statements import statements

_OWNER = "(SELECT owner FROM buffers WHERE id = {row}.buffer_id)"

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_repairs (
        buffer_id INTEGER NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL,
        PRIMARY KEY (buffer_id, seq)) WITHOUT ROWID""",
    f"""CREATE TRIGGER usage_repairs_insert AFTER INSERT ON buffer_repairs BEGIN
        UPDATE user_usage SET bytes = bytes + length(CAST(NEW.entry AS BLOB))
            WHERE user_id = {_OWNER.format(row="NEW")};
        SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage
            WHERE user_id = {_OWNER.format(row="NEW")} AND flowmem_over_quota('bytes', user_id, bytes);
    END""",
    f"""CREATE TRIGGER usage_repairs_delete AFTER DELETE ON buffer_repairs BEGIN
        UPDATE user_usage SET bytes = bytes - length(CAST(OLD.entry AS BLOB))
            WHERE user_id = {_OWNER.format(row="OLD")};
    END""",
)

# the trim in a trigger of the insert (decision 0124): an entry is one statement; the
# trigger runs only when the entry's number puts older ones past ``KEPT`` (its WHEN: a
# log under the bound pays nothing more); a store keeping fewer (``SqlRepairs.kept``)
# trims again itself
TRIM_IN_TRIGGER: tuple[str, ...] = (
    f"""CREATE TRIGGER repairs_kept AFTER INSERT ON buffer_repairs WHEN NEW.seq > {KEPT} BEGIN
        DELETE FROM buffer_repairs WHERE buffer_id = NEW.buffer_id AND seq <= NEW.seq - {KEPT};
    END""",
)

SQL: dict[str, str] = {
    **statements("?"),
    # the bytes quota off on this connection until unlifted (``flowmem_quota_lift``)
    "repairs_lift": "SELECT flowmem_quota_lift(1)",
    "repairs_unlift": "SELECT flowmem_quota_lift(0)",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    17: MIGRATION,  # the buffers' repair logs, counted against the owner's bytes quota (issue 37 §2)
    19: TRIM_IN_TRIGGER,  # the log's trim in a trigger of its insert: one statement an entry (decision 0124)
}
