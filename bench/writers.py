"""Benchmark of concurrent writers on one SQLite file: latency tail and fairness.

Run with ``python bench/writers.py`` (not part of the tests). Writers append one
user message at a time to random buffers among 1,000 in one file (WAL,
``synchronous=FULL``, flowmem's default) for a fixed time:

- ``single``: one writer (its p99 is the reference);
- ``4 threads``: four threads of one process, one ``SqliteStore``;
- ``4 processes``: four processes, one ``SqliteStore`` each.

Reported per phase: appends/s in total, p50 / p99 / max latency of one append
(ms), each writer's count of appends and the largest deviation of a share from an
even split. With ``--fsync-times`` the workers also time every fsync (instrumented
here, not in flowmem): ``os.fdatasync`` calls (flowmem's group commit) and every
``COMMIT`` (SQLite's own fsync at ``FULL`` happens inside it); a second table shows
their distribution, the slowest append against the slowest single fsync, and how
many fsyncs overlapped the slowest append (one stall, or a queue of several). A
probe thread in the driver, which touches no disk, reports the machine's own
largest stall in each phase (the largest oversleep of a 2 ms sleep).

Each phase runs in fresh processes on a fresh file, once with the code under test
(``after``: this checkout's ``src``) and once with ``--before-src`` (default
``/work/main/src``, the code to compare with), alternating, for ``--repeats``
rounds; the table shows the median over repeats of each figure, and the worst
(largest) max and share deviation.

Targets (issue 15 §3): with 4 threads and with 4 processes, p99 <= 5 x the
single-writer p99, max <= 100 ms, every share within +-25 % of an even split (judged
on the code under test; exit 1 when one is missed).

The run prints the file's durability (its journal mode and the ``synchronous`` the
writers set; ``--synchronous`` below FULL is labelled NOT DURABLE) and writes it, with
every run's figures and the targets, to ``bench/results/writers.json`` (``--json
PATH``). ``--quick`` (0.25 s phases, one repeat, the code under test only) is a smoke
run, never judged.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Run as ``python bench/writers.py``, this folder is first on sys.path, where a sibling
# (bench/http.py) would shadow the standard library's ``http``. Drop it; the benches'
# shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import report_json

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
BUFFERS = 1_000
SYNCHRONOUS = os.environ.get("FLOWMEM_BENCH_SYNCHRONOUS", "FULL")
FSYNC_TIMES = os.environ.get("FLOWMEM_BENCH_FSYNC_TIMES") == "1"
WRITERS = 4


# --- the worker: runs in a child process with the code under test on its path ----------
def _writer(
    store: Any, start_at: float, stop_at: float, seed: int, slowest: list[float]
) -> list[float]:
    """Append until ``stop_at``; return each append's latency in seconds.

    ``slowest`` is set to the (start, end) ``time.monotonic()`` of this writer's slowest append.
    """
    from flowmem.core import prepare
    from flowmem.store import Address

    rng = random.Random(seed)
    latencies: list[float] = []
    while time.time() < start_at:
        time.sleep(0.0005)
    n = 0
    while time.time() < stop_at:
        address = Address("session", f"s{rng.randrange(BUFFERS)}", "chat")
        rows = prepare({"role": "user", "content": f"writer {seed} message {n}"}, 1)
        began = time.monotonic()
        store.append(address, rows)
        ended = time.monotonic()
        latencies.append(ended - began)
        if not slowest or ended - began > slowest[1] - slowest[0]:
            slowest[:] = [began, ended]
        n += 1
    return latencies


def _time_fsyncs() -> tuple[list[list[float]], list[list[float]]]:
    """Record (start, end) of every ``os.fdatasync`` and every ``COMMIT`` from now on."""
    import flowmem.store.sqlite as sqlite_store

    fsyncs: list[list[float]] = []
    commits: list[list[float]] = []
    fdatasync = os.fdatasync

    def timed_fdatasync(fd: Any) -> None:
        began = time.monotonic()
        try:
            fdatasync(fd)
        finally:
            fsyncs.append([began, time.monotonic()])

    os.fdatasync = timed_fdatasync
    execute = sqlite_store._Connection.execute

    def timed_execute(self: Any, sql: str, *args: Any) -> Any:
        if sql != "COMMIT":
            return execute(self, sql, *args)
        began = time.monotonic()
        try:
            return execute(self, sql, *args)
        finally:
            commits.append([began, time.monotonic()])

    sqlite_store._Connection.execute = timed_execute  # type: ignore[method-assign]
    return fsyncs, commits


def worker(db: str, threads: int, seed: int) -> None:
    """Run ``threads`` writers on one store; print their latencies (and fsyncs) as JSON.

    Prints ``ready`` once the store is open, then reads the wall-clock start and stop
    of the phase from stdin (the driver sends them when every worker is ready).
    """
    from flowmem.store import open_store

    fsyncs, commits = _time_fsyncs() if FSYNC_TIMES else ([], [])
    store = open_store(f"sqlite:///{db}?synchronous={SYNCHRONOUS}")
    print("ready", flush=True)
    start_at, stop_at = (float(t) for t in sys.stdin.readline().split())
    results: list[list[float]] = [[] for _ in range(threads)]
    slowest: list[list[float]] = [[] for _ in range(threads)]

    def run(i: int) -> None:
        results[i] = _writer(store, start_at, stop_at, seed * 100 + i, slowest[i])

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    store.close()
    wall = time.time() - time.monotonic()  # the driver compares processes on the wall clock
    slowest = [[t + wall for t in w] for w in slowest]
    fsyncs = [[t + wall for t in f] for f in fsyncs]
    commits = [[t + wall for t in c] for c in commits]
    print(
        json.dumps({"latencies": results, "slowest": slowest, "fsyncs": fsyncs, "commits": commits})
    )


# --- the driver ----------------------------------------------------------------------------
def _spawn(src: Path, db: str, threads: int, seed: int) -> Any:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--worker", db, str(threads), str(seed)]
    return subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def phase(
    src: Path, processes: int, threads: int, seconds: float, synchronous: str
) -> dict[str, Any]:
    """One measurement on a fresh file; the writers' latencies summarized, its durability."""
    with tempfile.TemporaryDirectory(prefix="flowmem-writers-") as folder:
        db = str(Path(folder) / "bench.db")
        setup = [
            sys.executable,
            "-c",
            f"from flowmem.store import open_store; open_store('sqlite:///{db}').close()",
        ]
        subprocess.run(setup, env={**os.environ, "PYTHONPATH": str(src)}, check=True)
        children = [_spawn(src, db, threads, p) for p in range(processes)]
        for child in children:  # every process imported and its store opened
            if child.stdout.readline().strip() != "ready":
                raise SystemExit(f"a writer failed to start (exit {child.wait()})")
        start_at = time.time() + 0.2  # its threads started too
        stop_at = start_at + seconds
        for child in children:
            child.stdin.write(f"{start_at!r} {stop_at!r}\n")
            child.stdin.flush()
        stall: list[float] = [0.0]
        probe = threading.Thread(target=_probe, args=(start_at, stop_at, stall), daemon=True)
        probe.start()
        writers: list[list[float]] = []
        slowest: list[list[float]] = []
        fsyncs: list[list[float]] = []
        commits: list[list[float]] = []
        for child in children:
            out, _ = child.communicate(timeout=seconds + 120)
            if child.returncode != 0:
                raise SystemExit(f"a writer failed (exit {child.returncode})")
            found = json.loads(out)
            writers.extend(found["latencies"])
            slowest.extend(w for w in found["slowest"] if w)
            fsyncs.extend(found["fsyncs"])
            commits.extend(found["commits"])
        durability = report_json.flowmem_sqlite_durability(db, synchronous)
    probe.join()
    every = sorted(x for w in writers for x in w)
    counts = [len(w) for w in writers]
    mean = sum(counts) / len(counts)
    return {
        **_fsync_summary(slowest, fsyncs, commits, start_at, stop_at),
        "stall": stall[0] * 1000,
        "rate": len(every) / seconds,
        "p50": every[len(every) // 2] * 1000,
        "p99": every[min(len(every) - 1, int(len(every) * 0.99))] * 1000,
        "max": every[-1] * 1000,
        "shares": counts,
        "spread": max(abs(c / mean - 1) for c in counts) * 100 if mean else 0.0,
        "durability": durability,
    }


def _probe(start_at: float, stop_at: float, stall: list[float]) -> None:
    """The machine's own stalls: the largest oversleep of a 2 ms sleep during the phase.

    It touches no disk, so an append's wait beyond its fsyncs that matches it is the
    CPU (2 cores shared with other jobs), not the writers' queue.
    """
    while time.time() < start_at:
        time.sleep(0.01)
    while time.time() < stop_at:
        began = time.monotonic()
        time.sleep(0.002)
        stall[0] = max(stall[0], time.monotonic() - began - 0.002)


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else 0.0


def _fsync_summary(
    slowest: list[list[float]],
    fsyncs: list[list[float]],
    commits: list[list[float]],
    start_at: float,
    stop_at: float,
) -> dict[str, Any]:
    """The fsyncs and COMMITs of the phase, and those that overlapped its slowest append."""
    if not fsyncs and not commits:
        return {}
    fsyncs = [f for f in fsyncs if start_at <= f[0] <= stop_at]
    commits = [c for c in commits if start_at <= c[0] <= stop_at]
    worst = max(slowest, key=lambda w: w[1] - w[0])
    both = fsyncs + commits
    overlapping = [f for f in both if f[0] < worst[1] and f[1] > worst[0]]
    return {
        "fsync_n": len(fsyncs),
        "fsync_p50": _ms([e - b for b, e in fsyncs], 0.5),
        "fsync_p99": _ms([e - b for b, e in fsyncs], 0.99),
        "fsync_max": _ms([e - b for b, e in fsyncs], 1.0),
        "commit_p50": _ms([e - b for b, e in commits], 0.5),
        "commit_p99": _ms([e - b for b, e in commits], 0.99),
        "commit_max": _ms([e - b for b, e in commits], 1.0),
        "slowest_sync": _ms([e - b for b, e in both], 1.0),
        "overlap_n": len(overlapping),
        "overlap_longest": _ms([min(e, worst[1]) - max(b, worst[0]) for b, e in overlapping], 1.0),
    }


PHASES = {"single": (1, 1), "4 threads": (1, WRITERS), "4 processes": (WRITERS, 1)}


def main(argv: list[str] | None = None) -> int:
    """Measure before and after, alternating, and print the tables; 1 when a target is missed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each phase")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before-src", default="/work/main/src", help="src of the code before")
    parser.add_argument(
        "--synchronous", default=SYNCHRONOUS, help="the file's synchronous (default FULL)"
    )
    parser.add_argument("--after-src", default=str(SRC), help="src of the code after")
    parser.add_argument(
        "--fsync-times",
        action="store_true",
        help="time every fdatasync and COMMIT in the workers (a second table)",
    )
    report_json.add_arguments(
        parser, "writers", "0.25 s phases, one repeat, the code under test only"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats, args.before_src = 0.25, 1, ""  # 0.5 s before decision 0203
    synchronous = args.synchronous.upper()
    os.environ["FLOWMEM_BENCH_SYNCHRONOUS"] = synchronous
    os.environ["FLOWMEM_BENCH_FSYNC_TIMES"] = "1" if args.fsync_times else ""
    codes = {"after": Path(args.after_src)}
    if args.before_src and Path(args.before_src).is_dir():
        codes = {"before": Path(args.before_src), **codes}
    meta = report_json.environment()
    report_json.describe(meta)
    durability: dict[str, dict[str, Any]] = {}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for repeat in range(args.repeats):
        for name, (processes, threads) in PHASES.items():
            for code, src in codes.items():
                result = phase(src, processes, threads, args.seconds, synchronous)
                durability.setdefault("SQLite file of every phase", result.pop("durability"))
                runs.setdefault((code, name), []).append(result)
                print(
                    f"# repeat {repeat + 1} {code:6} {name:11}: {result['rate']:7.0f}/s "
                    f"p99 {result['p99']:7.1f} ms max {result['max']:7.1f} ms "
                    f"shares {result['shares']} (probe's stall {result['stall']:.0f} ms)",
                    file=sys.stderr,
                    flush=True,
                )
    print("\n".join(report_json.durability_lines(durability)))
    table(runs, codes, args)
    targets = report_json.Targets(args.quick)
    print("\nTargets (issue 15 §3, the code under test)")
    med = statistics.median
    single = med(r["p99"] for r in runs[("after", "single")])
    for name in ("4 threads", "4 processes"):
        found = runs[("after", name)]
        ratio = med(r["p99"] for r in found) / single
        targets.check(f"{name}: p99 / single-writer p99", ratio, 5, at_most=True)
        targets.check(f"{name}: max ms", max(r["max"] for r in found), 100, at_most=True)
        spread = max(r["spread"] for r in found)
        targets.check(f"{name}: worst share deviation %", spread, 25, at_most=True)
    found_json = {
        "seconds": args.seconds,
        "repeats": args.repeats,
        "synchronous": synchronous,
        "codes": {code: str(src) for code, src in codes.items()},
        "runs": {code: {name: runs[(code, name)] for name in PHASES} for code in codes},
    }
    report_json.write(
        args.json, "writers", argv, meta, durability, targets.items, found_json, args.quick
    )
    return 0 if args.quick or not targets.failed else 1


def table(
    runs: dict[tuple[str, str], list[dict[str, Any]]], codes: dict[str, Path], args: Any
) -> None:
    """Print the medians table and, with ``--fsync-times``, every run's fsyncs."""
    med = statistics.median
    print(f"\nmedian of {args.repeats} runs of {args.seconds:g} s; max and spread: worst run\n")
    print(
        "| code | writers | appends/s | p50 ms | p99 ms | p99 / single p99 | max ms | shares (middle run) | worst share deviation |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---:|")
    for code in codes:
        single = med(r["p99"] for r in runs[(code, "single")])
        for name in PHASES:
            found = runs[(code, name)]
            p99 = med(r["p99"] for r in found)
            shares = found[len(found) // 2]["shares"]
            print(
                f"| {code} | {name} | {med(r['rate'] for r in found):,.0f} | "
                f"{med(r['p50'] for r in found):.2f} | {p99:.2f} | {p99 / single:.1f}x | "
                f"{max(r['max'] for r in found):.1f} | {shares} | "
                f"{max(r['spread'] for r in found):.0f} % |"
            )

    if args.fsync_times:
        print(
            "\nfsyncs, every run (fdatasync: flowmem's group commit; COMMIT: SQLite's own "
            "fsync at FULL is inside it; slowest sync: the longest of both)\n"
        )
        print(
            "| code | writers | run | fdatasyncs | fdatasync p50 / p99 / max ms | COMMIT p50 / p99 / max ms "
            "| max append ms | slowest sync ms | max − slowest sync ms | probe's stall ms "
            "| syncs overlapping the slowest append (longest overlap ms) |"
        )
        print("|---|---|---:|---:|---|---|---:|---:|---:|---:|---|")
        for code in codes:
            for name in PHASES:
                for run, r in enumerate(runs[(code, name)], 1):
                    if "fsync_n" not in r:
                        continue
                    print(
                        f"| {code} | {name} | {run} | {r['fsync_n']:,} | "
                        f"{r['fsync_p50']:.2f} / {r['fsync_p99']:.1f} / {r['fsync_max']:.1f} | "
                        f"{r['commit_p50']:.2f} / {r['commit_p99']:.1f} / {r['commit_max']:.1f} | "
                        f"{r['max']:.1f} | "
                        f"{r['slowest_sync']:.1f} | {r['max'] - r['slowest_sync']:.1f} | "
                        f"{r['stall']:.1f} | "
                        f"{r['overlap_n']} ({r['overlap_longest']:.1f}) |"
                    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _, _, db_, threads_, seed_ = sys.argv
        worker(db_, int(threads_), int(seed_))
    else:
        sys.exit(main())
