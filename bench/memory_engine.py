"""Benchmark of ``memory://``'s engine beside SQLite on a private database in RAM (decision 0138).

Issue 39 §3: should ``memory://`` become the SQLite engine on a private in-memory
database (deleting the Python engine and its twins) or keep its Python engine? This
runs the same user calls on three stores, each fresh per length and run:

- ``memory://``: ``open_store("memory://")``. Until decision 0138 this was the Python
  engine; since then it is ``PrivateSqliteStore`` (SQLite on a private WAL database on
  tmpfs, from a database migrated once per process). To measure the Python engine the
  decision compared, run this file from an export of ``b60b389`` (its last commit);
- ``sqlite tmpfs``: ``SqliteStore`` in WAL mode on a private file in ``/dev/shm``,
  ``synchronous=OFF`` (``bench/lib/private_sqlite.py``);
- ``sqlite memdb``: ``SqliteStore`` on SQLite's ``memdb`` VFS (no WAL).

The calls, through ``MemoryService`` as a user makes them (session scope): single
appends of a user message, of an assistant turn calling a tool, of the tool's
result and of an answer (``bench/store.py``'s conversation); a heal (an assistant
call left unanswered, then a user message: the append rules repair the history);
``load(last=50)`` and the whole ``load`` at 100, 1,000 and 10,000 messages; and a
LangGraph ``FlowmemSaver.put`` + ``get_tuple`` of a small checkpoint; and opening and
closing a new, empty store (what every test's fixture pays). Each call is
timed one at a time in rounds, every store once a round with their order rotated,
``--repeats`` runs (fresh stores each); the table gives each call's minimum per run,
then the median of those over runs (and the ratio to ``memory://``).

``--suite`` also times ``tests/store/test_conformance.py -k memory`` (the conformance
suite's memory cases) with ``memory://`` on each engine (``private_sqlite`` as a pytest
plugin), interleaved, and reports the pass/fail counts and the minimum wall time.

Targets (the "reasonable factor" of decision 0138): each call on SQLite within 2x of
the Python engine, and the suite passing. Results: ``bench/results/memory_engine.json``
(``--json PATH``); ``--quick`` is a smoke run, never judged.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as ``python bench/memory_engine.py``: drop this folder, put bench/lib first.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import private_sqlite
import report_json
import siblings

from flowmem.core import prepare
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, Store, open_store

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = (100, 1_000, 10_000)
ENGINES: dict[str, Callable[[], Store]] = {
    "memory://": lambda: open_store("memory://"),
    "sqlite tmpfs": private_sqlite.TmpfsSqliteStore,
    "sqlite memdb": private_sqlite.MemdbSqliteStore,
}
CALLS = (
    "append user",
    "append tool call",
    "append tool result",
    "append answer",
    "heal",
    "load last 50",
    "load all",
    "checkpoint put+get",
    "open+close",
)
KINDS = ("append user", "append tool call", "append tool result", "append answer")


class Engine:
    """One store under test at one length: its service, its conversation, its saver."""

    def __init__(self, name: str, length: int) -> None:
        self.name = name
        self.store = ENGINES[name]()
        self.service = MemoryService(self.store)
        self.context = ExecutionContext(user_id="bench", session_id="s1")
        self.address = Address("session", "s1", "chat")
        self.turn = siblings.load("store").turn
        self.next = 0
        self.fill(length)
        self.heals = 0
        self.saver: Any = None

    def fill(self, length: int) -> None:
        """Write ``length`` messages of the conversation in batches (not timed)."""
        self.service.append("session", "chat", [self.turn(0)], self.context)  # creates the session
        self.next = 1
        while self.next < length:
            end = min(self.next + 500, length)
            rows = prepare([self.turn(i) for i in range(self.next, end)], 1_755_000_000)
            self.store.append(self.address, rows)
            self.next = end

    def append_next(self) -> None:
        """Append the conversation's next message through the service."""
        self.service.append("session", "chat", [self.turn(self.next)], self.context)
        self.next += 1

    def heal_setup(self) -> None:
        """An assistant turn calling a tool, left unanswered (not timed)."""
        self.heals += 1
        call = {
            "id": f"heal_{self.heals}",
            "type": "function",
            "function": {"name": "f", "arguments": "{}"},
        }
        self.service.append(
            "session",
            "chat",
            [{"role": "assistant", "content": "", "tool_calls": [call]}],
            self.context,
        )

    def heal(self) -> None:
        """A user message after the unanswered call: the append rules repair the history."""
        self.service.append(
            "session", "chat", [{"role": "user", "content": "and now?"}], self.context
        )

    def load_last(self) -> None:
        """The last 50 messages."""
        self.service.load("session", "chat", self.context, 50)

    def load_all(self) -> None:
        """The whole buffer."""
        self.service.load("session", "chat", self.context)

    def checkpoint(self) -> None:
        """One LangGraph checkpoint stored and read back (a saver on this store's service)."""
        from langgraph.checkpoint.base import empty_checkpoint

        from flowmem.integrations.langgraph.saver import FlowmemSaver

        if self.saver is None:
            self.saver = FlowmemSaver(self.service)
        step = self.next
        self.next += 1
        cp = empty_checkpoint()
        cp["channel_values"] = {"counter": step, "note": f"step {step}"}
        cp["channel_versions"] = {"counter": step, "note": step}
        config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        stored = self.saver.put(
            config, cp, {"source": "loop", "step": step}, {"counter": step, "note": step}
        )
        assert self.saver.get_tuple(stored) is not None

    def close(self) -> None:
        """Close the store."""
        self.store.close()


