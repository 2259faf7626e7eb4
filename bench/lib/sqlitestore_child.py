"""LangGraph's ``SqliteStore`` with sqlite-vec, timed: run by bench/vectors.py under its private venv.

It imports no flowmem (the venv has LangGraph, sqlite-vec and numpy only). Usage:
``python sqlitestore_child.py ITEMS.npy QUERIES.npy DB_PATH RUNS BATCH``: the items'
and the queries' vectors are the bench's own (the same for every store), ``DB_PATH``
a fresh file. Prints one JSON object: the put throughput, each search's latency (ms,
after one warm query, whose own is ``first_search_ms``), and the durability read from the store's own connection.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import time

import numpy as np
from langgraph.store.base import PutOp
from langgraph.store.sqlite import SqliteStore

PREFIX = ("bench", "docs")
WORD = re.compile(r"(item|query) (\d+)")
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def main(argv: list[str]) -> int:
    items_path, queries_path, db_path, runs_text, batch_text = argv
    items = np.load(items_path, mmap_mode="r")
    queries = np.load(queries_path, mmap_mode="r")
    runs, batch = int(runs_text), int(batch_text)

    def embed(texts: list[str]) -> list[list[float]]:
        """``item N`` is row N of the items, ``query N`` row N of the queries.

        SqliteStore hands the field's text on as a JSON fragment (``'"item 0"}'``),
        so the kind and the number are found in it.
        """
        out = []
        for text in texts:
            found = WORD.search(text)
            assert found is not None, text
            out.append((queries if found[1] == "query" else items)[int(found[2])].tolist())
        return out

    count, dims = items.shape
    index = {"dims": dims, "embed": embed, "fields": ["text"]}
    conn = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    try:
        store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
        store.setup()
        started = time.perf_counter()
        for first in range(0, count, batch):
            store.batch([PutOp(PREFIX, f"k{i:07d}", {"text": f"item {i}"}) for i in range(first, min(first + batch, count))])
        puts = count / (time.perf_counter() - started)
        found, first = [], 0.0
        for run in range(runs + 1):
            started = time.perf_counter()
            hits = store.search(PREFIX, query=f"query {run}", limit=10)
            took = (time.perf_counter() - started) * 1000
            assert len(hits) == 10 and hits[0].score is not None, hits
            if run:  # the first query is the warm one, reported on its own
                found.append(took)
            else:
                first = took
        journal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        synchronous = SYNCHRONOUS.get(int(conn.execute("PRAGMA synchronous").fetchone()[0]), "unknown")
        vec = str(conn.execute("SELECT vec_version()").fetchone()[0])
    finally:
        conn.close()
    print(json.dumps({
        "puts_per_s": puts, "search_ms": found, "first_search_ms": first, "journal_mode": journal,
        "synchronous": synchronous, "sqlite_version": sqlite3.sqlite_version,
        "sqlite_vec": vec, "python": sys.version.split()[0],
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
