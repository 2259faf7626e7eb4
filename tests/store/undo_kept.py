"""Undo the migrations that keep adapters' messages and events as JSON (decisions 0131, 0133).

The upgrade tests take a database back to an older schema before opening it again;
these give back what conversations' migration 20 and ADK's (SQLite 22, PostgreSQL 22)
added. Each runs on an open DB-API connection (sqlite3, or psycopg in autocommit) and
does nothing when its migration is not there.
"""

from __future__ import annotations

from typing import Any


def _has_table(conn: Any, sqlite: bool, table: str) -> bool:
    if sqlite:
        query = f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
    else:
        query = f"SELECT COUNT(*) FROM pg_tables WHERE tablename = '{table}' AND schemaname = current_schema()"
    return bool(conn.execute(query).fetchone()[0])


def _undo(conn: Any, sqlite: bool, table: str, owner: str, trigger: str, columns: tuple[str, ...]) -> None:
    if not _has_table(conn, sqlite, table):
        return
    if sqlite:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    else:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {owner}")
        conn.execute(f"DROP FUNCTION IF EXISTS {trigger}()")
    conn.execute(f"DROP TABLE {table}")
    for column in columns:
        conn.execute(f"ALTER TABLE {owner} DROP COLUMN {column}")


def undo_kept_messages(conn: Any, sqlite: bool) -> None:
    """Undo conversations' migration 20: ``pa_messages``, its trigger, the records' line stamp."""
    _undo(conn, sqlite, "pa_messages", "pa_conversations", "pa_messages_drop", ("line_key", "line_stamp", "line_version"))


def undo_kept_events(conn: Any, sqlite: bool) -> None:
    """Undo ADK's events migration: ``adk_events``, its trigger, the sessions' events stamp."""
    _undo(conn, sqlite, "adk_events", "adk_sessions", "adk_events_drop", ("events_stamp", "events_version"))


def undo_kept(conn: Any, sqlite: bool) -> None:
    """Undo both (the newer first)."""
    undo_kept_events(conn, sqlite)
    undo_kept_messages(conn, sqlite)
