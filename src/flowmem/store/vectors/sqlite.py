"""SQLite's vector tables (their migration) and statements, by name.

The migration is idempotent (``IF NOT EXISTS``): a database taken back to an older
version by hand and migrated again keeps its vectors. A record deleted or given
another value loses its vectors in its own statement (triggers on ``records``); a
vector's bytes count against its record's owner's ``bytes`` quota (decision 0044),
counted on insert (refused past the quota, the write rolled back) and uncounted on
delete.
"""

from __future__ import annotations

from flowmem.store.vectors.statements import statements

_OF_RECORD = "scope = OLD.scope AND scope_id = OLD.scope_id AND key = OLD.key"

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS vector_spaces (
        id INTEGER PRIMARY KEY, collection TEXT NOT NULL, state TEXT NOT NULL,
        name TEXT NOT NULL, dims INTEGER NOT NULL, UNIQUE (collection, state))""",
    """CREATE TABLE IF NOT EXISTS record_vectors (
        scope TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL, space INTEGER NOT NULL,
        field TEXT NOT NULL, ord INTEGER NOT NULL, owner TEXT, vec BLOB NOT NULL,
        PRIMARY KEY (scope, scope_id, key, space, field, ord)) WITHOUT ROWID""",
    f"""CREATE TRIGGER IF NOT EXISTS vectors_record_delete AFTER DELETE ON records BEGIN
        DELETE FROM record_vectors WHERE {_OF_RECORD};
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS vectors_record_value AFTER UPDATE OF value ON records
        WHEN NEW.value IS NOT OLD.value BEGIN
        DELETE FROM record_vectors WHERE {_OF_RECORD};
    END""",
    """CREATE TRIGGER IF NOT EXISTS usage_vectors_insert AFTER INSERT ON record_vectors
        WHEN NEW.owner IS NOT NULL BEGIN
        UPDATE user_usage SET bytes = bytes + length(NEW.vec) WHERE user_id = NEW.owner;
        SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage
            WHERE user_id = NEW.owner AND flowmem_over_quota('bytes', user_id, bytes);
    END""",
    """CREATE TRIGGER IF NOT EXISTS usage_vectors_delete AFTER DELETE ON record_vectors
        WHEN OLD.owner IS NOT NULL BEGIN
        UPDATE user_usage SET bytes = bytes - length(OLD.vec) WHERE user_id = OLD.owner;
    END""",
)

SQL: dict[str, str] = statements("?")
# a SQLite write transaction excludes every other writer: no row lock to take
SQL["vectors_spaces_locked"] = SQL["vectors_spaces_read"] = SQL["vectors_spaces"]

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    18: MIGRATION,  # the records' embedding vectors and their spaces (issue 40, decision 0120)
}
