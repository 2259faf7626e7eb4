"""Benchmark of the durable buffer append against the OpenAI Agents SDK and LangGraph.

Run with ``make bench`` (not part of the tests). One conversation, one message per
append, on files at the same durability: WAL with ``synchronous=FULL`` (a committed
append survives power loss) for flowmem's ``SqliteStore`` (its default), for
``agents.SQLiteSession.add_items`` and for LangGraph's ``SqliteSaver`` with the
``add_messages`` reducer. The messages are the same turns in each system's shape:
a user question, an assistant turn calling a tool, the tool result, an answer.

Beside the store's own append (the tuned call), ``MemoryService.append`` is measured
as a user writes it (``flowmem service default``) and with ``return_messages=True``
(``flowmem service +messages``: the whole buffer back after every append).

Reported: appends/second at buffer lengths 100, 1,000 and 10,000 (one buffer per
length, pre-filled in batches, then single appends timed in interleaved rounds so
machine noise and WAL checkpoints fall evenly on every length); the time to load the
last 50 rows and the whole buffer; the peak memory (tracemalloc) of one append at
each length; LangGraph at 100, 1,000 and 2,000.
With ``--postgres URL`` (or ``FLOWMEM_BENCH_POSTGRES``) the flowmem rows are also
measured on PostgreSQL, then bench/peers_postgres.py compares flowmem with the
PostgreSQL peers on that server (``--postgres start``: on a throwaway server). With ``--guarded`` every flowmem append carries a
``WriteGuard`` (a token and the session), as the HTTP API's session-scope appends
do (docs/decisions/0014).

Targets (issue 3 §6): appends/s at 10,000 rows >= 0.75 x at 100; >= 1.0 x
SQLiteSession at every length; >= 20 x LangGraph+SqliteSaver at 2,000 rows; last-50
load at 10,000 within 2 x at 100; peak append memory independent of length.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as ``python bench/store.py``, this folder is first on sys.path, where a sibling
# module (bench/http.py) would shadow the standard library's ``http`` that the peers'
# imports need. Drop it: nothing here imports a sibling.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

from flowmem.core import prepare
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, SessionRecord, Store, WriteGuard, open_store

LENGTHS = (100, 1_000, 10_000)
LANGGRAPH_LENGTHS = (100, 1_000, 2_000)
WINDOW = 200  # single appends timed at each length, one per round
ROUNDS = WINDOW  # rounds alternate every system and length, append by append
MEMORY_PROBES = 20


def turn(i: int) -> dict[str, Any]:
    """The i-th message of the conversation, in flowmem's (OpenAI chat flat) shape."""
    cid = f"call_{i // 4}"
    kind = i % 4
    if kind == 0:
        return {"role": "user", "content": f"question {i}: what is the weather in city {i}?"}
    if kind == 1:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "weather", "arguments": f'{{"city": {i}}}'},
                }
            ],
        }
    if kind == 2:
        return {"role": "tool", "content": f"sunny, {i % 30} degrees", "tool_call_id": cid}
    return {"role": "assistant", "content": f"It is sunny in city {i - 3}."}


def agents_item(i: int) -> dict[str, Any]:
    """The same message as an OpenAI Agents SDK (Responses) input item."""
    cid = f"call_{i // 4}"
    kind = i % 4
    if kind == 0:
        return {"role": "user", "content": f"question {i}: what is the weather in city {i}?"}
    if kind == 1:
        return {
            "type": "function_call",
            "call_id": cid,
            "name": "weather",
            "arguments": f'{{"city": {i}}}',
        }
    if kind == 2:
        return {
            "type": "function_call_output",
            "call_id": cid,
            "output": f"sunny, {i % 30} degrees",
        }
    return {"role": "assistant", "content": f"It is sunny in city {i - 3}."}


def langchain_message(i: int) -> Any:
    """The same message as a LangChain message."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    cid = f"call_{i // 4}"
    kind = i % 4
    if kind == 0:
        return HumanMessage(f"question {i}: what is the weather in city {i}?", id=f"m{i}")
    if kind == 1:
        return AIMessage(
            "", tool_calls=[{"id": cid, "name": "weather", "args": {"city": i}}], id=f"m{i}"
        )
    if kind == 2:
        return ToolMessage(f"sunny, {i % 30} degrees", tool_call_id=cid, id=f"m{i}")
    return AIMessage(f"It is sunny in city {i - 3}.", id=f"m{i}")


class Result:
    """Measurements of one system."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rate: dict[int, float] = {}
        self.last50: dict[int, float] = {}
        self.whole: dict[int, float] = {}
        self.peak: dict[int, int] = {}