def timed(work: Callable[[], None]) -> float:
    """Seconds one call took."""
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def run_length(
    names: list[str], length: int, rounds: int, shift: int
) -> dict[str, dict[str, float]]:
    """Every call at ``length``, in rounds over fresh stores; each call's minimum per engine."""
    engines = [Engine(name, length) for name in names]
    found: dict[str, dict[str, list[float]]] = {e.name: {c: [] for c in CALLS} for e in engines}
    try:
        for r in range(rounds):
            k = (r + shift) % len(engines)
            order = engines[k:] + engines[:k]
            for kind in KINDS:  # the next four messages: one of each kind
                for e in order:
                    found[e.name][kind].append(timed(e.append_next))
            for e in order:
                e.heal_setup()
            for e in order:
                found[e.name]["heal"].append(timed(e.heal))
            for e in order:
                found[e.name]["load last 50"].append(timed(e.load_last))
            if r % max(1, length // 1_000) == 0:  # the whole buffer less often when long
                for e in order:
                    found[e.name]["load all"].append(timed(e.load_all))
            for e in order:
                found[e.name]["checkpoint put+get"].append(timed(e.checkpoint))
            for e in order:  # a new, empty store: what each test's fixture pays
                found[e.name]["open+close"].append(timed(lambda n=e.name: ENGINES[n]().close()))
    finally:
        for e in engines:
            e.close()
    return {name: {c: min(v) for c, v in calls.items() if v} for name, calls in found.items()}


def run_suite(names: list[str], repeats: int) -> dict[str, Any]:
    """Time the conformance suite's memory cases with ``memory://`` on each engine, interleaved."""
    plugin = {"memory://": None, "sqlite tmpfs": "tmpfs", "sqlite memdb": "memdb"}
    out: dict[str, Any] = {n: {"seconds": [], "summary": ""} for n in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            env = dict(
                os.environ,
                PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench" / "lib")]),
            )
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            command += ["tests/store/test_conformance.py", "-k", "memory"]
            if plugin[name]:
                env["FLOWMEM_MEMORY_AS"] = str(plugin[name])
                command += ["-p", "private_sqlite"]
            started = time.perf_counter()
            done = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True, check=False
            )
            out[name]["seconds"].append(time.perf_counter() - started)
            last = [
                line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)
            ]
            out[name]["summary"] = (
                re.sub(r" in [\d.]+s.*", "", last[-1].strip("= ")) if last else done.stdout[-300:]
            )
    for name in names:
        out[name]["min_seconds"] = min(out[name]["seconds"])
    return out


