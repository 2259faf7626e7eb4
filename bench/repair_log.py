"""Benchmark of the repair log's cost on the append (issue 37 §2): p50 before and after.

Run with ``python bench/repair_log.py`` (not part of the tests). "Before" is this
checkout with the log's writes switched off through its one seam, ``SqlRepairs.record``
(the hook every SQL write path calls; the bench replaces it by a no-op), "after" the
same code as shipped: one process per run takes both in turns, append by append, each
on buffers of its own, so both meet the same disk (a durable commit's flush varies by
milliseconds from moment to moment) and the same neighbours. ``--before-src DIR``
compares with other code instead (e.g. the ``src`` of the commit before the log,
``git archive <commit> src`` unpacked), a fresh process each, alternating. Each run
uses a fresh SQLite file (WAL, ``synchronous=FULL``, flowmem's default) and a fresh
database of one PostgreSQL server (``--postgres URL``, else a throwaway durable one),
durable as users run them. Four appends, one at a time, timed ``--appends`` times
each on a buffer of ``PREFILL`` rows:

- ``plain``: a user message (nothing repaired: the log must cost nothing);
- ``heal``: a user turn while one call is open (MEM-3: one placeholder, one entry);
- ``duplicate``: a tool result already stored, alone (MEM-1: refused, nothing logged);
- ``evict``: a user message to a buffer at its window (``max_messages``): one row
  evicted, one entry.

Reported: each append's p50 (ms), the MINIMUM over the rounds (the least disturbed
round on a shared machine), before and after, and the ratio after / before (the issue
allows at most 1.10 at the p50, and no cost for ``plain``). ``--sqlite-synchronous
OFF --postgres-nondurable`` measures what the log's statements cost without the
commit's flush (labelled NOT DURABLE).

``--srcs NAME=DIR,NAME=DIR`` compares codes each measured seam against seam: every
round runs each code in a fresh process (the order alternating, a fresh database each),
both variants in turns, and the table gives per code the minimum p50 with the log off
and on and their ratio, beside the median of the rounds' own ratios (decision 0135's
before and after). ``--cpu`` adds each append's CPU, a measure the machine's load moves
less than its time: the client thread's (``time.thread_time_ns``) plus, on PostgreSQL,
the server backends' of the database (``/proc/<pid>/schedstat``: a server on this host).
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
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
# first: the pgserver wheel (PostgreSQL binaries for the tests) is also named pgserver
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

SRC = Path(__file__).resolve().parent.parent / "src"
PREFILL = 100
KINDS = ("plain", "heal", "duplicate", "evict")


VARIANTS = ("before", "after")


def _backends(url: str) -> Any:
    """On PostgreSQL, a function giving the CPU (ns) the database's client backends used so far; else None."""
    if not url.startswith("postgres"):
        return None
    import psycopg

    watch = psycopg.connect(url, autocommit=True)

    def used() -> int:
        pids = watch.execute(
            """SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
                AND datname = current_database() AND pid <> pg_backend_pid()"""
        ).fetchall()
        total = 0
        for (pid,) in pids:
            with open(f"/proc/{pid}/schedstat") as stat:  # time on a CPU, ns (a server on this host)
                total += int(stat.read().split()[0])
        return total

    return used


