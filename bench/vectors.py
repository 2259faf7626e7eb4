"""Benchmark of FlowmemStore's semantic search (issue 40) against LangGraph's stores, side by side.

Run with ``python bench/vectors.py`` (not part of the tests). For each size in
``--sizes`` (default 10,000 and 100,000 items) of ``--dims`` dimensions (default 1,536),
each store is filled with the same items (``PutOp`` batches of 100, each item's
``text`` embedded at the one field) and then asked ``--runs`` queries (``limit=10``
over the whole prefix), after one warm query. The embedder looks up a table of
seeded random vectors made once per size (the same rows for every store, no model):
what is measured is the store. This is repeated ``--rounds`` times, each round on a
fresh store (a fresh file, a fresh PostgreSQL schema) and with the stores' order
rotated by one.

Stores: flowmem's ``FlowmemStore`` on ``memory://``, SQLite (flowmem's durable
default) and PostgreSQL (``--postgres URL``, else a throwaway durable server), all
scoring with the exact scan; LangGraph's ``InMemoryStore(index=…)`` (plain numpy
cosine); LangGraph's ``SqliteStore`` with sqlite-vec. The project's Python cannot
load SQLite extensions, so ``SqliteStore`` runs in a subprocess under a private venv
made (once, then reused from the cache folder) from ``--sqlite-vec-python`` (default
Debian's ``/usr/bin/python3``, which can) with the project's versions of LangGraph,
sqlite-vec and numpy from the registry; the vectors go to it in ``.npy`` files.
``--no-sqlite-vec`` skips it; when the venv cannot be made (no network), the run says
why in its table and JSON and goes on without it. Reported: put throughput (items/s,
the whole fill: the best and the median of the rounds), search latency (ms, the
minimum and the median of every query of every round), and each store's search
cost per 1,000 items. JSON beside the table (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
# first: the pgserver wheel (PostgreSQL binaries for the tests) is also named pgserver
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import numpy as np
import pgserver
import report_json
import sqlite_vec_venv
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from flowmem.integrations.langgraph import FlowmemStore
from flowmem.service import MemoryService
from flowmem.store import open_store
from flowmem.store.vectors.cache import SnapshotCache
from flowmem.store.vectorstores import vectors_of

BATCH = 100
PREFIX = ("bench", "docs")


class TableEmbeddings(Embeddings):
    """``"item N"`` is row N of the items' table, ``"query N"`` row N of the queries': the same for every store."""

    def __init__(self, items: np.ndarray, queries: np.ndarray) -> None:
        self.items, self.queries = items, queries

    def _one(self, text: str) -> list[float]:
        kind, _, number = text.partition(" ")
        values: list[float] = (self.queries if kind == "query" else self.items)[int(number)].tolist()
        return values

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        return [self._one(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """The query's vector."""
        return self._one(text)


