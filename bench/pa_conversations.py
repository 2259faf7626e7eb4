"""Benchmark of pydantic-ai conversations: ``FlowmemConversationStore`` beside what a user writes by hand (issue 42 §4).

Run with ``python bench/pa_conversations.py`` (not part of the tests; ``--quick`` is the smoke
run ``tests/bench/test_pa_conversations_bench.py`` makes). One **turn** is what an app does
per user message: load the conversation, add one turn's four messages (the user's
prompt, a response calling a tool, the tool's result, the text answer, about 200
characters each), save it. Three systems, each on a file of its own, made fresh for
every run:

- ``FlowmemConversationStore.from_url("sqlite:///…")`` (flowmem's default durability:
  WAL + ``synchronous=FULL``, its group commit): ``store.load(id)``, the messages added,
  ``store.save(conversation)``;
- the history as ``ModelMessagesTypeAdapter`` JSON in a file: read it,
  ``validate_json``, add the messages, ``dump_json``, write it and ``os.fsync``;
- the same JSON in one SQLite row (WAL + ``synchronous=FULL``): ``SELECT``,
  ``validate_json``, add, ``dump_json``, ``UPDATE``, commit.

Each system holds ``--conversations`` conversations (default 5) on the run's file or
files, each first filled to the measured length (``--lengths``, default 100 and 1,000
messages) by one save; then ``--turns`` steps (default 9) each give every conversation
one turn on every system, the systems taking turns with their order rotated at every
conversation's turn: each system runs conversations × turns turns at the same lengths
(decision 0192: 5 × 9 instead of one conversation's 9, the same operation sampled five
times as often; ``--conversations 1`` is the bench before it). A run's figure per system
is its median turn time (and median load time); its ratio is the peer's ÷ flowmem's
(higher: flowmem faster); the JSON keeps every turn's and load's time (``samples``).
``--runs`` runs (default 3), each on fresh files, give min, median and max of the
per-run ratios. The **load** is timed on its own too:
flowmem's ``load`` against the file's read + ``validate_json`` of the whole history.
Beside the wall time each operation's CPU time (``time.process_time``: every thread
of the process) is reported: flowmem does its database work in a worker thread, whose
wake-ups a loaded machine delays, where the peers run in the caller's thread.

Targets (issue 42 §4): at every length the turn ≥ 1.0× the JSON file and ≥ 1.0× the
JSON-in-SQLite row, and the load ≥ 1.0× ``validate_json`` of the file, at the minimum
of the runs.

``--pickled`` runs a fourth system, ``FlowmemConversationStore`` with its kept copies
always pickled (``Validated(plans=False)``, the plain path of decision 0176), and reports
the CPU of its loads and turns ÷ flowmem's: the plan's gain, side by side in one process.

``--one-connection`` runs a fifth system, ``FlowmemConversationStore`` whose SQLite pool lends the
connection last given back whatever its mode (``SqlitePool.lends_by_mode = False``, the plain path
of decision 0186: one connection, its pragmas flipped by each loan), and reports its turns' and
loads' wall and CPU time ÷ flowmem's (decision 0191).

``--parts`` times flowmem alone (``--turns`` turns per length, fresh file) and reports where
each turn's wall time goes: the load, the save until its write is queued, the worker's
wake-up, its statements, its ``COMMIT`` (the fsync), the way back, with CPU times and
statements per thread (decision 0191). No peers, no targets.

``--srcs NAME=DIR,NAME=DIR`` compares codes (``before=/tmp/old/src,after=src``) in one
run: each round runs this bench once per code, each in a fresh process importing
flowmem from its ``DIR`` (``PYTHONPATH``), the codes' order alternating round by round
(``--rounds``, default 2); the table gives each code's per-run ratios round by round,
side by side, and the JSON every child's measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# Run as ``python bench/pa_conversations.py``, this folder is first on sys.path, where a
# sibling module (bench/http.py) would shadow the standard library's ``http``. Drop it;
# the benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import report_json
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from flowmem.integrations.pydantic_ai import FlowmemConversationStore

BENCH = "pa_conversations"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
TEXT = "The quick brown fox jumps over the lazy dog, again and again, for a benchmark. " * 3
CID = "bench-conversation"
CONVERSATIONS = 5
"""Conversations per system and run by default (``--conversations``, decision 0192)."""


def turn(index: int) -> list[ModelMessage]:
    """One turn's four messages: prompt, tool call, tool result, text answer."""
    at = T0 + timedelta(seconds=index * 10)
    call_id = f"call-{index}"
    run = f"run-{index}"
    usage = RequestUsage(input_tokens=120 + index, output_tokens=40)
    return [
        ModelRequest(parts=[UserPromptPart(f"{index}: {TEXT[:200]}", timestamp=at)], timestamp=at, run_id=run),
        ModelResponse(
            parts=[TextPart("Let me look that up."), ToolCallPart("search", {"q": TEXT[:80]}, tool_call_id=call_id)],
            usage=usage, model_name="gpt-bench", timestamp=at, run_id=run,
        ),
        ModelRequest(
            parts=[ToolReturnPart("search", TEXT[:200], tool_call_id=call_id, timestamp=at)],
            timestamp=at, run_id=run,
        ),
        ModelResponse(parts=[TextPart(TEXT[:200])], usage=usage, model_name="gpt-bench", timestamp=at, run_id=run),
    ]