def _child(
    url: str, appends: int, variants: tuple[str, ...], cpu: bool = False
) -> dict[str, dict[str, list[float]]]:
    """Time the appends in this process (the code on its ``PYTHONPATH``), per variant.

    ``before``: the log's one write seam (``SqlRepairs.record``) a no-op; ``after``: as
    shipped. With both, they take turns append by append (the first one alternating),
    each on buffers of its own, so both meet the same disk and the same neighbours.
    """
    from flowmem.core import prepare
    from flowmem.store import Address, open_store

    store = open_store(url)
    seam = store.repairs.record  # type: ignore[attr-defined]

    def off(*args: object, **kwargs: object) -> None:
        return None

    run = uuid.uuid4().hex[:8]
    found: dict[str, dict[str, list[float]]] = {v: {kind: [] for kind in KINDS} for v in variants}
    for v in variants:
        found[v].update({f"cpu:{kind}": [] for kind in KINDS} if cpu else {})
    backends = _backends(url) if cpu else None
    buffers = {v: {kind: Address("user", f"bench-{run}-{v}", kind) for kind in KINDS} for v in variants}
    duplicate = prepare({"role": "tool", "tool_call_id": "d1", "content": "done"}, 2)

    def timed(variant: str, kind: str, rows: list[dict[str, object]], window: int = 0) -> None:
        store.repairs.record = off if variant == "before" else seam  # type: ignore[attr-defined]
        served = backends() if backends else 0
        start, used = time.perf_counter(), time.thread_time_ns()
        store.append(buffers[variant][kind], rows, max_messages=window)
        used, took = time.thread_time_ns() - used, time.perf_counter() - start
        found[variant][kind].append(took)
        if cpu:
            served = (backends() if backends else 0) - served
            found[variant][f"cpu:{kind}"].append((used + served) / 1e9)

    try:
        for variant in variants:
            for address in buffers[variant].values():
                fill = [{"role": "user", "content": f"row {i}"} for i in range(PREFILL)]
                store.append(address, prepare(fill, 1))
            store.append(buffers[variant]["duplicate"], prepare([
                {"role": "assistant", "content": "", "tool_calls": [{"id": "d1"}]},
                {"role": "tool", "tool_call_id": "d1", "content": "done"},
            ], 1))
        for i in range(appends):
            for variant in variants if i % 2 == 0 else variants[::-1]:
                timed(variant, "plain", prepare({"role": "user", "content": f"hello {i}"}, 2))
                call = prepare({"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}"}]}, 2)
                store.append(buffers[variant]["heal"], call)
                timed(variant, "heal", prepare({"role": "user", "content": f"next {i}"}, 2))  # MEM-3
                timed(variant, "duplicate", duplicate)  # refused (MEM-1), alone: nothing logged
                more = prepare({"role": "user", "content": f"more {i}"}, 2)
                timed(variant, "evict", more, PREFILL)  # the oldest row leaves
    finally:
        store.close()
    return found


def _measure(
    src: Path, url: str, appends: int, variants: tuple[str, ...], cpu: bool = False
) -> dict[str, dict[str, float]]:
    """The p50 (ms) of each append per variant, in a fresh process importing ``src``."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", url, "--appends", str(appends), "--variants", ",".join(variants)]
        + (["--cpu"] if cpu else []),
        env={**os.environ, "PYTHONPATH": str(src)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = json.loads(out)
    return {v: {kind: statistics.median(times) * 1000 for kind, times in found[v].items()} for v in variants}


def _fresh_database(url: str, name: str) -> str:
    """A new, empty database ``name`` on the PostgreSQL server at ``url``; its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    base, _, _ = url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}"


