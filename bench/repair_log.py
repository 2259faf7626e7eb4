"""Benchmark of the repair log's cost on the append (issue 37 §2): p50 before and after.

Run with ``python bench/repair_log.py --before-src DIR`` (not part of the tests).
``DIR`` is the ``src`` of the code before the log (e.g. ``git archive <commit> src``
unpacked); the code after is this checkout's. Each measure runs in a fresh process
importing one of the two, alternating before / after for ``--repeats`` rounds, on a
fresh SQLite file (WAL, ``synchronous=FULL``, flowmem's default) and on one
PostgreSQL server (``--postgres URL``, else a throwaway durable one), each process in
buffers of its own. Three appends, one at a time, timed ``--appends`` times each on a
buffer of ``PREFILL`` rows:

- ``plain``: a user message (nothing repaired: the log must cost nothing);
- ``heal``: a user turn while one call is open (MEM-3: one placeholder, one entry);
- ``duplicate``: a tool result already stored (MEM-1: refused, one entry).

Reported: each append's p50 (ms), median over the rounds, before and after, and the
ratio after / before (the issue allows at most 1.10 at the p50, and no cost for
``plain``). On a shared machine a durable commit's fsync dominates and varies from
round to round; ``--sqlite-synchronous OFF --postgres-nondurable`` measures what the
log's statements cost without it (labelled NOT DURABLE).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

SRC = Path(__file__).resolve().parent.parent / "src"
PREFILL = 100
KINDS = ("plain", "heal", "duplicate")


def _child(url: str, appends: int) -> dict[str, list[float]]:
    """Time the three appends in this process (the code on its ``PYTHONPATH``)."""
    from flowmem.core import prepare
    from flowmem.store import Address, open_store

    store = open_store(url)
    run = uuid.uuid4().hex[:8]
    found: dict[str, list[float]] = {kind: [] for kind in KINDS}
    try:
        buffers = {kind: Address("user", f"bench-{run}", kind) for kind in KINDS}
        for address in buffers.values():
            fill = [{"role": "user", "content": f"row {i}"} for i in range(PREFILL)]
            store.append(address, prepare(fill, 1))
        store.append(buffers["duplicate"], prepare([
            {"role": "assistant", "content": "", "tool_calls": [{"id": "d1"}]},
            {"role": "tool", "tool_call_id": "d1", "content": "done"},
        ], 1))
        duplicate = prepare({"role": "tool", "tool_call_id": "d1", "content": "done"}, 2)
        for i in range(appends):
            plain = prepare({"role": "user", "content": f"hello {i}"}, 2)
            start = time.perf_counter()
            store.append(buffers["plain"], plain)
            found["plain"].append(time.perf_counter() - start)
            call = prepare({"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}"}]}, 2)
            store.append(buffers["heal"], call)
            turn = prepare({"role": "user", "content": f"next {i}"}, 2)
            start = time.perf_counter()
            store.append(buffers["heal"], turn)  # heals c{i} (MEM-3)
            found["heal"].append(time.perf_counter() - start)
            start = time.perf_counter()
            store.append(buffers["duplicate"], duplicate)  # refused (MEM-1)
            found["duplicate"].append(time.perf_counter() - start)
    finally:
        store.close()
    return found


def _measure(src: Path, url: str, appends: int) -> dict[str, float]:
    """The p50 (ms) of each append, in a fresh process importing ``src``."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", url, "--appends", str(appends)],
        env={**os.environ, "PYTHONPATH": str(src)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = json.loads(out)
    return {kind: statistics.median(found[kind]) * 1000 for kind in KINDS}


def _schemas(url: str, codes: dict[str, Path]) -> None:
    """A fresh schema per code on the PostgreSQL server at ``url``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for code in codes:
            conn.execute(f"DROP SCHEMA IF EXISTS bench_{code} CASCADE")
            conn.execute(f"CREATE SCHEMA bench_{code}")


def main(argv: list[str] | None = None) -> int:
    """Measure before and after, alternating, and print the table."""
    import pgserver

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before-src", help="src of the code before the repair log")
    parser.add_argument("--after-src", default=str(SRC))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--only", default="sqlite,postgres")
    parser.add_argument(
        "--sqlite-synchronous",
        default="FULL",
        help="the SQLite files' synchronous (below FULL: labelled NOT DURABLE; the statements' cost alone)",
    )
    pgserver.add_arguments(parser, "a PostgreSQL URL (default: start a throwaway durable one)")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.appends)))
        return 0
    if not args.before_src:
        parser.error("--before-src is needed (the code to compare with)")
    codes = {"before": Path(args.before_src), "after": Path(args.after_src)}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    backends = args.only.split(",")
    with tempfile.TemporaryDirectory(prefix="flowmem-repairs-") as folder:
        for backend in backends:
            context = (
                pgserver.server(args.postgres, not args.postgres_nondurable)
                if backend == "postgres"
                else None
            )
            url = ""
            if context is not None:
                url = context.__enter__()[0]
            try:
                if url:
                    _schemas(url, codes)
                for repeat in range(args.repeats):
                    for code, src in codes.items():
                        # PostgreSQL: a schema per code (the code before refuses a newer schema)
                        where = f"{url}?options=-csearch_path%3Dbench_{code}" if url else (
                            f"sqlite:///{folder}/{code}-{repeat}.db?synchronous={args.sqlite_synchronous}"
                        )
                        found = _measure(src, where, args.appends)
                        results.setdefault((backend, code), []).append(found)
                        print(f"# {backend} {repeat + 1} {code}: {found}", file=sys.stderr, flush=True)
            finally:
                if context is not None:
                    context.__exit__(None, None, None)
    durable = args.sqlite_synchronous.upper() == "FULL" and not args.postgres_nondurable
    print(f"Append p50 (ms), median of {args.repeats} rounds of {args.appends} appends each")
    print(
        f"SQLite synchronous={args.sqlite_synchronous.upper()}, PostgreSQL "
        + ("given by URL" if args.postgres else "throwaway, " + ("NON-DURABLE" if args.postgres_nondurable else "durable"))
        + ("" if durable else " (NOT DURABLE: the statements' cost without the fsync)")
    )
    print("| backend | append | before | after | after / before |")
    print("|---|---|---:|---:|---:|")
    for backend in backends:
        for kind in KINDS:
            before = statistics.median(r[kind] for r in results[(backend, "before")])
            after = statistics.median(r[kind] for r in results[(backend, "after")])
            print(f"| {backend} | {kind} | {before:.3f} | {after:.3f} | {after / before:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
