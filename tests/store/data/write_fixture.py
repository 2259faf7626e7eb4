"""Write ``written-by-v2.json``: the tables a flowmem of schema version 2 wrote.

Run once with the *released* flowmem on the path (it was run with main at dce58e4,
before decision 0021), never with the code under test:

    PYTHONPATH=/path/to/old/src python tests/store/data/write_fixture.py OUT.json

It appends a scripted history (text, tool calls, a healed placeholder replaced by a
real result, an unknown top-level key kept under metadata), stores a record and a
transcript row, then dumps every table as ``{table: {"columns": [...], "rows": [...]}}``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

from flowmem.core import prepare
from flowmem.store import Address, SessionRecord, open_store

TABLES = (
    "flowmem_schema", "records", "buffers", "buffer_rows", "buffer_calls", "buffer_answers",
    "sessions", "transcript_seq", "transcripts",
)  # fmt: skip


def main(out: str) -> None:
    """Write the fixture to ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "old.db")
        store = open_store(f"sqlite:///{path}")
        chat = Address("global", "", "chat")
        history = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather in Paris and Rome?", "name": "ann"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                    {"tool_call_id": "c2", "name": "w", "args": {"city": "Rome"}},
                ],
            },
            {"role": "tool", "content": "18C", "tool_call_id": "c1", "is_error": False},
            {"role": "user", "content": "and?"},  # heals c2
            {"role": "tool", "content": "21C", "tool_call_id": "c2"},  # replaces the placeholder
            {"role": "assistant", "content": "Paris 18C, Rome 21C."},
        ]
        for index, message in enumerate(history):
            store.append(chat, prepare(message, 1_755_000_000 + index))
        store.put_record(Address("user", "7", "prefs"), {"units": "metric"}, None)
        sid = "00000000-0000-0000-0000-00000000a001"
        store.create_session(SessionRecord(id=sid, name="old", owner="7", created_at=1.0, updated_at=1.0))
        store.add_transcript(sid, {"role": "user", "content": "hi", "metadata": {}})
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
