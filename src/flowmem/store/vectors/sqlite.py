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

_BUMP = "UPDATE vector_generations SET n = n + 1 WHERE collection = (SELECT collection FROM vector_spaces WHERE id = {}.space)"

GENERATIONS: tuple[str, ...] = (
    # a collection's generation: bumped in every transaction that changes what a scan of
    # it reads (a vector written or deleted, a space added, dropped or promoted, the
    # expiry of a record with vectors), so a cached scan is checked by one read (cache.py)
    """CREATE TABLE IF NOT EXISTS vector_generations (
        collection TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID""",
    """INSERT OR IGNORE INTO vector_generations (collection, n)
        SELECT DISTINCT collection, 0 FROM vector_spaces""",
    """CREATE TRIGGER IF NOT EXISTS vector_generation_space_add AFTER INSERT ON vector_spaces BEGIN
        INSERT OR IGNORE INTO vector_generations (collection, n) VALUES (NEW.collection, 0);
        UPDATE vector_generations SET n = n + 1 WHERE collection = NEW.collection;
    END""",
    """CREATE TRIGGER IF NOT EXISTS vector_generation_space_drop AFTER DELETE ON vector_spaces BEGIN
        UPDATE vector_generations SET n = n + 1 WHERE collection = OLD.collection;
    END""",
    """CREATE TRIGGER IF NOT EXISTS vector_generation_space_change AFTER UPDATE ON vector_spaces BEGIN
        UPDATE vector_generations SET n = n + 1 WHERE collection IN (OLD.collection, NEW.collection);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS vector_generation_insert AFTER INSERT ON record_vectors BEGIN
        {_BUMP.format("NEW")};
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS vector_generation_delete AFTER DELETE ON record_vectors BEGIN
        {_BUMP.format("OLD")};
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS vector_generation_change AFTER UPDATE ON record_vectors BEGIN
        {_BUMP.format("OLD")};
        {_BUMP.format("NEW")};
    END""",
    """CREATE TRIGGER IF NOT EXISTS vector_generation_expiry AFTER UPDATE OF expires_at ON records
        WHEN NEW.expires_at IS NOT OLD.expires_at BEGIN
        UPDATE vector_generations SET n = n + 1 WHERE collection IN (
            SELECT s.collection FROM record_vectors v JOIN vector_spaces s ON s.id = v.space
            WHERE v.scope = NEW.scope AND v.scope_id = NEW.scope_id AND v.key = NEW.key);
    END""",
)

SQL: dict[str, str] = statements("?")
# a read of many vectors maps the file: pages read in place, not a system call each
# (10,000 vectors of 1,536 dimensions: 47 ms to 19 ms); a connection keeps it
SQL["vectors_read_setup"] = "PRAGMA mmap_size = 1073741824"
# a SQLite write transaction excludes every other writer: no row lock to take
SQL["vectors_spaces_locked"] = SQL["vectors_spaces_read"] = SQL["vectors_spaces"]

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    18: MIGRATION,  # the records' embedding vectors and their spaces (issue 40, decision 0120)
    21: GENERATIONS,  # each collection's generation, which checks a cached scan (decision 0127)
}
