"""PostgreSQL's conversation tables (the pydantic-ai migration) and their statements, by name."""

from __future__ import annotations

from flowmem.store.conversations.statements import statements
from flowmem.store.conversations.tables import line_tables, tables

MIGRATION: tuple[str, ...] = tables("BIGINT", "")

UPGRADE: tuple[str, ...] = (
    *line_tables("BIGINT"),
    """CREATE FUNCTION pa_messages_drop() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM pa_messages WHERE conversation_id = OLD.conversation_id;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER pa_messages_drop AFTER DELETE ON pa_conversations
        FOR EACH ROW EXECUTE FUNCTION pa_messages_drop()""",
)

SQL: dict[str, str] = statements("%s", "id")

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    9: MIGRATION,  # pydantic-ai conversation records and where their entries end (decision 0051)
    20: UPGRADE,  # each entry's message as pydantic-ai's JSON, and the line they make whole (decision 0131)
}