class System:
    """One system under test: a buffer per length, filled, appended to and loaded."""

    name = ""
    every = 1  # takes part in every ``every``-th round (slow systems sample fewer appends)

    def __init__(self, lengths: tuple[int, ...]) -> None:
        self.lengths = lengths
        self.result = Result(self.name)
        self.done = dict.fromkeys(lengths, 0)
        self.spent = dict.fromkeys(lengths, 0.0)

    def fill(self, length: int) -> None:
        """Bring the buffer of ``length`` to exactly ``length`` messages (not timed)."""
        raise NotImplementedError

    def append(self, length: int, i: int) -> None:
        """Append message ``i`` alone to the buffer of ``length``."""
        raise NotImplementedError

    def last50(self, length: int) -> None:
        """Load the last 50 rows of the buffer of ``length``."""
        raise NotImplementedError

    def whole(self, length: int) -> None:
        """Load the whole buffer of ``length``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release files and connections."""

    def timed_append(self, length: int) -> None:
        """Append the next message alone to the buffer of ``length``, timing it."""
        started = time.perf_counter()
        self.append(length, length + self.done[length])
        self.spent[length] += time.perf_counter() - started
        self.done[length] += 1

    def finish(self) -> Result:
        """Turn the timings into appends per second."""
        self.result.rate = {n: self.done[n] / self.spent[n] for n in self.lengths}
        return self.result


