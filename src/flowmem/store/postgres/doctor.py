"""``flowmem doctor`` on a PostgreSQL database: every flowmem table read whole, every text, every count.

Reading every row of every table makes PostgreSQL read every heap page: a damaged
page raises ``data_corrupted`` (XX001) there. Every JSON text flowmem stores is
decoded, and every buffer's row count compared with the rows it holds
(``flowmem.store.doctor``). Read only.
Issue 38 §5.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from flowmem.store.doctor import COUNTS, TEXTS, miscounted, not_json
from flowmem.store.headers import TAIL

# every buffer's count as its readers derive it, the header's and its tail's (decision 0195)
_COUNTS = COUNTS.replace(
    "b.count, ", "b.count + (SELECT t.n FROM (" + TAIL.format(h="b") + ") AS t), ", 1
)
if _COUNTS == COUNTS:  # pragma: no cover - the shared statement changed
    raise RuntimeError("the doctor's counts no longer read b.count")

TABLES = (
    "records", "buffers", "buffer_rows", "buffer_call_ids", "buffer_calls", "buffer_answers", "sessions",
    "transcript_seq", "transcripts", "tokens", "idempotency_keys", "deleted_sessions",
    "buffer_evicted", "user_usage",
)  # fmt: skip


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
                    keys, column = TEXTS[table]
                    rows = conn.execute(f"SELECT {keys}, {column} FROM {table}")
                    findings += not_json(table, keys, column, rows, json.loads)
        except psycopg.Error as exc:
            findings.append(f"{table} cannot be read whole: {str(exc).strip()}")
    if {"buffers", "buffer_rows"} <= present:
        try:
            with conn.transaction():
                findings += miscounted(conn.execute(_COUNTS))
        except psycopg.Error as exc:
            findings.append(f"the buffers' counts cannot be read: {str(exc).strip()}")
    return findings