def _compare(args: argparse.Namespace, pgserver: Any) -> int:
    """``--srcs``: each code seam against seam, a fresh process and database per round, the order alternating."""
    codes = [(name, Path(folder)) for name, _, folder in (item.partition("=") for item in args.srcs.split(","))]
    found: dict[tuple[str, str], list[dict[str, dict[str, float]]]] = {}
    loads: list[float] = []  # the load average after each round
    with tempfile.TemporaryDirectory(prefix="flowmem-repairs-") as folder:
        for backend in args.only.split(","):
            context = pgserver.server(args.postgres, not args.postgres_nondurable) if backend == "postgres" else None
            url = context.__enter__()[0] if context is not None else ""
            try:
                for repeat in range(args.repeats):
                    for name, src in codes if repeat % 2 == 0 else codes[::-1]:
                        where = _fresh_database(url, f"bench_repairs_{name}_{repeat}") if url else (
                            f"sqlite:///{folder}/{name}-{repeat}.db?synchronous={args.sqlite_synchronous}"
                        )
                        p50s = _measure(src, where, args.appends, VARIANTS, args.cpu)
                        found.setdefault((backend, name), []).append(p50s)
                        load = os.getloadavg()[0]
                        loads.append(round(load, 2))
                        print(f"# {backend} {repeat + 1} {name} (load {load:.1f}): {p50s}", file=sys.stderr, flush=True)
            finally:
                if context is not None:
                    context.__exit__(None, None, None)
    durable = args.sqlite_synchronous.upper() == "FULL" and not args.postgres_nondurable
    if args.json:  # every round's p50s (ms), per backend and code, and how they were taken
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "command": sys.argv, "durable": durable, "appends": args.appends, "repeats": args.repeats,
            "sqlite_synchronous": args.sqlite_synchronous.upper(), "postgres_nondurable": args.postgres_nondurable,
            "loads": loads, "rounds": {f"{backend} {name}": rounds for (backend, name), rounds in found.items()},
        }, indent=1))
    print(
        f"Each code's append p50 (ms; cpu: CPU ms), log off / on in turns, {args.repeats} rounds of "
        f"{args.appends} appends; SQLite synchronous={args.sqlite_synchronous.upper()}, PostgreSQL "
        + ("given by URL" if args.postgres else "NON-DURABLE" if args.postgres_nondurable else "durable")
        + ("" if durable else " (NOT DURABLE)")
    )
    print("| backend | code | append | off (min) | on (min) | ratio of the minima | median of the rounds' ratios |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (backend, name), rounds in found.items():
        for kind in rounds[0]["before"]:
            off = min(r["before"][kind] for r in rounds)
            on = min(r["after"][kind] for r in rounds)
            ratios = statistics.median(r["after"][kind] / r["before"][kind] for r in rounds)
            print(f"| {backend} | {name} | {kind} | {off:.3f} | {on:.3f} | {on / off:.2f} | {ratios:.2f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Measure before and after, alternating, and print the table."""
    import pgserver

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before-src", help="src of the code to compare with (default: this one, the log off)")
    parser.add_argument("--after-src", default=str(SRC))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--variants", default="after", help=argparse.SUPPRESS)
    parser.add_argument("--only", default="sqlite,postgres")
    parser.add_argument(
        "--sqlite-synchronous",
        default="FULL",
        help="the SQLite files' synchronous (below FULL: labelled NOT DURABLE; the statements' cost alone)",
    )
    parser.add_argument("--srcs", help="NAME=DIR,NAME=DIR: codes compared, each seam against seam")
    parser.add_argument("--cpu", action="store_true", help="also each append's CPU (client + PostgreSQL backends)")
    parser.add_argument("--json", help="with --srcs: write every round's p50s to this file (e.g. bench/results/...)")
    pgserver.add_arguments(parser, "a PostgreSQL URL (default: start a throwaway durable one)")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.appends, tuple(args.variants.split(",")), args.cpu)))
        return 0
    if args.srcs:
        return _compare(args, pgserver)
    after = Path(args.after_src)
    # one process per run: both variants in turns (the seam), or each code in its own
    runs: list[tuple[Path, tuple[str, ...]]] = (
        [(Path(args.before_src), ("after",)), (after, ("after",))] if args.before_src else [(after, VARIANTS)]
    )
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
                for repeat in range(args.repeats):
                    for n, (src, variants) in enumerate(runs):
                        code = VARIANTS[n] if args.before_src else "both"
                        # a fresh database per run: PostgreSQL's own, SQLite's file
                        where = _fresh_database(url, f"bench_repairs_{code}_{repeat}") if url else (
                            f"sqlite:///{folder}/{code}-{repeat}.db?synchronous={args.sqlite_synchronous}"
                        )
                        found = _measure(src, where, args.appends, variants)
                        for variant, p50s in found.items():
                            name = code if args.before_src else variant
                            results.setdefault((backend, name), []).append(p50s)
                            print(f"# {backend} {repeat + 1} {name}: {p50s}", file=sys.stderr, flush=True)
            finally:
                if context is not None:
                    context.__exit__(None, None, None)
    durable = args.sqlite_synchronous.upper() == "FULL" and not args.postgres_nondurable
    before_is = (
        f"--before-src {args.before_src}, a process each"
        if args.before_src
        else "this code, the log's writes off (SqlRepairs.record), in turns with after in one process"
    )
    print(f"Append p50 (ms), the minimum of {args.repeats} rounds of {args.appends} appends each; before: {before_is}")
    print(
        f"SQLite synchronous={args.sqlite_synchronous.upper()}, PostgreSQL "
        + ("given by URL" if args.postgres else "throwaway, " + ("NON-DURABLE" if args.postgres_nondurable else "durable"))
        + ", a fresh database per run"
        + ("" if durable else " (NOT DURABLE: the statements' cost without the fsync)")
    )
    print("| backend | append | before | after | after / before |")
    print("|---|---|---:|---:|---:|")
    for backend in backends:
        for kind in KINDS:
            least_before = min(r[kind] for r in results[(backend, "before")])
            least_after = min(r[kind] for r in results[(backend, "after")])
            ratio = least_after / least_before
            print(f"| {backend} | {kind} | {least_before:.3f} | {least_after:.3f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
