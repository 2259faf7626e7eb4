"""Benchmark of FlowmemStore's semantic search (issue 40) against LangGraph's stores, side by side.

Run with ``python bench/vectors.py`` (not part of the tests). For each size in
``--sizes`` (default 1,000 and 10,000 items) of ``--dims`` dimensions (default 1,536),
each store is filled with the same items (``PutOp`` batches of 100, each item's
``text`` embedded at the one field) and then asked ``--runs`` queries (``limit=10``
over the whole prefix). The embedder is a table of seeded random vectors (the same
for every store, no model): what is measured is the store.

Stores: flowmem's ``FlowmemStore`` on ``memory://``, SQLite (a fresh file, flowmem's
durable default) and PostgreSQL (``--postgres URL``, else a throwaway durable server),
all scoring with the exact scan; LangGraph's ``InMemoryStore(index=…)`` (plain numpy
cosine); LangGraph's ``SqliteStore`` with sqlite-vec, which runs only where Python's
``sqlite3`` can load extensions (reported as not run otherwise: the project's Python
and Debian's cannot). Reported: put throughput (items/s, the whole fill), search
latency (ms, the minimum and the median of the runs), and each store's search cost
per 1,000 items at each size (the growth with the number of items). JSON beside the
table (``--json``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import numpy as np
import pgserver
import report_json
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from flowmem.integrations.langgraph import FlowmemStore
from flowmem.service import MemoryService
from flowmem.store import open_store

BATCH = 100
PREFIX = ("bench", "docs")


class TableEmbeddings(Embeddings):
    """``"item N"`` and ``"query N"`` embed as seeded random vectors: the same for every store."""

    def __init__(self, dims: int) -> None:
        self.dims = dims

    def _one(self, text: str) -> list[float]:
        kind, _, number = text.partition(" ")
        seed = int(number) * 2 + (kind == "query")
        values: list[float] = np.random.default_rng(seed).standard_normal(self.dims, dtype=np.float32).tolist()
        return values

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        return [self._one(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """The query's vector."""
        return self._one(text)


def sqlite_can_load_extensions() -> bool:
    """True when this Python's sqlite3 can load sqlite-vec (LangGraph's SqliteStore needs it)."""
    return hasattr(sqlite3.connect(":memory:"), "enable_load_extension")


def fill(store: BaseStore, count: int) -> float:
    """Put ``count`` items in batches; return the items per second."""
    started = time.perf_counter()
    for first in range(0, count, BATCH):
        store.batch([PutOp(PREFIX, f"k{i:07d}", {"text": f"item {i}"}) for i in range(first, min(first + BATCH, count))])
    return count / (time.perf_counter() - started)


def searches(store: BaseStore, runs: int) -> list[float]:
    """Each query's latency in ms (a different query each run)."""
    found = []
    for run in range(runs):
        started = time.perf_counter()
        hits = store.search(PREFIX, query=f"query {run}", limit=10)
        found.append((time.perf_counter() - started) * 1000)
        assert len(hits) == 10 and hits[0].score is not None
    return found


@contextmanager
def flowmem(url: str, index: dict[str, Any]) -> Iterator[BaseStore]:
    """A FlowmemStore over a flowmem store opened at ``url``."""
    store = open_store(url)
    try:
        yield FlowmemStore(MemoryService(store), index=index, space="bench")  # type: ignore[arg-type]
    finally:
        store.close()


@contextmanager
def in_memory(index: dict[str, Any]) -> Iterator[BaseStore]:
    """LangGraph's InMemoryStore with the index."""
    yield InMemoryStore(index=index)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="items stored, comma-separated")
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--runs", type=int, default=7, help="searches per store and size")
    parser.add_argument("--only", default="flowmem-memory,flowmem-sqlite,flowmem-postgres,inmemory,sqlitestore")
    report_json.add_arguments(parser, "vectors", "--sizes 200 --dims 64 --runs 3")
    pgserver.add_arguments(parser, "a PostgreSQL URL (default: start a throwaway durable one)")
    args = parser.parse_args(argv)
    sizes = [200] if args.quick else [int(s) for s in args.sizes.split(",")]
    dims = 64 if args.quick else args.dims
    runs = 3 if args.quick else args.runs
    chosen = args.only.split(",")
    index = {"dims": dims, "embed": TableEmbeddings(dims), "fields": ["text"]}
    meta = report_json.environment(["langgraph", "langgraph-checkpoint-sqlite", "numpy"])
    durability: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    folder = tempfile.mkdtemp(prefix="flowmem-vectors-")
    with ExitStack() as stack:
        pg_url = ""
        if "flowmem-postgres" in chosen:
            pg_url = stack.enter_context(pgserver.server(args.postgres))[0]
            durability["postgres"] = {"backend": "postgresql", **pgserver.postgres_durability(pg_url)}
        if "sqlitestore" in chosen and not sqlite_can_load_extensions():
            skipped["sqlitestore"] = (
                "not run: this Python's sqlite3 cannot load extensions (no enable_load_extension), "
                "so LangGraph's SqliteStore cannot load sqlite-vec"
            )
        for size in sizes:
            urls = {
                "flowmem-memory": "memory://",
                "flowmem-sqlite": f"sqlite:///{folder}/flowmem-{size}.db",
                "flowmem-postgres": f"{pg_url}?options=-csearch_path%3Dvectors_{size}",
            }
            if pg_url:
                import psycopg

                with psycopg.connect(pg_url, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS vectors_{size} CASCADE")
                    conn.execute(f"CREATE SCHEMA vectors_{size}")
            for name in chosen:
                if name not in (*urls, "inmemory"):
                    continue
                with flowmem(urls[name], index) if name in urls else in_memory(index) as store:
                    puts = fill(store, size)
                    searches(store, 1)  # warm: the first query pays the imports
                    times = searches(store, runs)
                found = {
                    "items": size,
                    "dims": dims,
                    "puts_per_s": round(puts, 1),
                    "search_ms_min": round(min(times), 2),
                    "search_ms_median": round(statistics.median(times), 2),
                    "search_ms_runs": [round(t, 2) for t in times],
                }
                results.setdefault(name, {})[str(size)] = found
                print(f"# {name} {size}: {found}", file=sys.stderr, flush=True)
        if "flowmem-sqlite" in chosen:
            durability["sqlite"] = report_json.flowmem_sqlite_durability(f"{folder}/flowmem-{sizes[-1]}.db", "FULL")
    shutil.rmtree(folder, ignore_errors=True)
    report_json.describe(meta, durability)
    print(f"\n{dims} dimensions; search: limit=10 over the whole prefix, min (median) of {runs} runs; puts: batches of {BATCH}")
    print("| store | items | put items/s | search ms | ms per 1,000 items |")
    print("|---|---:|---:|---:|---:|")
    for name, by_size in results.items():
        for items, found in by_size.items():
            per = found["search_ms_min"] / (int(items) / 1000)
            print(
                f"| {name} | {int(items):,} | {found['puts_per_s']:,.0f} | "
                f"{found['search_ms_min']:.2f} ({found['search_ms_median']:.2f}) | {per:.2f} |"
            )
    for name, why in skipped.items():
        print(f"| {name} | — | — | {why} | — |")
    report_json.write(
        args.json, "vectors", argv if argv is not None else sys.argv[1:], meta, durability, [],
        {"results": results, "not_run": skipped}, quick=args.quick,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
