"""``flowmem doctor`` on a PostgreSQL database: every flowmem table read whole, every text, every count.

Reading every row of every table makes PostgreSQL read every heap page: a damaged
page raises ``data_corrupted`` (XX001) there. Every JSON text flowmem stores is
decoded, and every buffer's row count compared with the rows it holds. Read only.
Issue 38 §5.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

MAX_FINDINGS = 50
TABLES = (
    "records", "buffers", "buffer_rows", "buffer_calls", "buffer_answers", "sessions",
    "transcript_seq", "transcripts", "tokens", "idempotency_keys", "deleted_sessions",
    "buffer_evicted", "user_usage",
)  # fmt: skip
TEXTS = {
    "records": ("scope, scope_id, key", "value"),
    "buffer_rows": ("buffer_id, pos", "body"),
    "sessions": ("id", "metadata"),
    "transcripts": ("session_id, seq", "body"),
    "tokens": ("id", "permissions"),
}
COUNTS = (
    "SELECT b.id, b.scope, b.key, b.count, "
    "(SELECT count(*) FROM buffer_rows r WHERE r.buffer_id = b.id) FROM buffers b"
)


def check_connection(conn: psycopg.Connection[Any]) -> list[str]:
    """What is damaged in the flowmem tables ``conn`` sees (an empty list: nothing found)."""
    findings: list[str] = []
    present = {
        name for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    }  # fmt: skip
    for table in TABLES:
        if table not in present:
            continue
        try:
            with conn.transaction():
                conn.execute(f"SELECT count(*) FROM (SELECT * FROM {table}) t").fetchone()
                if table in TEXTS:
                    findings += _texts(conn, table, *TEXTS[table])
        except psycopg.Error as exc:
            findings.append(f"{table} cannot be read whole: {str(exc).strip()}")
    if {"buffers", "buffer_rows"} <= present:
        try:
            with conn.transaction():
                findings += [
                    f"buffer {scope}/{key} (id {buffer_id}) counts {count} rows but holds {held}"
                    for buffer_id, scope, key, count, held in conn.execute(COUNTS)
                    if count != held
                ][:MAX_FINDINGS]
        except psycopg.Error as exc:
            findings.append(f"the buffers' counts cannot be read: {str(exc).strip()}")
    return findings


def _texts(conn: psycopg.Connection[Any], table: str, keys: str, column: str) -> list[str]:
    found: list[str] = []
    for row in conn.execute(f"SELECT {keys}, {column} FROM {table}"):
        *key, text = row
        try:
            json.loads(text)
        except ValueError:
            if len(found) < MAX_FINDINGS:
                where = ", ".join(f"{n.strip()}={v!r}" for n, v in zip(keys.split(","), key, strict=True))
                found.append(f"{table} ({where}): {column} is not JSON")
    return found
