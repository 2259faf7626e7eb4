"""The ADK tables' statements both dialects spell the same way (but for the integer type).

``adk.sqlite`` and ``adk.postgres`` use them in their migrations 16 and 22; the text is
the released migrations' to the byte (``tests/store/test_migrations.py`` pins it).
"""

from __future__ import annotations

KEYED: tuple[str, ...] = (
    "ALTER TABLE adk_sessions ADD COLUMN adk_id TEXT",
    "UPDATE adk_sessions SET adk_id = id",
    "CREATE UNIQUE INDEX adk_sessions_key ON adk_sessions (app_name, user_id, adk_id)",
)
"""A later migration (decision 0100): sessions keyed as ADK keys them, by app, user and ADK
id; a session stored before keeps its id as its ADK id."""


def events_columns(integer: str) -> tuple[str, ...]:
    """Migration 22's first statements (decision 0133): the stamp and version of the events buffer a session's events hold whole."""
    return (
        f"ALTER TABLE adk_sessions ADD COLUMN events_stamp {integer}",
        f"ALTER TABLE adk_sessions ADD COLUMN events_version {integer}",
    )


__all__ = ["KEYED", "events_columns"]
