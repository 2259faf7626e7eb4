"""PostgreSQL's ADK session tables (a migration of their own) and their statements, by name.

``PostgresStore`` appends ``MIGRATION`` (and later ``KEYED``) to its migrations and ``SQL`` to its
statements; ``SqlAdkSessions`` runs them. The statements use psycopg's ``%s``; a
write locks the rows it reads (``FOR UPDATE``), so two writers of one session, or of
one app's or user's state, take turns.
"""

from __future__ import annotations

from flowmem.store.adk.statements import statements
from flowmem.store.adk.tables import KEYED, events_columns
from flowmem.store.headers import HEADS

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE adk_sessions (
        id TEXT PRIMARY KEY, app_name TEXT NOT NULL, user_id TEXT NOT NULL,
        state TEXT NOT NULL, revision BIGINT NOT NULL, last_event TEXT,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX adk_sessions_app ON adk_sessions (app_name, user_id, updated_at)",
    "CREATE TABLE adk_app_states (app_name TEXT PRIMARY KEY, state TEXT NOT NULL)",
    """CREATE TABLE adk_user_states (
        app_name TEXT NOT NULL, user_id TEXT NOT NULL, state TEXT NOT NULL,
        PRIMARY KEY (app_name, user_id))""",
    "CREATE INDEX adk_user_states_user ON adk_user_states (user_id)",
)

KEPT: tuple[str, ...] = (
    *events_columns("BIGINT"),
    """CREATE TABLE adk_events (
        session_id TEXT NOT NULL, seq BIGINT NOT NULL, ts DOUBLE PRECISION NOT NULL,
        event TEXT NOT NULL, PRIMARY KEY (session_id, seq))""",
    """CREATE FUNCTION adk_events_drop() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM adk_events WHERE session_id = OLD.id;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER adk_events_drop AFTER DELETE ON adk_sessions
        FOR EACH ROW EXECUTE FUNCTION adk_events_drop()""",
)
"""A later migration (decision 0133): each event as ADK's JSON, in the order stored, and the
events buffer they hold whole; a session stored before has no stamp and is read from its rows."""

SQL: dict[str, str] = statements("%s", " FOR UPDATE", ' COLLATE "C"', "id", HEADS)

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    10: MIGRATION,  # Google ADK sessions, app state and user state (decision 0053)
    16: KEYED,  # ADK sessions keyed by app, user and ADK id (issue 36, decision 0100)
    22: KEPT,  # each event as ADK's JSON beside its rows (issue 42 §4, decision 0133)
}
