"""PostgreSQL's checkpoint tables (migration 7) and their statements, by name.

``PostgresStore`` appends ``MIGRATION`` to its migrations and ``SQL`` to its
statements; ``SqlCheckpoints`` runs them. The statements use psycopg's ``%s``.
"""

from __future__ import annotations

from flowmem.store.checkpoints.statements import statements
from flowmem.store.headers import HEADS

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE lg_checkpoints (
        thread_id TEXT NOT NULL, ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
        parent_id TEXT, type TEXT NOT NULL, checkpoint BYTEA NOT NULL,
        metadata_type TEXT NOT NULL, metadata BYTEA NOT NULL, run_id TEXT,
        versions TEXT NOT NULL,
        PRIMARY KEY (thread_id, ns, checkpoint_id))""",
    "CREATE INDEX lg_checkpoints_run ON lg_checkpoints (run_id) WHERE run_id IS NOT NULL",
    """CREATE TABLE lg_blobs (
        thread_id TEXT NOT NULL, ns TEXT NOT NULL, channel TEXT NOT NULL,
        version TEXT NOT NULL, type TEXT NOT NULL, blob BYTEA NOT NULL,
        PRIMARY KEY (thread_id, ns, channel, version))""",
    """CREATE TABLE lg_writes (
        thread_id TEXT NOT NULL, ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL,
        type TEXT NOT NULL, blob BYTEA NOT NULL, task_path TEXT NOT NULL,
        PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, idx))""",
)

SQL: dict[str, str] = statements("%s", HEADS)

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    7: MIGRATION,  # LangGraph checkpoints, channel values and pending writes (decision 0040)
}
