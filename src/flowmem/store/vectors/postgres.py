"""PostgreSQL's vector tables (their migration), statements, and ``PostgresVectors``.

Vectors are ``bytea`` (float32, little-endian) scored by the portable exact scan:
Debian 12 ships no pgvector, and the scan needs no extension (decision 0120). The
migration is idempotent (``IF NOT EXISTS``, ``OR REPLACE``). A record deleted or given
another value loses its vectors in its own statement (a trigger on ``records``); a
vector's bytes count against its record's owner's ``bytes`` quota in a trigger, as
the records' own do (decision 0044: ``flowmem_usage_add``, ``flowmem_quota_check``).

A put reads the collection's spaces ``FOR SHARE`` and ``switch`` ``FOR UPDATE``: a
put in the old space cannot commit after the switch has checked that nothing is
pending. In a database whose collation is not C, keys are compared ``COLLATE "C"``
(``SQL_C``), as ``flowmem.store.listing.postgres`` does; ``SqlVectors`` reads the
collation once and picks the statements.
"""

from __future__ import annotations

from flowmem.store.vectors.statements import statements

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS vector_spaces (
        id BIGSERIAL PRIMARY KEY, collection TEXT NOT NULL, state TEXT NOT NULL,
        name TEXT NOT NULL, dims INTEGER NOT NULL, UNIQUE (collection, state))""",
    """CREATE TABLE IF NOT EXISTS record_vectors (
        scope TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL, space BIGINT NOT NULL,
        field TEXT NOT NULL, ord INTEGER NOT NULL, owner TEXT, vec BYTEA NOT NULL,
        PRIMARY KEY (scope, scope_id, key, space, field, ord))""",
    """CREATE OR REPLACE FUNCTION flowmem_record_vectors_drop() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM record_vectors
                WHERE scope = OLD.scope AND scope_id = OLD.scope_id AND key = OLD.key;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE TRIGGER records_vectors_delete AFTER DELETE ON records
        FOR EACH ROW EXECUTE FUNCTION flowmem_record_vectors_drop()""",
    """CREATE OR REPLACE TRIGGER records_vectors_value AFTER UPDATE OF value ON records
        FOR EACH ROW WHEN (NEW.value IS DISTINCT FROM OLD.value)
        EXECUTE FUNCTION flowmem_record_vectors_drop()""",
    """CREATE OR REPLACE FUNCTION flowmem_vectors_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE used user_usage%ROWTYPE;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                IF NEW.owner IS NOT NULL THEN
                    used := flowmem_usage_add(NEW.owner, octet_length(NEW.vec), 0, 0);
                    PERFORM flowmem_quota_check(NEW.owner, 'bytes', used.bytes);
                END IF;
            ELSIF OLD.owner IS NOT NULL THEN
                PERFORM flowmem_usage_add(OLD.owner, -octet_length(OLD.vec), 0, 0);
            END IF;
            RETURN NULL;
        END $$""",
    """CREATE OR REPLACE TRIGGER record_vectors_usage AFTER INSERT OR DELETE ON record_vectors
        FOR EACH ROW EXECUTE FUNCTION flowmem_vectors_usage()""",
)

_BUMP = "UPDATE vector_generations SET n = n + 1 WHERE collection"
_TRIGGERS = {  # the generation's triggers: deferred, so its row is the last lock a write takes
    "vector_generation_spaces": "AFTER INSERT OR UPDATE OR DELETE ON vector_spaces",
    "vector_generation_vectors": "AFTER INSERT OR UPDATE OR DELETE ON record_vectors",
    "vector_generation_expiry": "AFTER UPDATE OF expires_at ON records",
}

GENERATIONS: tuple[str, ...] = (
    # a collection's generation: bumped by every transaction that changes what a scan of
    # it reads (a vector written or deleted, a space added, dropped or promoted, the
    # expiry of a record with vectors), so a cached scan is checked by one read (cache.py).
    # The triggers run at commit (deferred): a write locks the generation's row last, so
    # two writes of records and vectors never wait for each other in a cycle
    """CREATE TABLE IF NOT EXISTS vector_generations (
        collection TEXT PRIMARY KEY, n BIGINT NOT NULL)""",
    """INSERT INTO vector_generations (collection, n)
        SELECT DISTINCT collection, 0 FROM vector_spaces ON CONFLICT DO NOTHING""",
    f"""CREATE OR REPLACE FUNCTION flowmem_vector_generation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_TABLE_NAME = 'vector_spaces' THEN
                IF TG_OP = 'INSERT' THEN
                    INSERT INTO vector_generations (collection, n) VALUES (NEW.collection, 0)
                        ON CONFLICT DO NOTHING;
                    {_BUMP} = NEW.collection;
                ELSIF TG_OP = 'DELETE' THEN
                    {_BUMP} = OLD.collection;
                ELSE
                    {_BUMP} IN (OLD.collection, NEW.collection);
                END IF;
            ELSIF TG_TABLE_NAME = 'record_vectors' THEN
                IF TG_OP <> 'INSERT' THEN
                    {_BUMP} = (SELECT collection FROM vector_spaces WHERE id = OLD.space);
                END IF;
                IF TG_OP <> 'DELETE' THEN
                    {_BUMP} = (SELECT collection FROM vector_spaces WHERE id = NEW.space);
                END IF;
            ELSE
                {_BUMP} IN (SELECT s.collection FROM record_vectors v
                    JOIN vector_spaces s ON s.id = v.space
                    WHERE v.scope = NEW.scope AND v.scope_id = NEW.scope_id AND v.key = NEW.key);
            END IF;
            RETURN NULL;
        END $$""",
    *(f"DROP TRIGGER IF EXISTS {name} ON {on.rsplit(' ', 1)[1]}" for name, on in _TRIGGERS.items()),
    *(
        f"""CREATE CONSTRAINT TRIGGER {name} {on} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        {"WHEN (NEW.expires_at IS DISTINCT FROM OLD.expires_at) " if name.endswith("expiry") else ""}EXECUTE FUNCTION flowmem_vector_generation()"""
        for name, on in _TRIGGERS.items()
    ),
)

SQL: dict[str, str] = statements("%s", lock="FOR SHARE", lateral=True)
SQL_C: dict[str, str] = statements("%s", key='v.key COLLATE "C"', lock="FOR SHARE", lateral=True)
SQL["vectors_spaces_locked"] = SQL["vectors_spaces"].replace("FOR SHARE", "FOR UPDATE")
SQL["vectors_spaces_read"] = SQL["vectors_spaces"].replace("FOR SHARE", "")
SQL_C["vectors_spaces_read"] = SQL["vectors_spaces_read"]
SQL_C["vectors_spaces_locked"] = SQL["vectors_spaces_locked"]
# datlocprovider exists from PostgreSQL 15 on; before it every database is libc's
SQL["vectors_collation"] = """SELECT d.datcollate, to_jsonb(d) ->> 'datlocprovider'
    FROM pg_database d WHERE d.datname = current_database()"""

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    18: MIGRATION,  # the records' embedding vectors and their spaces (issue 40, decision 0120)
    21: GENERATIONS,  # each collection's generation, which checks a cached scan (decision 0127)
}
