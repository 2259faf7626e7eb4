"""What ``MemoryService.append`` adds over ``SqliteStore.append`` on SQLite, per append (issue 42 §2).

Run with ``python bench/service_append.py`` (not part of the tests). Two buffers of
``--length`` messages on files at ``synchronous=NORMAL`` (no flush: the CPU, not the
disk), each in a file of its own: the default call (``MemoryService.append`` in the
``session`` scope, as ``bench/store.py``'s ``flowmem service default`` calls it: the
session owned by its user, its guard checked) and the store's own call
(``SqliteStore.append`` of a row prepared beforehand, as ``bench/store.py``'s tuned
row). Measured per append:

- the Python calls each makes (cProfile's count over ``--appends`` appends: a count,
  which the machine's load does not move), and the statements each runs;
- the thread CPU of each (``time.thread_time`` over blocks of appends, the two in turns,
  the order swapped each block; the minimum block is reported: other processes' load
  moves it least);
- the service's own part: ``MemoryService.append`` over a store whose ``append``
  returns at once (its preparation, checks, scope and guard, and result).

``--srcs A B …`` runs the same in a process per source tree (``PYTHONPATH=<tree>``,
e.g. an export of an earlier commit's ``src``), the trees in turns ``--rounds`` times,
and reports each tree's minimum; without it, the installed flowmem. JSON to
``--json`` (default ``bench/results/service_append.json``).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import siblings

BENCH = Path(__file__).resolve().parent


def measure(length: int, appends: int, blocks: int) -> dict[str, Any]:
    """Calls, statements and thread CPU per append of the two calls, and the service's own part."""
    from flowmem.core.append import AppendOutcome
    from flowmem.service import MemoryService

    store = siblings.load("store")
    folder = Path(tempfile.mkdtemp(prefix="flowmem-service-append-"))
    (folder / "service").mkdir()
    (folder / "store").mkdir()
    service = store.FlowmemService(
        "flowmem service",
        f"sqlite:///{folder}/service/x.db?synchronous=NORMAL",
        (length,),
        asked=False,
    )
    tuned = store.Flowmem(
        "flowmem SqliteStore", f"sqlite:///{folder}/store/x.db?synchronous=NORMAL", (length,)
    )
    service.fill("b", length)
    tuned.fill("b", length)
    total = appends * 2 + blocks * appends * 2 + 200
    store.Rows()[length + total]  # every row the store's call appends, prepared before any timing
    systems = {"MemoryService.append": service, "SqliteStore.append": tuned}
    at = length
    for system in systems.values():  # warm both paths
        for i in range(at, at + 100):
            system.append("b", i)
    at += 100
    found: dict[str, Any] = {}
    for name, system in systems.items():
        statements = [0]

        def count(_: str, statements: list[int] = statements) -> None:
            statements[0] += 1

        conns = _writers(system)
        for conn in conns:
            conn.set_trace_callback(count)
        profile = cProfile.Profile()
        profile.enable()
        for i in range(at, at + appends):
            system.append("b", i)
        profile.disable()
        for conn in conns:
            conn.set_trace_callback(None)
        found[name] = {
            "python_calls": pstats.Stats(profile).total_calls / appends,  # type: ignore[attr-defined]
            "statements": statements[0] / appends if conns else None,
        }
    at += appends
    cpu: dict[str, list[float]] = {name: [] for name in systems}
    for block in range(blocks):
        order = list(systems) if block % 2 == 0 else list(reversed(list(systems)))
        for name in order:
            started = time.thread_time()
            for i in range(at, at + appends):
                systems[name].append("b", i)
            cpu[name].append((time.thread_time() - started) / appends * 1e6)
        at += appends
    for name, times in cpu.items():
        found[name]["cpu_us_min"] = min(times)
        found[name]["cpu_us_blocks"] = times
    service.close()
    tuned.close()

    outcome = AppendOutcome(rows=None, count=1, appended=1)

    class Returns:
        """A store whose append returns at once: what the service does around it."""

        def append(self, *args: object, **kwargs: object) -> AppendOutcome:
            """Nothing stored."""
            return outcome

    alone = MemoryService(Returns())  # type: ignore[arg-type]
    context = service.context("b")
    turns = [store.turn(i) for i in range(4)]

    def own(n: int) -> None:
        for i in range(n):
            alone.append("session", "chat", turns[i % 4], context)

    profile = cProfile.Profile()
    profile.enable()
    own(appends)
    profile.disable()
    times = []
    for _ in range(blocks):
        started = time.thread_time()
        own(appends * 4)
        times.append((time.thread_time() - started) / (appends * 4) * 1e6)
    found["the service's own part"] = {
        "python_calls": pstats.Stats(profile).total_calls / appends,  # type: ignore[attr-defined]
        "cpu_us_min": min(times),
    }
    found["the service's own part, by function"] = _by_function(profile, appends)
    extra = found["MemoryService.append"]
    base = found["SqliteStore.append"]
    found["service over store"] = {
        "python_calls": extra["python_calls"] - base["python_calls"],
        "statements": (extra["statements"] or 0) - (base["statements"] or 0),
        "cpu_us_min": extra["cpu_us_min"] - base["cpu_us_min"],
    }
    return found