def report(results: dict[str, Any], names: list[str]) -> str:
    """The markdown table: per length and call, the median over runs of each run's minimum (µs)."""
    lines = []
    for length, per_run in results["runs"].items():
        lines.append(
            f"\n{int(length):,} messages — µs, median over runs of the min per run (÷ memory://)\n"
        )
        lines.append("| call | " + " | ".join(names) + " |")
        lines.append("|---|" + "---:|" * len(names))
        for call in CALLS:
            base = statistics.median(run["memory://"][call] for run in per_run)
            cells = []
            for name in names:
                value = statistics.median(run[name][call] for run in per_run)
                cells.append(
                    f"{value * 1e6:,.0f}" + ("" if name == "memory://" else f" ({value / base:.1f}×)")
                )
            lines.append(f"| {call} | " + " | ".join(cells) + " |")
    if "suite" in results:
        lines.append(
            "\nconformance suite, memory cases (`tests/store/test_conformance.py -k memory`)\n"
        )
        lines.append("| engine | result | min wall s |")
        lines.append("|---|---|---:|")
        for name, got in results["suite"].items():
            lines.append(f"| {name} | {got['summary']} | {got['min_seconds']:.1f} |")
    return "\n".join(lines)


def judge(results: dict[str, Any], targets: report_json.Targets) -> None:
    """The question's targets: SQLite within 2x of the Python engine per call, the suite passing."""
    for length, per_run in results["runs"].items():
        for name in ("sqlite tmpfs", "sqlite memdb"):
            ratios = [
                statistics.median(run[name][call] for run in per_run)
                / statistics.median(run["memory://"][call] for run in per_run)
                for call in CALLS
                if call != "open+close"
            ]
            targets.check(
                f"{name} / memory://, slowest call at {int(length):,} (x)",
                max(ratios),
                2.0,
                at_most=True,
            )
    for name, got in results.get("suite", {}).items():
        met = "failed" not in got["summary"] and "passed" in got["summary"]
        print(
            f"  {'PASS' if met else 'FAIL'}  conformance suite's memory cases on {name}: {got['summary']}"
        )
        targets.record(f"conformance suite's memory cases pass on {name}", met, got["summary"])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its table and targets, write its JSON."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs on fresh stores (default 3)")
    parser.add_argument(
        "--rounds", type=int, default=40, help="timed rounds per run and length (default 40)"
    )
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="buffer lengths")
    parser.add_argument(
        "--suite", action="store_true", help="also time the conformance suite's memory cases"
    )
    report_json.add_arguments(parser, "memory_engine", "100 messages, 1 run, 5 rounds, no suite")
    args = parser.parse_args(argv)
    names = list(ENGINES)
    lengths = [100] if args.quick else [int(x) for x in args.lengths.split(",")]
    repeats, rounds = (1, 5) if args.quick else (args.repeats, args.rounds)
    meta = report_json.environment(["langgraph"])
    durability = {
        name: report_json.no_database("in memory, gone with the process") for name in names
    }
    report_json.describe(meta, durability)
    results: dict[str, Any] = {"engines": names, "repeats": repeats, "rounds": rounds, "runs": {}}
    for length in lengths:
        results["runs"][str(length)] = [
            run_length(names, length, rounds, shift) for shift in range(repeats)
        ]
        print(f"{length:,} messages: done", file=sys.stderr, flush=True)
    if args.suite and not args.quick:
        results["suite"] = run_suite(names, repeats)
    table = report(results, names)
    print(table)
    results["table"] = table
    targets = report_json.Targets(args.quick)
    judge(results, targets)
    report_json.write(
        args.json, "memory_engine", argv, meta, durability, targets.items, results, args.quick
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
