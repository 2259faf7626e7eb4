"""Write ``written-by-v3.json``: the tables a flowmem of schema version 3 wrote (decision 0032).

Run once with the *released* flowmem on the path (it was run with main at 3580432,
before decision 0032), never with the code under test:

    PYTHONPATH=/path/to/old/src python tests/store/data/write_v3_fixture.py OUT.json

It writes ``session``-scope data the way the service and the adapters did, with no
session record (a buffer of ``s-weather``, a record of ``s-notes``), a session made
by ``POST /v1/sessions`` with its own buffer, and ``user``-scope data; then dumps
every table as ``{table: {"columns": [...], "rows": [...]}}``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import SessionRecord, open_store

TABLES = (
    "flowmem_schema", "records", "buffers", "buffer_rows", "buffer_calls", "buffer_answers",
    "sessions", "transcript_seq", "transcripts",
)  # fmt: skip


def main(out: str) -> None:
    """Write the fixture to ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "old.db")
        store = open_store(f"sqlite:///{path}")
        memory = MemoryService(store, clock=lambda: 1_755_000_000.0)
        weather = ExecutionContext(session_id="s-weather", user_id="alice")
        memory.append("session", "chat_history", [{"role": "user", "content": "weather?"}], weather)
        memory.write("session", "topic", "Lisbon", ExecutionContext(session_id="s-notes"))
        memory.write("user", "prefs", {"units": "metric"}, weather)
        sid = "00000000-0000-0000-0000-00000000a003"
        store.create_session(
            SessionRecord(id=sid, name="made", owner="alice", created_at=1.0, updated_at=1.0)
        )
        made = ExecutionContext(session_id=sid, user_id="alice")
        memory.append("session", "chat_history", [{"role": "user", "content": "hi"}], made)
        store.close()
        conn = sqlite3.connect(path)
        dump = {}
        for table in TABLES:
            cursor = conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2")
            columns = [d[0] for d in cursor.description]
            dump[table] = {"columns": columns, "rows": [list(r) for r in cursor.fetchall()]}
        conn.close()
    Path(out).write_text(json.dumps(dump, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