def _best(fn: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def _peak(fn: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


class Flowmem(System):
    """flowmem's store (SQLite file at its default durability, or PostgreSQL)."""

    def __init__(
        self, name: str, url: str, lengths: tuple[int, ...], guarded: bool = False
    ) -> None:
        self.name = name
        super().__init__(lengths)
        self.store: Store = open_store(url)
        self.keys = {n: Address("session", "bench", f"chat-{n}") for n in lengths}
        self.rows = [prepare(turn(i), 1_755_000_000 + i)[0] for i in range(max(lengths) + 400)]
        self.guard: WriteGuard | None = None
        if guarded:
            from flowmem.auth import create_token

            self.store.create_session(SessionRecord("bench", "bench", "bench"))
            _, record = create_token(self.store, "bench")
            self.guard = WriteGuard(record.id, "bench")

    def fill(self, length: int) -> None:
        """Batches of 500 give the same buffer as single appends for these turns."""
        key = self.keys[length]
        self.store.clear(key)
        for start in range(0, length, 500):
            self.store.append(key, self.rows[start : min(start + 500, length)])
        assert self.store.count(key) == length

    def append(self, length: int, i: int) -> None:
        """One message per append."""
        self.store.append(self.keys[length], [self.rows[i]], guard=self.guard)

    def last50(self, length: int) -> None:
        """The last 50 rows through the position index."""
        self.store.load(self.keys[length], last=50)

    def whole(self, length: int) -> None:
        """Every row."""
        self.store.load(self.keys[length])

    def measure_memory(self) -> None:
        """Median tracemalloc peak of single appends at each length."""
        for length in self.lengths:
            start = length + self.done[length]
            peaks = []
            for i in range(start, start + MEMORY_PROBES):
                peaks.append(_peak(lambda i=i, n=length: self.append(n, i)))  # type: ignore[misc]
            self.done[length] += MEMORY_PROBES
            self.result.peak[length] = int(statistics.median(peaks))

    def close(self) -> None:
        """Drop the benchmark buffers and close the store."""
        for key in self.keys.values():
            self.store.clear(key)
        self.store.close()


class FlowmemService(Flowmem):
    """``MemoryService.append`` called as a user writes it: scope, key, one message, context.

    ``asked`` adds ``return_messages=True`` (the whole buffer back after each append:
    the default before decision 0017); without it the call is exactly the documented
    default, so this row shows what a direct caller gets.
    """

    def __init__(self, name: str, url: str, lengths: tuple[int, ...], asked: bool) -> None:
        super().__init__(name, url, lengths)
        self.keys = {n: Address("user", "bench", f"{self.name}-{n}") for n in lengths}
        self.service = MemoryService(self.store)
        self.context = ExecutionContext(user_id="bench")
        self.extra: dict[str, Any] = {"return_messages": True} if asked else {}

    def append(self, length: int, i: int) -> None:
        """One message per call, through the service with its default arguments."""
        key = self.keys[length].key
        self.service.append("user", key, turn(i), self.context, **self.extra)


class AgentsSession(System):
    """``agents.SQLiteSession.add_items``, one item per call, WAL + synchronous=FULL."""

    name = "agents SQLiteSession"

    def __init__(self, path: Path, lengths: tuple[int, ...]) -> None:
        from agents import SQLiteSession

        class FullSyncSession(SQLiteSession):
            @staticmethod
            def _configure_connection(conn: sqlite3.Connection) -> None:
                SQLiteSession._configure_connection(conn)
                conn.execute("PRAGMA synchronous=FULL")

        super().__init__(lengths)
        self.loop = asyncio.new_event_loop()
        self.sessions = {n: FullSyncSession(f"bench-{n}", db_path=path) for n in lengths}
        self.items = [agents_item(i) for i in range(max(lengths) + 400)]

    def fill(self, length: int) -> None:
        """Batches of 500 items."""
        for start in range(0, length, 500):
            batch = self.items[start : min(start + 500, length)]
            self.loop.run_until_complete(self.sessions[length].add_items(batch))

    def append(self, length: int, i: int) -> None:
        """One item per ``add_items``."""
        self.loop.run_until_complete(self.sessions[length].add_items([self.items[i]]))

    def last50(self, length: int) -> None:
        """``get_items(limit=50)``."""
        self.loop.run_until_complete(self.sessions[length].get_items(limit=50))

    def whole(self, length: int) -> None:
        """``get_items()``."""
        self.loop.run_until_complete(self.sessions[length].get_items())

    def close(self) -> None:
        """Close the sessions and the loop."""
        for session in self.sessions.values():
            session.close()
        self.loop.close()


class LangGraph(System):
    """LangGraph ``SqliteSaver`` + ``add_messages``: one ``update_state`` per message.

    Each thread is filled with one ``update_state`` carrying all earlier messages (the
    state one-by-one appends would reach); every checkpoint stores the whole list.
    """

    name = "LangGraph SqliteSaver"
    every = 20

    def __init__(self, path: Path, lengths: tuple[int, ...]) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import START, MessagesState, StateGraph

        super().__init__(lengths)
        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {})
        builder.add_edge(START, "agent")
        self.graph = builder.compile(checkpointer=SqliteSaver(self.conn))
        self.configs = {n: {"configurable": {"thread_id": f"bench-{n}"}} for n in lengths}

    def fill(self, length: int) -> None:
        """One update carrying the first ``length`` messages."""
        messages = [langchain_message(i) for i in range(length)]
        self.graph.update_state(self.configs[length], {"messages": messages})  # type: ignore[arg-type]

    def append(self, length: int, i: int) -> None:
        """One message per ``update_state``."""
        self.graph.update_state(self.configs[length], {"messages": [langchain_message(i)]})  # type: ignore[arg-type]

    def last50(self, length: int) -> None:
        """The checkpoint holds the whole list; take its last 50."""
        self.graph.get_state(self.configs[length]).values["messages"][-50:]  # type: ignore[arg-type]

    def whole(self, length: int) -> None:
        """The whole list from the latest checkpoint."""
        self.graph.get_state(self.configs[length]).values["messages"]  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def run(systems: list[System]) -> list[Result]:
    """Fill every buffer, measure loads, then time single appends in interleaved rounds.

    Each round appends one message to every system at every length, so fsync jitter
    and other load on the machine fall on all of them alike.
    """
    for system in systems:
        for length in system.lengths:
            system.fill(length)
            system.result.last50[length] = _best(lambda s=system, n=length: s.last50(n))  # type: ignore[misc]
            system.result.whole[length] = _best(lambda s=system, n=length: s.whole(n), 3)  # type: ignore[misc]
    lengths = sorted({n for system in systems for n in system.lengths})
    for round_no in range(ROUNDS):
        for length in lengths:
            for system in systems:
                if length in system.lengths and round_no % system.every == 0:
                    system.timed_append(length)
    for system in systems:
        if isinstance(system, Flowmem):
            system.measure_memory()
    return [system.finish() for system in systems]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f}"


