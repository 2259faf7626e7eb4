"""Semantic search by engine, side by side (issue 40): the exact scan against pgvector and sqlite-vec.

One process, the same random float32 vectors (one per item, ``--dims``), searched
``--runs`` times per engine in rotated turns (min and median reported), top 10:

- PostgreSQL (the ``pgserver`` wheel's PostgreSQL 16 + pgvector 0.6.2, started here
  as tests/conftest.py does): flowmem's exact scan (``bytea`` pages scored with
  numpy, ``scoring.Ranking``), pgvector's exact ranking in SQL (``PgVectors.nearest``)
  and its HNSW index (``ann``); puts per second with and without pgvector's copy
  (two databases of one server);
- SQLite: flowmem's exact scan, and sqlite-vec's ``vec_distance_cosine`` in C over the
  same ``record_vectors`` rows on a second, read-only connection through ``apsw``
  (the project's Python cannot load extensions; decision 0127). Skipped with the
  reason when ``apsw`` or ``sqlite_vec`` cannot be imported.

``python bench/vector_engines.py --items 10000 --dims 1536 --runs 7``; JSON to
``bench/results/vector_engines.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from flowmem.store import Address, open_store
from flowmem.store.listing import successor
from flowmem.store.vectors import Nearest, Search, Space, Vector
from flowmem.store.vectors.pgvector import AnnIndex, PgVectors
from flowmem.store.vectors.scoring import Ranking
from flowmem.store.vectors.sql import SqlVectors
from flowmem.store.vectorstores import vectors_of

COLLECTION = "bench"
KEEP = 10


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def pgserver_postgres() -> Iterator[str]:
    """pgserver's PostgreSQL in a temporary directory (as ``postgres`` under root): its URL."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        raise SystemExit("the pgserver wheel is missing (pip install -e '.[dev]')")
    bindir = Path(spec.origin).parent / "pginstall" / "bin"
    base = Path(tempfile.mkdtemp(prefix="flowmem-bench-pg-"))
    if os.geteuid() == 0:
        shutil.chown(base, user="postgres", group="postgres")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(base / "data"), "-A", "trust", "-U",
                                 "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]), check=True, capture_output=True)
    subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(base / "data"), "-l", str(base / "log"), "-w",
                                 "-o", f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c shared_buffers=512MB",
                                 "start"]), check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(base / "data"), "-m", "fast", "stop"]),
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def fill(vectors: SqlVectors, data: np.ndarray, space: Space) -> float:
    """Put every item (one transaction each): items per second."""
    start = time.perf_counter()
    for i, row in enumerate(data):
        vectors.put(Address("user", "u1", f"k{i:06d}"), f'{{"i": {i}}}', None, COLLECTION, space,
                    [Vector("$", 0, row.astype("<f4").tobytes())])
    return len(data) / (time.perf_counter() - start)


def exact_scan(vectors: SqlVectors, space: Space, query: np.ndarray) -> list[str]:
    """flowmem's exact scan: pages of vectors scored with numpy."""
    ranking = Ranking(query.tolist(), "cosine", KEEP)
    start = ""
    while True:
        page, more = vectors.scan(Search("user", "u1", "", 0.0, COLLECTION, space), start=start, values=True)
        ranking.feed([r.key for r in page], [r.data for r in page], [r.text for r in page])
        if not more or not page:
            return [key for key, _, _ in ranking.best()]
        start = successor(page[-1].key)


def sqlite_vec_search(path: Path) -> tuple[Callable[[np.ndarray], list[str]] | None, str]:
    """sqlite-vec's C scoring over the same rows, on an apsw connection; None and why when it cannot load."""
    try:
        import apsw
        import sqlite_vec
    except ImportError as missing:
        return None, f"not measured: {missing}"
    conn = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    sql = """SELECT v.key, MIN(COALESCE(vec_distance_cosine(v.vec, ?), 1.0)) AS d FROM record_vectors v
        WHERE v.scope = 'user' AND v.scope_id = 'u1' AND v.key >= '' AND EXISTS (SELECT 1 FROM records r
            WHERE r.scope = v.scope AND r.scope_id = v.scope_id AND r.key = v.key
            AND (r.expires_at IS NULL OR r.expires_at > 0))
        GROUP BY v.key ORDER BY d, v.key LIMIT 10"""

    def search(query: np.ndarray) -> list[str]:
        return [str(key) for key, _ in conn.execute(sql, (query.astype("<f4").tobytes(),))]

    return search, f"apsw {apsw.apsw_version()}, SQLite {apsw.sqlite_lib_version()}, sqlite-vec {sqlite_vec.__version__}"


