"""The conversation tables, written once and spelled per backend (the integer type, SQLite's ``WITHOUT ROWID``).

``conversations.sqlite`` and ``conversations.postgres`` call ``tables`` and
``line_tables`` for their migrations 9 and 20 and add their own trigger; the text
is the released migrations' to the byte (``tests/store/test_migrations.py`` pins it).
"""

from __future__ import annotations


def tables(integer: str, rowless: str) -> tuple[str, ...]:
    """Migration 9's tables (decision 0051): ``integer`` the dialect's 64-bit integer, ``rowless`` SQLite's " WITHOUT ROWID"."""
    return (
        f"""CREATE TABLE pa_conversations (
        conversation_id TEXT PRIMARY KEY, revision TEXT NOT NULL, scope TEXT,
        updated {integer} NOT NULL, record TEXT NOT NULL){rowless}""",
        "CREATE INDEX pa_conversations_scope ON pa_conversations (scope, updated)",
        "CREATE INDEX pa_conversations_updated ON pa_conversations (updated)",
        f"""CREATE TABLE pa_entries (
        entry_id TEXT NOT NULL, conversation_id TEXT NOT NULL, key TEXT NOT NULL,
        pos {integer} NOT NULL,
        PRIMARY KEY (entry_id, conversation_id, key)){rowless}""",
        "CREATE INDEX pa_entries_conversation ON pa_entries (conversation_id)",
    )


def line_tables(integer: str) -> tuple[str, ...]:
    """Migration 20's columns and table (decision 0131), before the dialect's trigger that empties it.

    Each entry's message as pydantic-ai's JSON, in line order (SQLite: a rowid table,
    a history is one range read), and the line whose messages it holds whole; a
    conversation's messages go with its record.
    """
    return (
        "ALTER TABLE pa_conversations ADD COLUMN line_key TEXT",
        f"ALTER TABLE pa_conversations ADD COLUMN line_stamp {integer}",
        f"ALTER TABLE pa_conversations ADD COLUMN line_version {integer}",
        f"""CREATE TABLE pa_messages (
        conversation_id TEXT NOT NULL, key TEXT NOT NULL, pos {integer} NOT NULL,
        entry_id TEXT NOT NULL, message TEXT NOT NULL,
        PRIMARY KEY (conversation_id, key, pos))""",
    )


__all__ = ["line_tables", "tables"]
