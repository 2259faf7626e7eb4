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

SQL: dict[str, str] = statements("%s", lock="FOR SHARE")
SQL_C: dict[str, str] = statements("%s", key='v.key COLLATE "C"', lock="FOR SHARE")
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
}
