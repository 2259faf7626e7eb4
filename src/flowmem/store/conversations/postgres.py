"""PostgreSQL's conversation tables (the pydantic-ai migration) and their statements, by name."""

from __future__ import annotations

from flowmem.store.conversations.statements import statements

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE pa_conversations (
        conversation_id TEXT PRIMARY KEY, revision TEXT NOT NULL, scope TEXT,
        updated BIGINT NOT NULL, record TEXT NOT NULL)""",
    "CREATE INDEX pa_conversations_scope ON pa_conversations (scope, updated)",
    "CREATE INDEX pa_conversations_updated ON pa_conversations (updated)",
    """CREATE TABLE pa_entries (
        entry_id TEXT NOT NULL, conversation_id TEXT NOT NULL, key TEXT NOT NULL,
        pos BIGINT NOT NULL,
        PRIMARY KEY (entry_id, conversation_id, key))""",
    "CREATE INDEX pa_entries_conversation ON pa_entries (conversation_id)",
)

# each entry's message as pydantic-ai's JSON, in line order (a rowid table: a history is
# one range read), and the line whose messages it holds whole (decision 0131); a
# conversation's messages go with its record
UPGRADE: tuple[str, ...] = (
    "ALTER TABLE pa_conversations ADD COLUMN line_key TEXT",
    "ALTER TABLE pa_conversations ADD COLUMN line_stamp BIGINT",
    "ALTER TABLE pa_conversations ADD COLUMN line_version BIGINT",
    """CREATE TABLE pa_messages (
        conversation_id TEXT NOT NULL, key TEXT NOT NULL, pos BIGINT NOT NULL,
        entry_id TEXT NOT NULL, message TEXT NOT NULL,
        PRIMARY KEY (conversation_id, key, pos))""",
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