def measure(
    engines: dict[str, Callable[[np.ndarray], list[str]]],
    queries: list[np.ndarray],
    before: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Each engine's search times (ms), in turns rotated per query; the answers' agreement with the first.

    ``before(turn)``: run (untimed) before each engine's search of a turn.
    """
    times: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    agree: dict[str, int] = dict.fromkeys(names, 0)
    for turn, query in enumerate(queries):
        order = names[turn % len(names):] + names[: turn % len(names)]
        answers: dict[str, list[str]] = {}
        for step, name in enumerate(order):
            if before is not None:
                before(turn * len(order) + step)
            start = time.perf_counter()
            answers[name] = engines[name](query)
            times[name].append((time.perf_counter() - start) * 1000)
        for name in names:
            agree[name] += len(set(answers[name]) & set(answers[names[0]]))
    return {
        name: {"min_ms": min(t), "median_ms": statistics.median(t),
               "recall_vs_exact": agree[name] / (KEEP * len(queries))}
        for name, t in times.items()
    }


def main() -> None:
    """Run the bench and write the table and JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--data", choices=["gaussian", "clustered"], default="gaussian",
                        help="clustered: 100 centres, each item and query one of them plus noise (embeddings cluster)")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL's engines only")
    parser.add_argument("--writes", action="store_true",
                        help="put one item before each query (untimed): a write between searches, as an agent's memory")
    parser.add_argument("--out", default="bench/results/vector_engines.json")
    args = parser.parse_args()
    rng = np.random.default_rng(40)
    if args.data == "gaussian":
        data = rng.standard_normal((args.items, args.dims), dtype=np.float32)
        queries = [rng.standard_normal(args.dims, dtype=np.float32) for _ in range(args.runs)]
    else:
        centres = rng.standard_normal((100, args.dims), dtype=np.float32)
        noise = 0.5 * rng.standard_normal((args.items, args.dims), dtype=np.float32)
        data = centres[rng.integers(0, 100, args.items)] + noise
        queries = [centres[rng.integers(0, 100)] + 0.5 * rng.standard_normal(args.dims, dtype=np.float32)
                   for _ in range(args.runs)]
    space = Space("bench-model", args.dims)
    result: dict[str, Any] = {"items": args.items, "dims": args.dims, "runs": args.runs, "data": args.data,
                              "python": platform.python_version(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    work = Path(tempfile.mkdtemp(prefix="flowmem-bench-vec-"))
    try:
        def snapshot(vectors: SqlVectors, q: np.ndarray) -> list[str]:  # decision 0130's cache, not pgvector
            found = SqlVectors.nearest(vectors, Search("user", "u1", "", 0.0, COLLECTION, space), Nearest(q.tolist(), "cosine", keep=KEEP))
            return exact_scan(vectors, space, q) if found is None else [key for key, _, _ in found[0]]

        sqlite_store = open_store(f"sqlite:///{work}/vectors.db")
        sqlite_vectors = vectors_of(sqlite_store)
        assert isinstance(sqlite_vectors, SqlVectors)
        engines: dict[str, Callable[[np.ndarray], list[str]]] = {}
        result["sqlite_vec"] = "not measured: --no-sqlite"
        if not args.no_sqlite:
            result["sqlite_put_per_s"] = fill(sqlite_vectors, data, space)
            engines["sqlite exact scan"] = lambda q: exact_scan(sqlite_vectors, space, q)
            engines["sqlite exact scan's snapshot (decision 0130)"] = lambda q: snapshot(sqlite_vectors, q)
            vec, why = sqlite_vec_search(work / "vectors.db")
            result["sqlite_vec"] = why
            if vec is not None:
                engines["sqlite + sqlite-vec (apsw)"] = vec
        with pgserver_postgres() as server:
            import psycopg

            with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
                conn.execute("CREATE DATABASE plain")
                conn.execute("CREATE DATABASE vec")
            with psycopg.connect(f"{server}/vec", autocommit=True) as conn:
                conn.execute("CREATE EXTENSION vector")
            plain, withvec = open_store(f"{server}/plain"), open_store(f"{server}/vec")
            pv_plain, pv = vectors_of(plain), vectors_of(withvec)
            assert isinstance(pv, PgVectors) and isinstance(pv_plain, PgVectors)
            result["postgres_put_per_s"] = fill(pv_plain, data, space)
            result["pgvector_put_per_s"] = fill(pv, data, space)
            with withvec.connection() as conn:  # type: ignore[attr-defined]
                conn.execute("VACUUM ANALYZE")
            ann = AnnIndex()
            start = time.perf_counter()
            pv.nearest(Search("user", "u1", "", 0.0, COLLECTION, space), Nearest(queries[0].tolist(), "cosine", keep=KEEP, ann=ann))
            result["hnsw_build_s"] = time.perf_counter() - start

            def nearest(q: np.ndarray, index: AnnIndex | None) -> list[str]:
                found = pv.nearest(Search("user", "u1", "", 0.0, COLLECTION, space), Nearest(q.tolist(), "cosine", keep=KEEP, ann=index))
                assert found is not None
                return [key for key, _, _ in found[0]]

            engines["postgres exact scan (bytea, numpy)"] = lambda q: exact_scan(pv, space, q)
            engines["postgres exact scan's snapshot (decision 0130)"] = lambda q: snapshot(pv, q)
            engines["postgres pgvector exact (SQL)"] = lambda q: nearest(q, None)
            engines["postgres pgvector HNSW"] = lambda q: nearest(q, ann)
            before: Callable[[int], None] | None = None
            if args.writes:
                def before(turn: int) -> None:
                    for vectors in (pv, sqlite_vectors) if not args.no_sqlite else (pv,):
                        vectors.put(Address("user", "u1", f"w{turn:06d}"), "{}", None, COLLECTION, space,
                                    [Vector("$", 0, bytes(4 * args.dims))])  # zero: scores 0, ranks low
            result["writes_between_searches"] = args.writes
            result["search"] = measure(engines, queries, before)
            plain.close()
            withvec.close()
        sqlite_store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.items:,} items of {args.dims} dims, {args.runs} queries, top {KEEP}; sqlite-vec: {result['sqlite_vec']}")
    print("| engine | search ms, min (median) | recall vs the exact scan |\n|---|---:|---:|")
    for name, row in result["search"].items():
        print(f"| {name} | {row['min_ms']:.1f} ({row['median_ms']:.1f}) | {row['recall_vs_exact']:.2f} |")
    print(f"puts/s: SQLite {result.get('sqlite_put_per_s', 0):.0f}, PostgreSQL {result['postgres_put_per_s']:.0f}, "
          f"PostgreSQL + pgvector copy {result['pgvector_put_per_s']:.0f}; HNSW build {result['hnsw_build_s']:.1f} s")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