def tables(size: int, dims: int, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """The items' and the queries' vectors (seeded by the size: the same in every run of the bench)."""
    rng = np.random.default_rng(size)
    return rng.standard_normal((size, dims), dtype=np.float32), rng.standard_normal((runs + 1, dims), dtype=np.float32)


def fill(store: BaseStore, count: int) -> float:
    """Put ``count`` items in batches; return the items per second."""
    started = time.perf_counter()
    for first in range(0, count, BATCH):
        store.batch([PutOp(PREFIX, f"k{i:07d}", {"text": f"item {i}"}) for i in range(first, min(first + BATCH, count))])
    return count / (time.perf_counter() - started)


def searches(store: BaseStore, runs: int) -> list[float]:
    """Each query's latency in ms, the first one (cold: flowmem's cache loads there) first, then ``runs`` more."""
    found = []
    for run in range(runs + 1):
        started = time.perf_counter()
        hits = store.search(PREFIX, query=f"query {run}", limit=10)
        took = (time.perf_counter() - started) * 1000
        assert len(hits) == 10 and hits[0].score is not None
        found.append(took)
    return found


@contextmanager
def cache_off(store: Any) -> Iterator[None]:
    """flowmem's exact scan page by page: the store's vector cache turned off (FLOWMEM_VECTOR_CACHE_MB=0)."""
    vectors = vectors_of(store)
    kept = vectors.cache  # type: ignore[attr-defined]
    vectors.cache = SnapshotCache(0)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        vectors.cache = kept  # type: ignore[attr-defined]


@contextmanager
def flowmem(url: str, index: dict[str, Any]) -> Iterator[tuple[BaseStore, Any]]:
    """A FlowmemStore over a flowmem store opened at ``url``, and that store."""
    store = open_store(url)
    try:
        yield FlowmemStore(MemoryService(store), index=index, space="bench"), store  # type: ignore[arg-type]
    finally:
        store.close()


@contextmanager
def in_memory(index: dict[str, Any]) -> Iterator[BaseStore]:
    """LangGraph's InMemoryStore with the index."""
    yield InMemoryStore(index=index)  # type: ignore[arg-type]


def sqlitestore(python: str, folder: str, size: int, runs: int) -> dict[str, Any]:
    """One round of LangGraph's SqliteStore + sqlite-vec in its venv, on a fresh file: its child's JSON."""
    path = os.path.join(folder, f"sqlitestore-{size}.db")
    for leftover in (path, path + "-journal", path + "-wal"):
        if os.path.exists(leftover):
            os.remove(leftover)
    command = [
        python, str(sqlite_vec_venv.CHILD), os.path.join(folder, f"items-{size}.npy"),
        os.path.join(folder, f"queries-{size}.npy"), path, str(runs), str(BATCH),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=7200, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"SqliteStore's run failed: {done.stderr.strip()[-2000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    os.remove(path)
    return found


def child_durability(child: dict[str, Any]) -> dict[str, Any]:
    """The durability entry of SqliteStore's file, as its child read it on the store's own connection."""
    journal, synchronous = child["journal_mode"], child["synchronous"]
    durable = synchronous in ("FULL", "EXTRA") and journal not in ("off", "memory")
    text = f"journal_mode={journal}, synchronous={synchronous} (LangGraph SqliteStore's connection; sqlite-vec {child['sqlite_vec']}, Python {child['python']}, SQLite {child['sqlite_version']})"
    return {
        "backend": "sqlite", "sqlite_version": child["sqlite_version"], "journal_mode": journal,
        "synchronous": synchronous, "synchronous_source": "PRAGMA on the system's connection", "durable": durable,
        "label": f"SQLite: {text}" if durable else f"SQLite: NOT DURABLE on power loss: {text}",
    }


def postgres_schema(pg_url: str, schema: str) -> str:
    """A fresh schema on the server (dropped first): the URL that uses it."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{pg_url}?options=-csearch_path%3D{schema}"


def one_round(
    name: str, size: int, rnd: int, index: dict[str, Any], folder: str, pg_url: str, runs: int
) -> dict[str, tuple[float, list[float]]]:
    """One store's fill and searches on a fresh store: puts per second and the searches' ms, by store name.

    flowmem's SQL stores search twice on the same fill: with the cache (their name)
    and with it off (``<name>-scan``: page by page, each search reading every vector).
    """
    if name == "inmemory":
        with in_memory(index) as plain:
            return {name: (fill(plain, size), searches(plain, runs))}
    if name == "flowmem-memory":
        url = "memory://"
    elif name == "flowmem-sqlite":
        url = f"sqlite:///{folder}/flowmem-{size}-{rnd}.db"
    else:
        url = postgres_schema(pg_url, f"vectors_{size}_{rnd}")
    with flowmem(url, index) as (store, backing):
        found = {name: (fill(store, size), searches(store, runs))}
        if name != "flowmem-memory":
            with cache_off(backing):
                found[f"{name}-scan"] = (found[name][0], searches(store, runs))
    if name == "flowmem-sqlite" and rnd:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{folder}/flowmem-{size}-{rnd}.db{suffix}"):
                os.remove(f"{folder}/flowmem-{size}-{rnd}.db{suffix}")
    if name == "flowmem-postgres":
        postgres_schema(pg_url, f"vectors_{size}_{rnd}")  # emptied: the next round's server is not fuller
    return found


def summary(size: int, dims: int, puts: list[float], times: list[float], firsts: list[float]) -> dict[str, Any]:
    """One store's entry at one size: best and median puts, minimum and median search, each round's first search."""
    return {
        "items": size,
        "dims": dims,
        "rounds": len(puts),
        "puts_per_s": round(max(puts), 1),
        "puts_per_s_median": round(statistics.median(puts), 1),
        "puts_per_s_rounds": [round(p, 1) for p in puts],
        "search_ms_min": round(min(times), 2),
        "search_ms_median": round(statistics.median(times), 2),
        "search_ms_runs": [round(t, 2) for t in times],
        "first_search_ms_min": round(min(firsts), 2),
        "first_search_ms_rounds": [round(t, 2) for t in firsts],
    }


def targets_of(results: dict[str, dict[str, dict[str, Any]]], sizes: list[int]) -> list[dict[str, Any]]:
    """Issue 40's target: flowmem's exact scan (each backend) at least as fast as SqliteStore's, at each size."""
    found = []
    for size in sizes:
        theirs = results.get("sqlitestore", {}).get(str(size))
        for name in ("flowmem-memory", "flowmem-sqlite", "flowmem-postgres", "flowmem-sqlite-scan", "flowmem-postgres-scan"):
            ours = results.get(name, {}).get(str(size))
            if ours is None:
                continue
            met = None if theirs is None else ours["search_ms_min"] <= theirs["search_ms_min"]
            found.append({
                "label": f"{name} search at {size:,} items no slower than SqliteStore + sqlite-vec (min ms)",
                "value": ours["search_ms_min"], "bound": None if theirs is None else theirs["search_ms_min"],
                "met": met,
            })
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="items stored, comma-separated")
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--runs", type=int, default=7, help="searches per store, size and round")
    parser.add_argument("--rounds", type=int, default=3, help="fresh fills per store and size, the order rotated")
    parser.add_argument("--only", default="flowmem-memory,flowmem-sqlite,flowmem-postgres,inmemory,sqlitestore")
    parser.add_argument("--no-sqlite-vec", action="store_true", help="skip SqliteStore + sqlite-vec (no venv made)")
    parser.add_argument("--sqlite-vec-python", default="/usr/bin/python3", help="a Python whose sqlite3 loads extensions")
    report_json.add_arguments(parser, "vectors", "--sizes 200 --dims 64 --runs 3 --rounds 2")
    pgserver.add_arguments(parser, "a PostgreSQL URL (default: start a throwaway durable one)")
    args = parser.parse_args(argv)
    sizes = [200] if args.quick else [int(s) for s in args.sizes.split(",")]
    dims = 64 if args.quick else args.dims
    runs = 3 if args.quick else args.runs
    rounds = 2 if args.quick else args.rounds
    chosen = args.only.split(",")
    meta = report_json.environment(["langgraph", "langgraph-checkpoint-sqlite", "numpy"])
    durability: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    vec_python = None
    if "sqlitestore" in chosen:
        if args.no_sqlite_vec:
            skipped["sqlitestore"] = "not run: --no-sqlite-vec"
        else:
            vec_python, how = sqlite_vec_venv.venv_python(args.sqlite_vec_python)
            print(f"# SqliteStore + sqlite-vec: {how}", file=sys.stderr, flush=True)
            if vec_python is None:
                skipped["sqlitestore"] = f"not run: {how}"
            else:
                meta["sqlitestore_venv"] = how
        if vec_python is None:
            chosen.remove("sqlitestore")
    runs_of: dict[str, dict[int, tuple[list[float], list[float], list[float]]]] = {}
    folder = tempfile.mkdtemp(prefix="flowmem-vectors-")
    with ExitStack() as stack:
        pg_url = ""
        if "flowmem-postgres" in chosen:
            pg_url = stack.enter_context(pgserver.server(args.postgres))[0]
            durability["postgres"] = {"backend": "postgresql", **pgserver.postgres_durability(pg_url)}
        for size in sizes:
            items, queries = tables(size, dims, runs)
            np.save(os.path.join(folder, f"items-{size}.npy"), items)
            np.save(os.path.join(folder, f"queries-{size}.npy"), queries)
            index = {"dims": dims, "embed": TableEmbeddings(items, queries), "fields": ["text"]}
            for rnd in range(rounds):
                shift = rnd % len(chosen)
                for name in chosen[shift:] + chosen[:shift]:
                    if name == "sqlitestore":
                        assert vec_python is not None
                        child = sqlitestore(vec_python, folder, size, runs)
                        done = {name: (child["puts_per_s"], [child["first_search_ms"], *child["search_ms"]])}
                        durability["sqlitestore"] = child_durability(child)
                    else:
                        done = one_round(name, size, rnd, index, folder, pg_url, runs)
                    for store_name, (puts, times) in done.items():
                        got = runs_of.setdefault(store_name, {}).setdefault(size, ([], [], []))
                        got[0].append(puts)
                        got[1].extend(times[1:])
                        got[2].append(times[0])
                        print(
                            f"# {store_name} {size} round {rnd + 1}: {puts:,.0f} puts/s, first search "
                            f"{times[0]:.2f} ms, then min {min(times[1:]):.2f} ms", file=sys.stderr, flush=True,
                        )
        if "flowmem-sqlite" in chosen:
            durability["sqlite"] = report_json.flowmem_sqlite_durability(f"{folder}/flowmem-{sizes[-1]}-0.db", "FULL")
    shutil.rmtree(folder, ignore_errors=True)
    results = {name: {str(size): summary(size, dims, *got) for size, got in by.items()} for name, by in runs_of.items()}
    targets = targets_of(results, sizes)
    report_json.describe(meta, durability)
    print(
        f"\n{dims} dimensions; search: limit=10 over the whole prefix, min (median) of {runs} queries x {rounds} rounds; "
        f"puts: batches of {BATCH}, best (median) of {rounds} rounds; a fresh store each round, the order rotated"
    )
    print("| store | items | put items/s | search ms | first search ms | ms per 1,000 items |")
    print("|---|---:|---:|---:|---:|---:|")
    for size in sizes:
        for name, by_size in results.items():
            found = by_size.get(str(size))
            if found is None:
                continue
            per = found["search_ms_min"] / (size / 1000)
            print(
                f"| {name} | {size:,} | {found['puts_per_s']:,.0f} ({found['puts_per_s_median']:,.0f}) | "
                f"{found['search_ms_min']:.2f} ({found['search_ms_median']:.2f}) | {found['first_search_ms_min']:.2f} | {per:.2f} |"
            )
    for name, why in skipped.items():
        print(f"| {name} | — | — | {why} | — | — |")
    for target in targets:
        verdict = {True: "met", False: "NOT met", None: "not judged (SqliteStore not run)"}[target["met"]]
        print(f"target: {target['label']}: {target['value']} ms vs {target['bound']}: {verdict}")
    report_json.write(
        args.json, "vectors", argv if argv is not None else sys.argv[1:], meta, durability, targets,
        {"results": results, "not_run": skipped}, quick=args.quick,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