def _by_function(profile: cProfile.Profile, appends: int) -> dict[str, float]:
    """Calls per append of each function the profile saw, most called first (a count)."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    calls: dict[str, float] = {}
    for (path, line, name), (_, ncalls, *_rest) in stats.items():
        where = path.split("/src/flowmem/")[-1] if "/src/flowmem/" in path else Path(path).name
        calls[f"{where}:{line}({name})"] = ncalls / appends
    return dict(sorted(calls.items(), key=lambda item: -item[1]))


def _writers(system: Any) -> list[sqlite3.Connection]:
    """The store's idle pooled connections, one of which each append borrows."""
    idle = getattr(system.store, "_idle", None)  # SqliteStore's pool (store/sqlite/pool.py)
    return list(idle) if isinstance(idle, list) else []


def main(argv: list[str] | None = None) -> int:
    """Measure the installed flowmem, or each of ``--srcs`` in turns."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=1000)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--srcs", nargs="*", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=str(BENCH / "results" / "service_append.json"))
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child's run
    args = parser.parse_args(argv)
    if args.one or not args.srcs:
        found = measure(args.length, args.appends, args.blocks)
        if args.one:
            print(json.dumps(found))
            return 0
        report = {"installed": found}
    else:
        runs: dict[str, list[dict[str, Any]]] = {src: [] for src in args.srcs}
        for round_ in range(args.rounds):
            order = args.srcs[round_ % len(args.srcs) :] + args.srcs[: round_ % len(args.srcs)]
            for src in order:
                env = dict(os.environ, PYTHONPATH=src)
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--one",
                        "--length",
                        str(args.length),
                        "--appends",
                        str(args.appends),
                        "--blocks",
                        str(args.blocks),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[src].append(json.loads(out.stdout))
        report = {}
        for src, found_runs in runs.items():
            merged: dict[str, Any] = {}
            for name in found_runs[0]:
                if name.endswith("by function"):
                    merged[name] = found_runs[0][name]
                    continue
                merged[name] = {
                    key: (
                        min(r[name][key] for r in found_runs)
                        if key == "cpu_us_min"
                        else found_runs[0][name][key]
                    )
                    for key in found_runs[0][name]
                    if key != "cpu_us_blocks"
                }
            merged["service over store"]["cpu_us_min"] = (
                merged["MemoryService.append"]["cpu_us_min"]
                - merged["SqliteStore.append"]["cpu_us_min"]
            )
            report[src] = merged
    for where, found in report.items():
        print(where)
        for name, values in found.items():
            if name.endswith("by function"):
                continue
            shown = ", ".join(
                f"{key} {value:.1f}"
                for key, value in values.items()
                if isinstance(value, float | int)
            )
            print(f"  {name:26s} {shown}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps({"length": args.length, "appends": args.appends, "report": report}, indent=1)
    )
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
