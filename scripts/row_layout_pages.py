"""WAL pages a conversation row's b-tree alone writes per single-row append, by key layout (not a test).

Decision 0161 (issue 42 §1): SQLite's ``buffer_rows`` is a WITHOUT ROWID table keyed
by (buffer, position); an append that overflows its last leaf rebalances it with two
neighbours (4 pages), where a rowid table appended at its end gets SQLite's quick
balance (a new leaf and the parent). This counts, for the table alone, with
``bench/store.py``'s messages as flowmem stores them (the row's JSON, role, tokens,
call ids), the frames each append's commit writes, after a ``wal_checkpoint(TRUNCATE)``
as ``bench/wal_pages.py`` counts them:

- ``without_rowid``: today's table (``PRIMARY KEY (buffer_id, pos) WITHOUT ROWID``);
- ``rowid_key``: a rowid table whose rowid is ``buffer_id << 42 | pos`` (the candidate).

``--buffers N`` fills N buffers in one file and appends to them in turns (a file many
conversations write), 1 is ``bench/wal_pages.py``'s single buffer.

    .venv/bin/python scripts/row_layout_pages.py [--appends 400] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))
import siblings

from flowmem.core import prepare
from flowmem.store.editor import MINOR_BITS
from flowmem.store.rows import dump_json

LAYOUTS = {
    "without_rowid": "CREATE TABLE r (buffer_id INTEGER NOT NULL, pos INTEGER NOT NULL, "
    "role TEXT NOT NULL, body TEXT NOT NULL, tokens INTEGER, calls TEXT, "
    "PRIMARY KEY (buffer_id, pos)) WITHOUT ROWID",
    "rowid_key": "CREATE TABLE r (k INTEGER PRIMARY KEY, role TEXT NOT NULL, body TEXT NOT NULL, "
    "tokens INTEGER, calls TEXT)",
}


def insert(layout: str, conn: sqlite3.Connection, buffer: int, pos: int, row: dict[str, Any]) -> None:
    """One row as flowmem writes it, in ``layout``."""
    calls = row["metadata"].get("tool_calls")
    ids = json.dumps([c["id"] for c in calls], separators=(",", ":")) if calls else None
    body = dump_json(row, "message")
    if layout == "without_rowid":
        conn.execute("INSERT INTO r VALUES (?, ?, ?, ?, ?, ?)", (buffer, pos, row["role"], body, 12, ids))
    else:
        conn.execute("INSERT INTO r VALUES (?, ?, ?, ?, ?)", ((buffer << 42) | pos, row["role"], body, 12, ids))


def pages(layout: str, length: int, appends: int, buffers: int) -> float:
    """Mean frames per counted append of one row, ``buffers`` buffers of ``length`` rows each."""
    store = siblings.load("store")
    folder = Path(tempfile.mkdtemp(prefix="flowmem-layout-"))
    path = folder / "x.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(LAYOUTS[layout])
    rows = [prepare(store.turn(i), 1_755_000_000 + i)[0] for i in range(length + appends)]
    conn.execute("BEGIN")
    for i in range(length):
        for buffer in range(1, buffers + 1):
            insert(layout, conn, buffer, (i + 1) << MINOR_BITS, rows[i])
    conn.execute("COMMIT")
    side = sqlite3.connect(path, isolation_level=None)
    page = int(side.execute("PRAGMA page_size").fetchone()[0])
    counts = []
    for j in range(appends):
        i = length + j
        side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("BEGIN IMMEDIATE")
        insert(layout, conn, 1 + j % buffers, (i + 1) << MINOR_BITS, rows[i])
        conn.execute("COMMIT")
        size = (folder / "x.db-wal").stat().st_size
        counts.append((size - 32) // (page + 24) if size else 0)
    side.close()
    conn.close()
    return statistics.fmean(counts)


def main() -> None:
    """Print and write the pages per append of each layout at each length and buffer count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--json", default="bench/results/row_layout_pages.json")
    args = parser.parse_args()
    found = []
    for buffers, lengths in ((1, (100, 1000, 10000, 100000)), (8, (100, 1000, 10000))):
        for length in lengths:
            result = {layout: pages(layout, length, args.appends, buffers) for layout in LAYOUTS}
            found.append({"buffers": buffers, "length": length, "pages": result})
            shown = "  ".join(f"{k} {v:.2f}" for k, v in result.items())
            print(f"buffers {buffers} length {length:6d}: {shown}", flush=True)
    Path(args.json).write_text(json.dumps({"appends": args.appends, "runs": found}, indent=1))
    print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