def history(length: int) -> list[ModelMessage]:
    """``length`` messages of whole turns."""
    return [m for i in range(length // 4) for m in turn(i)]


class Flowmem:
    """``FlowmemConversationStore`` on a fresh SQLite file."""

    name = "flowmem"

    def __init__(self, folder: Path) -> None:
        self.path = folder / "flowmem.db"
        self.store = FlowmemConversationStore.from_url(f"sqlite:///{self.path}")

    async def fill(self, messages: list[ModelMessage], cid: str = CID) -> None:
        """Save the history in one save."""
        await self.store.save(Conversation(conversation_id=cid, messages=list(messages)))

    async def load(self, cid: str = CID) -> int:
        """Load the conversation; its message count."""
        conversation = await self.store.load(cid)
        assert conversation is not None
        return len(conversation.messages)

    async def turn(self, added: list[ModelMessage], cid: str = CID) -> int:
        """Load, add, save."""
        conversation = await self.store.load(cid)
        assert conversation is not None
        conversation.messages.extend(added)
        await self.store.save(conversation)
        return len(conversation.messages)

    def close(self) -> None:
        """Close the store."""
        self.store.close()


class JsonFile:
    """The history as ``ModelMessagesTypeAdapter`` JSON in a file, fsynced on every save."""

    name = "json_file"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, cid: str) -> Path:
        return self.folder / f"{cid}.json"  # a file per conversation

    def _save(self, messages: list[ModelMessage], cid: str) -> None:
        data = ModelMessagesTypeAdapter.dump_json(messages)
        with open(self._path(cid), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    async def fill(self, messages: list[ModelMessage], cid: str = CID) -> None:
        """Write the history."""
        self._save(messages, cid)

    async def load(self, cid: str = CID) -> int:
        """Read and validate the whole history."""
        return len(ModelMessagesTypeAdapter.validate_json(self._path(cid).read_bytes()))

    async def turn(self, added: list[ModelMessage], cid: str = CID) -> int:
        """Read, validate, add, dump, write, fsync."""
        messages = ModelMessagesTypeAdapter.validate_json(self._path(cid).read_bytes())
        messages.extend(added)
        self._save(messages, cid)
        return len(messages)

    def close(self) -> None:
        """Nothing to close."""


class JsonRow:
    """The same JSON in one SQLite row (WAL, ``synchronous=FULL``)."""

    name = "json_sqlite_row"

    def __init__(self, folder: Path) -> None:
        self.path = folder / "rows.db"
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE conversations (id TEXT PRIMARY KEY, history TEXT NOT NULL)")

    async def fill(self, messages: list[ModelMessage], cid: str = CID) -> None:
        """Insert the history."""
        data = ModelMessagesTypeAdapter.dump_json(messages).decode()
        self.conn.execute("INSERT INTO conversations VALUES (?, ?)", (cid, data))

    def _read(self, cid: str) -> list[ModelMessage]:
        row = self.conn.execute("SELECT history FROM conversations WHERE id = ?", (cid,)).fetchone()
        return ModelMessagesTypeAdapter.validate_json(row[0])

    async def load(self, cid: str = CID) -> int:
        """Select and validate the whole history."""
        return len(self._read(cid))

    async def turn(self, added: list[ModelMessage], cid: str = CID) -> int:
        """Select, validate, add, dump, update, commit."""
        self.conn.execute("BEGIN IMMEDIATE")
        messages = self._read(cid)
        messages.extend(added)
        data = ModelMessagesTypeAdapter.dump_json(messages).decode()
        self.conn.execute("UPDATE conversations SET history = ? WHERE id = ?", (data, cid))
        self.conn.execute("COMMIT")
        return len(messages)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class FlowmemPickled(Flowmem):
    """``FlowmemConversationStore`` whose kept copies are always pickled (``--pickled``, decision 0176)."""

    name = "flowmem_pickled"

    def __init__(self, folder: Path) -> None:
        from flowmem.integrations.pydantic_ai.validated import Validated

        super().__init__(folder)
        self.store._validated = Validated(plans=False)  # the plain path, as a seam of the bench


class FlowmemOneConnection(Flowmem):
    """``FlowmemConversationStore`` whose pool lends any idle connection (``--one-connection``, decision 0186's plain path)."""

    name = "flowmem_one_connection"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        pool = self.store._owns
        assert pool is not None
        pool.lends_by_mode = False  # type: ignore[attr-defined]  # the plain path, as a seam of the bench


SYSTEMS = (Flowmem, JsonFile, JsonRow)


async def _timed(work: Callable[[], Awaitable[int]], expect: int) -> tuple[float, float]:
    """The wall time and the process's CPU time (every thread's) of one operation."""
    start, cpu = time.perf_counter(), time.process_time()
    count = await work()
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    if count != expect:
        raise RuntimeError(f"expected {expect} messages, got {count}")
    return elapsed, used


def _load_of(system: Flowmem | JsonFile | JsonRow, cid: str) -> Callable[[], Awaitable[int]]:
    """The system's load of conversation ``cid``, to time."""
    return lambda: system.load(cid)


def _turn_of(
    system: Flowmem | JsonFile | JsonRow, added: list[ModelMessage], cid: str = CID
) -> Callable[[], Awaitable[int]]:
    """The system's turn adding ``added`` to conversation ``cid``, to time."""
    return lambda: system.turn(added, cid)


def conversation_ids(conversations: int) -> list[str]:
    """The ids of a run's conversations: ``CID`` alone for one, numbered for more."""
    return [CID] if conversations == 1 else [f"{CID}-{k}" for k in range(conversations)]


async def one_run(
    length: int,
    turns: int,
    run: int,
    kinds_of: tuple[type[Flowmem | JsonFile | JsonRow], ...] = SYSTEMS,
    conversations: int = 1,
    samples: dict[str, dict[str, list[float]]] | None = None,
) -> dict[str, dict[str, float]]:
    """One run at ``length``: fresh files, ``conversations`` filled on each, then their turns and loads in rotation.

    Every system holds the same conversations, each filled to ``length`` messages; step by
    step each conversation takes one turn on every system, the systems' order rotated at
    every conversation's turn, so each system runs ``conversations × turns`` turns at the same
    lengths (decision 0192). The medians are returned; every time goes into ``samples``.
    """
    with tempfile.TemporaryDirectory(prefix="bench-pa-") as tmp:
        systems = []
        for cls in kinds_of:
            folder = Path(tmp) / cls.name
            folder.mkdir()
            systems.append(cls(folder))
        filled = history(length)
        cids = conversation_ids(conversations)
        for system in systems:
            for cid in cids:
                await system.fill(filled, cid)
        kinds = ("turn", "load", "turn_cpu", "load_cpu")
        times: dict[str, dict[str, list[float]]] = {s.name: {k: [] for k in kinds} for s in systems}
        count = length
        for step in range(turns):
            added = turn(length // 4 + step)
            for k, cid in enumerate(cids):
                shift = (step * len(cids) + k + run) % len(systems)
                order = systems[shift:] + systems[:shift]
                for system in order:
                    wall, cpu = await _timed(_load_of(system, cid), count)
                    times[system.name]["load"].append(wall)
                    times[system.name]["load_cpu"].append(cpu)
                for system in order:
                    wall, cpu = await _timed(_turn_of(system, added, cid), count + 4)
                    times[system.name]["turn"].append(wall)
                    times[system.name]["turn_cpu"].append(cpu)
            count += 4
        for system in systems:
            system.close()
    if samples is not None:
        samples.update(times)
    return {
        name: {kind: statistics.median(values) for kind, values in kinds.items()}
        for name, kinds in times.items()
    }


def spread(values: list[float]) -> dict[str, float]:
    """min, median, max."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


RATIOS = (
    "turn_vs_json_file", "turn_vs_json_sqlite_row", "load_vs_validate_json",
    "turn_cpu_vs_json_file", "load_cpu_vs_validate_json",
)


def compare(args: argparse.Namespace, argv: list[str]) -> int:
    """``--srcs``: this bench once per code and round, each in a fresh process on its code, the order alternating."""
    codes = [(name, folder) for name, _, folder in (item.partition("=") for item in args.srcs.split(","))]
    passed = ["--lengths", *map(str, args.lengths), "--runs", str(args.runs), "--turns", str(args.turns)]
    passed += [] if args.conversations is None else ["--conversations", str(args.conversations)]
    found: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in codes}
    with tempfile.TemporaryDirectory(prefix="bench-pa-srcs-") as tmp:
        for round_ in range(args.rounds):
            for name, folder in codes if round_ % 2 == 0 else codes[::-1]:
                out = Path(tmp) / f"{name}-{round_}.json"
                load = os.getloadavg()[0]
                command = [sys.executable, os.path.abspath(__file__), *passed, "--json", str(out)]
                command += ["--quick"] if args.quick else []
                subprocess.run(command, env={**os.environ, "PYTHONPATH": folder}, check=True, capture_output=True)
                found[name].append({"load_at_start": load, **json.loads(out.read_text())})
                print(f"# round {round_ + 1}: {name} (load {load:.1f})", file=sys.stderr, flush=True)
    first = found[codes[0][0]][0]
    print(f"Per-run ratios, min / median / max, round by round ({args.rounds} rounds, order alternating):")
    for length in first["lengths"]:
        for label in RATIOS:
            cells = []
            for name, _ in codes:
                spreads = [r["lengths"][length]["ratios"][label] for r in found[name]]
                cells.append(f"{name} " + "; ".join(f"{s['min']:.2f}/{s['median']:.2f}/{s['max']:.2f}" for s in spreads))
            print(f"  {label:26} {length:>5}   " + "   ".join(cells))
    codes_json = {name: {"src": folder, "rounds": found[name]} for name, folder in codes}
    meta = report_json.environment(["pydantic-ai-slim", "pydantic"])
    results = {"codes": codes_json}
    report_json.write(args.json, BENCH, argv, meta, first["durability"], [], results, args.quick)
    return 0

PARTS = ("loaded", "queued", "worker_start", "commit_start", "worker_end", "end")
"""The marks of one flowmem turn (``--parts``), in order; each part is the time from one to the next."""


async def parts_run(length: int, turns: int) -> dict[str, Any]:
    """``--parts``: where flowmem's turns' wall time goes, alone on a fresh file (decision 0191).

    Marks taken in the caller's thread and the write's worker (the store's methods
    wrapped for this run only): the load returned, the write queued, the worker started,
    its ``COMMIT`` began (SQLite's fsync is in it), the worker ended, the turn returned;
    with the process's and the worker's CPU time and the statements each thread ran.
    """
    from flowmem.integrations.in_order import InOrder
    from flowmem.integrations.pydantic_ai import store as pa_store
    from flowmem.store.sqlite import _Connection

    marks: dict[str, float] = {}
    counts = {"caller_statements": 0, "worker_statements": 0}
    caller = threading.get_ident()
    write_now, queued, execute = pa_store.FlowmemConversationStore._write_now, InOrder.queued, _Connection.execute

    def timed_write(self: Any, *args: Any, **kwargs: Any) -> Any:
        marks.setdefault("worker_start", time.perf_counter())
        started = time.thread_time()
        try:
            return write_now(self, *args, **kwargs)
        finally:
            marks["worker_end"], marks["worker_cpu"] = time.perf_counter(), time.thread_time() - started

    def timed_queued(self: Any, *args: Any, **kwargs: Any) -> Any:
        marks.setdefault("queued", time.perf_counter())
        return queued(self, *args, **kwargs)

    def counted(self: Any, sql: str, *args: Any) -> Any:
        mine = threading.get_ident() == caller
        counts["caller_statements" if mine else "worker_statements"] += 1
        if sql == "COMMIT" and not mine:
            marks.setdefault("commit_start", time.perf_counter())
        return execute(self, sql, *args)

    found: dict[str, list[float]] = {}
    pa_store.FlowmemConversationStore._write_now = timed_write  # type: ignore[method-assign]
    InOrder.queued = timed_queued  # type: ignore[method-assign]
    _Connection.execute = counted  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-pa-parts-") as tmp:
            system = Flowmem(Path(tmp))
            await system.fill(history(length))
            await system.turn(turn(length // 4))  # the kept copy planned, the statements prepared
            for step in range(turns):
                added = turn(length // 4 + 1 + step)
                marks.clear()
                counts.update(caller_statements=0, worker_statements=0)
                start, cpu = time.perf_counter(), time.process_time()
                conversation = await system.store.load(CID)
                marks["loaded"] = time.perf_counter()
                assert conversation is not None
                conversation.messages.extend(added)
                await system.store.save(conversation)
                marks["end"], used = time.perf_counter(), time.process_time() - cpu
                at = [start, *(marks[name] for name in PARTS)]
                for name, begin, done in zip(PARTS, at, at[1:], strict=False):
                    found.setdefault(name, []).append(done - begin)
                found.setdefault("turn", []).append(marks["end"] - start)
                found.setdefault("turn_cpu", []).append(used)
                found.setdefault("worker_cpu", []).append(marks["worker_cpu"])
                for name, count in counts.items():
                    found.setdefault(name, []).append(count)
            system.close()
    finally:
        pa_store.FlowmemConversationStore._write_now = write_now  # type: ignore[method-assign]
        InOrder.queued = queued  # type: ignore[method-assign]
        _Connection.execute = execute  # type: ignore[method-assign]
    return {name: spread(values) for name, values in found.items()}


PART_LABELS = {
    "loaded": "load (caller)",
    "queued": "save until its write is queued (caller)",
    "worker_start": "the worker's wake-up (the caller makes the kept copy)",
    "commit_start": "the worker's statements before COMMIT",
    "worker_end": "COMMIT (SQLite's fsync in it)",
    "end": "back in the caller, the save's tail",
    "turn": "the turn",
    "turn_cpu": "the turn's CPU, every thread",
    "worker_cpu": "the worker's CPU",
}


def parts(args: argparse.Namespace, argv: list[str]) -> int:
    """``--parts``: print and write where flowmem's turn's wall time goes at each length."""
    meta = report_json.environment(["pydantic-ai-slim", "pydantic"])
    results: dict[str, Any] = {"parts": {}}
    for length in args.lengths:
        found = asyncio.run(parts_run(length, args.turns))
        results["parts"][str(length)] = found
        print(f"\n{length} messages, {args.turns} turns of flowmem alone (µs: min / median / max)")
        for name, label in PART_LABELS.items():
            s = found[name]
            print(f"  {label:55} {s['min'] * 1e6:8.0f} {s['median'] * 1e6:8.0f} {s['max'] * 1e6:8.0f}")
        for name in ("caller_statements", "worker_statements"):
            print(f"  {name:55} {found[name]['median']:8.0f}")
    with tempfile.TemporaryDirectory() as tmp:
        probe = Flowmem(Path(tmp))
        durability = {"flowmem": report_json.flowmem_sqlite_durability(probe.path, "FULL")}
        probe.close()
    report_json.describe(meta, durability)
    report_json.write(args.json, BENCH, argv, meta, durability, [], results, args.quick)
    return 0


def main(argv: list[str]) -> int:
    """Run the bench, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument(
        "--conversations", type=int, default=None,
        help=f"conversations per system and run, each filled to the length, their turns interleaved "
        f"(default {CONVERSATIONS}, --quick 2; decision 0192)",
    )
    parser.add_argument("--srcs", help="NAME=DIR,NAME=DIR: codes compared in one run, each in its own processes")
    parser.add_argument("--rounds", type=int, default=2, help="with --srcs: runs of each code, the order alternating")
    parser.add_argument("--pickled", action="store_true", help="also flowmem with its kept copies pickled")
    parser.add_argument(
        "--one-connection", action="store_true", help="also flowmem lending one connection in every mode"
    )
    parser.add_argument(
        "--parts", action="store_true", help="where flowmem's turn's wall time goes, alone (no peers, no targets)"
    )
    report_json.add_arguments(parser, BENCH, "20 messages, 2 runs of 3 turns")
    args = parser.parse_args(argv)
    if args.srcs:
        return compare(args, argv)
    if args.parts:
        logging.getLogger("flowmem.integrations.pydantic_ai").setLevel(logging.ERROR)  # the fill's (as below)
        if args.quick:
            args.lengths, args.turns = [20], 3
        return parts(args, argv)
    # the fill saves whole turns, calls with their results, in one save: the store warns
    # once that such tools ran before their calls were stored (decision 0099); not a turn's cost
    logging.getLogger("flowmem.integrations.pydantic_ai").setLevel(logging.ERROR)
    if args.quick:
        args.lengths, args.runs, args.turns = [20], 2, 3
    if args.conversations is None:
        args.conversations = 2 if args.quick else CONVERSATIONS
    meta = report_json.environment(["pydantic-ai-slim", "pydantic"])
    with tempfile.TemporaryDirectory() as tmp:
        probe = Flowmem(Path(tmp))
        durability = {
            "flowmem": report_json.flowmem_sqlite_durability(probe.path, "FULL"),
            "json_file": {"backend": "file", "durable": True, "label": "a file written and os.fsync'd"},
        }
        probe.close()
        if args.pickled:  # the same store, its copies kept otherwise
            durability["flowmem_pickled"] = durability["flowmem"]
        if args.one_connection:  # the same store, its connections lent otherwise
            durability["flowmem_one_connection"] = durability["flowmem"]
        row = JsonRow(Path(tmp))
        durability["json_sqlite_row"] = report_json.sqlite_durability(row.conn)
        row.close()
    report_json.describe(meta, durability)
    targets = report_json.Targets(args.quick)
    results: dict[str, Any] = {"lengths": {}}
    for length in args.lengths:
        kinds_of = (
            *SYSTEMS,
            *((FlowmemPickled,) if args.pickled else ()),
            *((FlowmemOneConnection,) if args.one_connection else ()),
        )
        samples: list[dict[str, dict[str, list[float]]]] = [{} for _ in range(args.runs)]
        runs = [
            asyncio.run(one_run(length, args.turns, run, kinds_of, args.conversations, samples[run]))
            for run in range(args.runs)
        ]
        ratios = {
            "turn_vs_json_file": [r["json_file"]["turn"] / r["flowmem"]["turn"] for r in runs],
            "turn_vs_json_sqlite_row": [r["json_sqlite_row"]["turn"] / r["flowmem"]["turn"] for r in runs],
            "load_vs_validate_json": [r["json_file"]["load"] / r["flowmem"]["load"] for r in runs],
        }
        cpu = {  # CPU time (every thread): what the machine's other work does not add to
            "turn_cpu_vs_json_file": [r["json_file"]["turn_cpu"] / r["flowmem"]["turn_cpu"] for r in runs],
            "load_cpu_vs_validate_json": [r["json_file"]["load_cpu"] / r["flowmem"]["load_cpu"] for r in runs],
        }
        if args.pickled:  # the plan's gain: the pickled copies' CPU ÷ flowmem's
            cpu["turn_cpu_pickled_vs_flowmem"] = [r["flowmem_pickled"]["turn_cpu"] / r["flowmem"]["turn_cpu"] for r in runs]
            cpu["load_cpu_pickled_vs_flowmem"] = [r["flowmem_pickled"]["load_cpu"] / r["flowmem"]["load_cpu"] for r in runs]
        if args.one_connection:  # decision 0186's second connection: one connection's times ÷ flowmem's
            other = "flowmem_one_connection"
            cpu["turn_one_connection_vs_flowmem"] = [r[other]["turn"] / r["flowmem"]["turn"] for r in runs]
            cpu["load_one_connection_vs_flowmem"] = [r[other]["load"] / r["flowmem"]["load"] for r in runs]
            cpu["turn_cpu_one_connection_vs_flowmem"] = [r[other]["turn_cpu"] / r["flowmem"]["turn_cpu"] for r in runs]
        each = f"{args.conversations} conversations × {args.turns} turns" if args.conversations > 1 else f"{args.turns} turns"
        print(f"\n{length} messages ({args.runs} runs of {each}; ms, median turn per run)")
        for name in [system.name for system in kinds_of]:
            turns_ms = " ".join(f"{r[name]['turn'] * 1000:7.2f}" for r in runs)
            loads_ms = " ".join(f"{r[name]['load'] * 1000:7.2f}" for r in runs)
            print(f"  {name:16} turn {turns_ms}   load {loads_ms}")
        for label, values in ratios.items():
            s = spread(values)
            print(f"  {label:26} min {s['min']:.2f}  median {s['median']:.2f}  max {s['max']:.2f}")
            targets.check(f"{label} at {length} (min of runs)", s["min"], 1.0)
        for label, values in cpu.items():
            s = spread(values)
            what = "(wall time)" if "cpu" not in label else "(CPU time)"
            print(f"  {label:26} min {s['min']:.2f}  median {s['median']:.2f}  max {s['max']:.2f}  {what}")
        results["lengths"][str(length)] = {
            "runs": runs,
            "samples": samples,  # every load's and turn's time, run by run, in the order taken
            "ratios": {label: {"per_run": values, **spread(values)} for label, values in {**ratios, **cpu}.items()},
        }
    report_json.write(args.json, BENCH, argv, meta, durability, targets.items, results, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