def report(results: list[Result], ours: Result, peers: dict[str, Result]) -> list[str]:
    """Print the tables and the targets; return the failed targets."""
    print()
    print(
        f"{'system':28} {'length':>7} {'appends/s':>10} {'last50 ms':>10} {'whole ms':>10} {'peak KiB':>9}"
    )
    for res in results:
        for length in sorted(res.rate):
            peak = f"{res.peak[length] / 1024:9.1f}" if length in res.peak else f"{'-':>9}"
            print(
                f"{res.name:28} {length:7d} {res.rate[length]:10.0f} {_ms(res.last50[length]):>10}"
                f" {_ms(res.whole[length]):>10} {peak}"
            )
    failed: list[str] = []

    def target(label: str, value: float, goal: float, at_most: bool = False) -> None:
        ok = value <= goal if at_most else value >= goal
        sign = "<=" if at_most else ">="
        print(f"  {'PASS' if ok else 'FAIL'}  {label}: {value:.2f} (target {sign} {goal})")
        if not ok:
            failed.append(label)

    print("\nTargets")
    rate = ours.rate
    target("appends/s at 10,000 / at 100", rate[10_000] / rate[100], 0.75)
    agents = peers.get("agents")
    if agents:
        for length in LENGTHS:
            target(
                f"flowmem / SQLiteSession appends/s at {length}",
                rate[length] / agents.rate[length],
                1.0,
            )
    graph = peers.get("langgraph")
    if graph:
        # flowmem at 2,000 rows lies between its 1,000 and 10,000 rows; take the lower
        ours_2000 = min(rate[1_000], rate[10_000])
        target("flowmem / LangGraph appends/s at 2,000", ours_2000 / graph.rate[2_000], 20.0)
    target(
        "last-50 load time at 10,000 / at 100", ours.last50[10_000] / ours.last50[100], 2.0, True
    )
    target("peak append memory at 10,000 / at 100", ours.peak[10_000] / ours.peak[100], 1.5, True)
    return failed


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("FLOWMEM_BENCH_POSTGRES"))
    parser.add_argument("--no-peers", action="store_true", help="measure flowmem only")
    parser.add_argument(
        "--guarded", action="store_true", help="flowmem appends carry a token and session guard"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flowmem-bench-") as tmp:
        base = Path(tmp)
        print(f"flowmem store benchmark: one message per append, WAL + synchronous=FULL, in {tmp}")
        sqlite_url = f"sqlite:///{base / 'flowmem.db'}"
        systems: list[System] = [
            Flowmem("flowmem SqliteStore", sqlite_url, LENGTHS, args.guarded),
            # the service as a user calls it (the default) and asking for the buffer back
            FlowmemService("flowmem service default", sqlite_url, LENGTHS, asked=False),
            FlowmemService("flowmem service +messages", sqlite_url, LENGTHS, asked=True),
        ]
        if not args.no_peers:
            systems.append(AgentsSession(base / "agents.db", LENGTHS))
            systems.append(LangGraph(base / "langgraph.db", LANGGRAPH_LENGTHS))
        if args.postgres and args.postgres != "start":
            systems.append(Flowmem("flowmem PostgresStore", args.postgres, LENGTHS, args.guarded))
            systems.append(
                FlowmemService("flowmem pg service default", args.postgres, LENGTHS, asked=False)
            )
        try:
            results = run(systems)
        finally:
            for system in systems:
                system.close()
        ours = results[0]
        peers: dict[str, Result] = {}
        for result in results:
            if result.name.startswith("agents"):
                peers["agents"] = result
            elif result.name.startswith("LangGraph"):
                peers["langgraph"] = result
        failed = report(results, ours, peers)
    print("\nall targets met" if not failed else f"\nmissed: {', '.join(failed)}")
    if args.postgres:  # the PostgreSQL peers, same run (bench/peers_postgres.py)
        pg = ["--no-peers"] if args.no_peers else []
        if args.postgres != "start":
            pg += ["--postgres", args.postgres]
        failed += ["postgres"] if _sibling("peers_postgres").main(pg) else []
    return 1 if failed else 0


def _sibling(name: str) -> Any:
    """Load bench/<name>.py by path (this folder is not on sys.path)."""
    import importlib.util

    path = Path(__file__).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"flowmem_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
