"""Benchmark of LangGraph checkpointers: FlowmemSaver beside LangGraph's own savers (issue 23 §4).

Run with ``python bench/langgraph.py`` (not part of the tests; ``--quick`` is the smoke
run ``tests/bench/test_langgraph_bench.py`` makes). What a user writes with defaults:
a ``StateGraph(MessagesState)`` with one node, ``agent``, that returns
``{"messages": [AIMessage(...)]}`` (about 200 characters of text and an id), looped by
a conditional edge. One super-step adds one message and saves one checkpoint.

The thread grows in *segments* of 100 steps: each is one ``graph.invoke`` with a
``HumanMessage`` (a user turn, the segment's first step) after which the node loops
until the thread holds the next multiple of 100 messages. The invoke runs with
LangGraph's default durability (``async``: a checkpoint is written while the next
step runs) and returns only once every checkpoint it made is saved, so a segment's
time is everything the 100 steps cost, the invoke's read of the latest checkpoint at
its start included. **Step time at length L** is the time of the segment ending at L
÷ 100: the mean of the last 100 steps before L, so a cost that grows with the
thread shows.

Savers, each on its own storage (a fresh one per repeat), in one run:

- the *graph alone*, compiled without a checkpointer (each length is one invoke
  whose input is the first L − 99 messages): what LangGraph itself costs a step
  (``add_messages`` copies and indexes the whole list, twice a step with a
  conditional edge), so the table can show each saver's own cost beside it;
- ``FlowmemSaver`` on SQLite (``FlowmemSaver.from_conn_string("sqlite:///…")``:
  flowmem's default durability, WAL + ``synchronous=FULL``, its group commit);
- LangGraph's ``InMemorySaver`` (no storage: the floor of what a checkpoint costs);
- ``SqliteSaver`` (langgraph-checkpoint-sqlite) on a file with WAL +
  ``synchronous=FULL`` (the same durability as flowmem's);
- with ``--postgres URL`` (or ``start``: a throwaway server, or
  ``FLOWMEM_BENCH_POSTGRES``): ``PostgresSaver`` (langgraph-checkpoint-postgres) and
  ``FlowmemSaver`` on that same server, each in a schema of its own. The throwaway
  server is durable: ``fsync``, ``synchronous_commit`` and ``full_page_writes`` stay
  on as initdb sets them (the run prints what the server reports);
  ``--postgres-nondurable`` turns them off, and the output says so.

The peers write the whole message list at every step (quadratic in the thread), so
they grow for real only up to ``--max-peer-length`` (default 2,000). At a longer
length a peer is measured on a thread of its own *pre-filled* to L − 100 messages by
one ``update_state``, then one segment of 100 real steps (marked † in the table:
its step cost is that of a list of that length); a measurement whose estimate
passes ``--budget`` seconds is reported as "skipped (over budget)". FlowmemSaver
always grows its thread for real, step by step, to the longest length.

Measured at 100, 1,000, 2,000 and 10,000 messages (``--quick``: 100 and 200),
``--repeats`` times (default 2, about 8 minutes with ``--postgres start`` on a
2-core machine, 3 about 11, most of it FlowmemSaver's two threads growing to 10,000
steps; the savers take turns segment by segment, the order rotating, so machine
noise falls on all alike), reported as median (min–max):

- step time per message, and the ratio peer ÷ FlowmemSaver ("×": how many times
  faster flowmem is), each FlowmemSaver against the peers of its backend and
  ``InMemorySaver``; and each saver's own cost, its step time less the graph alone's;
  and its own CPU, the process's CPU time per step (every thread, so the saver's
  background writes too; not the server's) less the graph alone's, which the
  machine's load and the other savers' server work add little to (issue 42 §4's
  "flat", judged on both); and the saver's CPU less a *null saver*'s (a checkpointer
  keeping LangGraph's checkpoint object, no copy: LangGraph's own checkpointing work,
  which grows with the thread for every saver; ``--only null`` selects it);
- before each repeat's measures every saver runs one untimed segment on a thread of its
  own (``--no-warm``: not), so the first length is not also the saver's first use (its
  pool's connections, the server's prepared statements, first-call caches);
- the saver's *calls' own CPU*: the thread CPU time (``time.thread_time``) spent inside
  the checkpointer's own ``put``, ``put_writes`` and ``get_tuple`` calls, summed over a
  segment's calls (each in the thread that makes it: LangGraph's background writers
  too) ÷ its steps, less the garbage collector's passes those calls happened to start
  (they scan the whole heap, LangGraph's state of the thread included: reported apart).
  It leaves out LangGraph's loop and the other threads, so it does not move with them;
  its ratio at each length ÷ at the first is taken per run and reported as min / median
  / max over the runs, and against a *new* thread's first
  segment run right after each measured length, in the same process at the same moment
  (the machine's drift and the process's growing heap, which a new thread pays alike,
  cancel): issue 42 §4's "flat" (decision 0172; the server's CPU and work a call hands
  to another thread are not in it);
- reading the latest checkpoint: ``saver.get_tuple(config)`` and
  ``graph.get_state(config)`` on the saver that wrote the thread (best of 5), and for
  FlowmemSaver also *cold*: the first ``get_tuple`` of a new ``FlowmemSaver`` on the
  same database (another process, a restarted app: nothing remembered);
- the storage after 2,000 steps (the grown thread; ``--quick``: 200): SQLite, the file plus its -wal
  after ``PRAGMA wal_checkpoint(TRUNCATE)``; PostgreSQL, ``pg_total_relation_size``
  of the saver's tables; ``InMemorySaver``, the serialized bytes it holds; beside
  the JSON size of the 2,000 messages (role, content, id; compact separators); the
  same size is also taken, untimed, at every measured length a thread grew to (the
  JSON's ``storage_bytes`` per length, which ``bench/report.py`` plots).

Targets (issue 23 §4): FlowmemSaver step time at 10,000 ÷ at 100 <= 2; FlowmemSaver
>= 20 x SqliteSaver per step at 2,000 and >= 1 x InMemorySaver at 10,000; storage
after 2,000 steps <= 3 x the messages' JSON; the latest-checkpoint read flat in the
thread length (10,000 ÷ 100 <= 2, reported, warm and cold). Every sample, the
durability of each saver's storage (as it reports it) and the targets go to
``bench/results/langgraph.json`` beside the table (``--json PATH``: elsewhere). Exit 1 when a target is missed (never for
``--quick``, which measures too little to judge).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import glob
import json
import os
import random
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

# Run as ``python bench/langgraph.py`` this folder is first on sys.path, where this very
# file would shadow the ``langgraph`` package (and bench/http.py the standard ``http``).
# Drop it; the benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
# first: the ``pgserver`` wheel (the dev extra's PostgreSQL) would shadow bench/lib/pgserver.py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import pgserver
import report_json
import round_trips
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_to_dict
from langgraph.graph import END, START, MessagesState, StateGraph

PACKAGES = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
)

LENGTHS = (100, 1_000, 2_000, 10_000)
QUICK_LENGTHS = (100, 200)  # two segments: a grown thread and its growth, nothing judged
SEGMENT = 100  # steps per invoke; step time at L = the segment ending at L ÷ SEGMENT
STORAGE_AT = 2_000  # the storage is measured when the grown thread reaches this (or its longest)
READS = 5  # warm reads per length (best of); a cold read is timed once per repeat
GRAPH_ALONE = "graph alone (no checkpointer)"
NULL_SAVER = "null saver (LangGraph's checkpointing alone)"
FLOWMEM_SQLITE = "FlowmemSaver SQLite"
FLOWMEM_PG = "FlowmemSaver PostgreSQL"
INMEMORY = "InMemorySaver"
SQLITE_SAVER = "SqliteSaver"
POSTGRES_SAVER = "PostgresSaver"

_VOCABULARY = (
    "the forecast for coming days shows mild temperatures with light breeze from west rain "
    "is unlikely before weekend and evenings stay clear order shipped yesterday should "
    "arrive on tuesday tracking number sent by mail invoice attached please confirm your "
    "address details refund was approved amount will appear within five business days "
    "meeting moved to thursday afternoon room changed agenda includes budget review "
    "hiring plan quarterly goals results look promising although numbers need another "
    "check before we share them widely I found three options that match what you asked"
)
_WORDS = _VOCABULARY.split()


def text(i: int, size: int) -> str:
    """Message ``i``'s text: about ``size`` characters of words, different per message."""
    pick = random.Random(i)
    words: list[str] = []
    length = 0
    while length < size:
        word = pick.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size].rstrip() + "."


def message(i: int) -> BaseMessage:
    """The thread's i-th message: a user turn at each segment's start, else the agent's reply."""
    if i % SEGMENT == 0:
        return HumanMessage(text(i, 120), id=f"human-{i:06d}")
    return AIMessage(text(i, 200), id=f"ai-{i:06d}")


def agent(state: MessagesState) -> dict[str, Any]:
    """The graph's one node: one AI message (~200 characters, with an id) per step."""
    return {"messages": [message(len(state["messages"]))]}


def route(state: MessagesState) -> str:
    """Loop until the thread holds the next multiple of ``SEGMENT`` messages."""
    return "agent" if len(state["messages"]) % SEGMENT else END


def build_graph(checkpointer: Any) -> Any:
    """``StateGraph(MessagesState)``: START → agent, agent ↺ until the segment is full."""
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["agent", END])
    return builder.compile(checkpointer=checkpointer)


def json_size(messages: list[BaseMessage]) -> int:
    """Bytes of the messages themselves as compact JSON: role, content, id."""
    role = {"human": "user", "ai": "assistant"}
    flat = [{"role": role.get(m.type, m.type), "content": m.content, "id": m.id} for m in messages]
    return len(json.dumps(flat, separators=(",", ":"), ensure_ascii=False).encode())


def langchain_json_size(messages: list[BaseMessage]) -> int:
    """Bytes of LangChain's own JSON of the messages (``messages_to_dict``: every field)."""
    return len(json.dumps(messages_to_dict(messages), ensure_ascii=False).encode())


# --- savers -----------------------------------------------------------------------------
CLOCKED = ("put", "put_writes", "get_tuple")
"""The checkpointer calls whose own thread CPU ``CallClock`` sums."""


class CallClock:
    """The thread CPU time spent inside a checkpointer's ``CLOCKED`` calls, summed across threads.

    Each call is wrapped on the instance: the time is ``time.thread_time`` in the thread
    that makes the call, from its start to its return, so LangGraph's own loop and other
    threads' work are not in it (a call that hands work to another thread and waits
    counts only its own thread's part). A call made inside another clocked call (a
    ``put`` that reads with ``get_tuple``) is counted once, by the outer one.

    The garbage collector's passes that a call's allocations happen to start run in the
    call's thread and scan the whole process's heap, which LangGraph's state of the
    thread makes grow with it: their time inside calls is summed apart (``gc_seconds``,
    through ``gc.callbacks``) and ``own`` is the calls' time less it (decision 0172).
    """

    def __init__(self, checkpointer: Any) -> None:
        import threading

        self._lock = threading.Lock()
        self._inside = threading.local()
        self.seconds = 0.0
        self.gc_seconds = 0.0
        self.calls = 0
        for name in CLOCKED:
            setattr(checkpointer, name, self._clocked(getattr(checkpointer, name)))
        gc.callbacks.append(self._collected)

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks``: the time of a pass made inside a clocked call of this thread."""
        if not getattr(self._inside, "depth", 0):
            return
        if phase == "start":
            self._inside.gc_started = time.thread_time()
        elif phase == "stop" and getattr(self._inside, "gc_started", None) is not None:
            spent = time.thread_time() - self._inside.gc_started
            self._inside.gc_started = None
            with self._lock:
                self.gc_seconds += spent

    def _clocked(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def clocked(*args: Any, **kwargs: Any) -> Any:
            if getattr(self._inside, "depth", 0):
                return call(*args, **kwargs)
            self._inside.depth = 1
            started = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                self._inside.depth = 0
                with self._lock:
                    self.seconds += spent
                    self.calls += 1

        return clocked

    @property
    def own(self) -> float:
        """The calls' thread CPU less the collector's passes inside them (seconds)."""
        return self.seconds - self.gc_seconds

    def reset(self) -> None:
        """Start summing again from zero."""
        with self._lock:
            self.seconds, self.gc_seconds, self.calls = 0.0, 0.0, 0

    def close(self) -> None:
        """Stop watching the collector."""
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)


class Saver:
    """One checkpointer under test, on fresh storage per repeat.

    ``group``: the backend its ratios are taken in; ``flowmem``: the reference of its
    group; ``grows_to``: the longest length its thread grows to step by step (longer
    ones are pre-filled).
    """

    name = ""
    group = "SQLite"
    flowmem = False
    baseline = False  # the graph without a checkpointer: what LangGraph itself costs
    durability = ""

    def __init__(self, grows_to: int) -> None:
        self.grows_to = grows_to
        self.stack = contextlib.ExitStack()
        self.checkpointer: Any = None
        self.graph: Any = None
        self.cpu = 0.0  # the process's CPU seconds of the last timed invoke
        self.clock: CallClock | None = None  # the thread CPU inside its own calls
        self.calls_cpu: float | None = None  # the clock's own seconds over the last timed invoke
        self.calls_gc: float | None = None  # the collector's seconds inside its calls, the same invoke

    def open(self, repeat: int) -> None:
        """Make the checkpointer on fresh storage, clock its calls and compile the graph on it."""
        self.checkpointer = self.make(repeat)
        self.clock = None if self.checkpointer is None else CallClock(self.checkpointer)
        self.graph = build_graph(self.checkpointer)

    def make(self, repeat: int) -> Any:
        """A checkpointer on storage of its own for this repeat."""
        raise NotImplementedError

    def size(self) -> tuple[int | None, dict[str, int]]:
        """(bytes the saver's storage holds, bytes per table or part) now."""
        return None, {}

    def cold(self) -> Any | None:
        """A new saver on the same storage, remembering nothing (None: not measured)."""
        return None

    def database(self) -> dict[str, Any]:
        """The durability of the saver's open storage, as it reports it (report_json's entry)."""
        return report_json.no_database(self.durability)

    def close(self) -> None:
        """Close connections and remove the repeat's storage."""
        if self.clock is not None:
            self.clock.close()
        self.stack.close()
        self.checkpointer = self.graph = self.clock = None


def sqlite_size(path: Path) -> tuple[int, dict[str, int]]:
    """The file plus its -wal after a TRUNCATE checkpoint, and bytes per table (dbstat)."""
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        parts: dict[str, int] = {}
        with contextlib.suppress(sqlite3.Error):  # dbstat is a compile option
            rows = conn.execute(
                "SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m "
                "ON d.name = m.name GROUP BY m.tbl_name ORDER BY 2 DESC"
            ).fetchall()
            parts = {str(name): int(size) for name, size in rows}
    finally:
        conn.close()
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0), parts


class FlowmemSqlite(Saver):
    """``FlowmemSaver.from_conn_string("sqlite:///…")``: flowmem's default durability."""

    name = FLOWMEM_SQLITE
    flowmem = True
    durability = "WAL, synchronous=FULL (flowmem's default, group commit)"

    def __init__(self, base: Path, grows_to: int) -> None:
        super().__init__(grows_to)
        self.base = base
        self.path = base

    def make(self, repeat: int) -> Any:
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        self.path = self.base / f"flowmem-r{repeat}.db"
        return self.stack.enter_context(FlowmemSaver.from_conn_string(f"sqlite:///{self.path}"))

    def size(self) -> tuple[int | None, dict[str, int]]:
        return sqlite_size(self.path)

    def cold(self) -> Any:
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        return FlowmemSaver(self.checkpointer.memory)

    def database(self) -> dict[str, Any]:
        store = self.checkpointer.memory.store
        return report_json.flowmem_sqlite_durability(store.path, store.synchronous)

    def close(self) -> None:
        super().close()
        for found in glob.glob(f"{self.path}*"):
            os.unlink(found)


class GraphAlone(Saver):
    """The graph compiled without a checkpointer: LangGraph's own cost of a step.

    No thread persists, so each length is one invoke whose input is the thread's
    first L − 99 messages; the node then runs the last 99 steps to L.
    """

    name = GRAPH_ALONE
    group = "memory"
    baseline = True
    durability = "none (no checkpointer)"

    def make(self, repeat: int) -> Any:
        return None


class NullSaver(Saver):
    """A checkpointer that keeps the latest checkpoint object as LangGraph hands it: no copy, no bytes.

    Its step is LangGraph's own work of a step with a checkpointer (the checkpoint made,
    its channels copied, the background put scheduled), which every saver pays and which
    grows with the thread; a saver's CPU less this one's is what the saver itself does.
    """

    name = NULL_SAVER
    group = "memory"
    durability = "none (the checkpoint object kept)"

    def make(self, repeat: int) -> Any:
        from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

        class Null(BaseCheckpointSaver):  # type: ignore[type-arg]
            def __init__(self) -> None:
                super().__init__()
                self.last: dict[str, Any] = {}

            def get_tuple(self, config: Any) -> Any:
                return self.last.get(config["configurable"]["thread_id"])

            def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
                made = {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}
                thread = config["configurable"]["thread_id"]
                self.last[thread] = CheckpointTuple(made, checkpoint, metadata, config, [])
                return made

            def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
                return None

        return Null()


class InMemory(Saver):
    """LangGraph's ``InMemorySaver``: serialized checkpoints in dictionaries."""

    name = INMEMORY
    group = "memory"
    durability = "none (process memory)"

    def make(self, repeat: int) -> Any:
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()

    def size(self) -> tuple[int | None, dict[str, int]]:
        saver = self.checkpointer
        parts = {
            "checkpoints": _bytes_in(saver.storage),
            "blobs": _bytes_in(saver.blobs),
            "writes": _bytes_in(saver.writes),
        }
        return sum(parts.values()), parts


def _bytes_in(value: Any) -> int:
    """Bytes of every ``bytes`` value inside nested dicts, lists and tuples."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, dict):
        return sum(_bytes_in(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_bytes_in(v) for v in value)
    return 0


class Sqlite(Saver):
    """``SqliteSaver`` on a file with WAL + ``synchronous=FULL`` (flowmem's durability)."""

    name = SQLITE_SAVER
    durability = "WAL, synchronous=FULL"

    def __init__(self, base: Path, grows_to: int) -> None:
        super().__init__(grows_to)
        self.base = base
        self.path = base

    def make(self, repeat: int) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.path = self.base / f"sqlitesaver-r{repeat}.db"
        conn = sqlite3.connect(str(self.path), check_same_thread=False)
        self.stack.callback(conn.close)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        self.conn = conn
        return SqliteSaver(conn)

    def size(self) -> tuple[int | None, dict[str, int]]:
        return sqlite_size(self.path)

    def database(self) -> dict[str, Any]:
        return report_json.sqlite_durability(self.conn)

    def close(self) -> None:
        super().close()
        for found in glob.glob(f"{self.path}*"):
            os.unlink(found)


def database_url(url: str, database: str) -> str:
    """``url`` naming another database of the same server."""
    head, _, tail = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{database}" + (f"?{tail}" if tail else "")


class OnPostgres(Saver):
    """A saver in a schema of its own on the benchmark's PostgreSQL server."""

    group = "PostgreSQL"

    def __init__(self, url: str, grows_to: int) -> None:
        super().__init__(grows_to)
        self.url = url
        self.schema = ""

    def database(self) -> dict[str, Any]:
        return pgserver.postgres_durability(self.url)

    def make(self, repeat: int) -> Any:
        import psycopg

        # a fresh database per saver and repeat (issue 42 #5), dropped at the repeat's end
        self.schema = f"lgbench_{uuid.uuid4().hex[:8]}_r{repeat}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.schema}")
        self.stack.callback(self.drop)
        return self.connect(database_url(self.url, self.schema))

    def connect(self, url: str) -> Any:
        """The checkpointer on ``url`` (closed by ``self.stack``)."""
        raise NotImplementedError

    def drop(self) -> None:
        """Drop the repeat's database."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.schema} WITH (FORCE)")

    def size(self) -> tuple[int | None, dict[str, int]]:
        import psycopg

        url = database_url(self.url, self.schema)
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'm') ORDER BY 2 DESC",
            ).fetchall()
        parts = {str(name): int(size) for name, size in rows}
        return sum(parts.values()), parts


class FlowmemPostgres(OnPostgres):
    """``FlowmemSaver.from_conn_string("postgresql://…")``."""

    name = FLOWMEM_PG
    flowmem = True

    def connect(self, url: str) -> Any:
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        return self.stack.enter_context(FlowmemSaver.from_conn_string(url))

    def cold(self) -> Any:
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        return FlowmemSaver(self.checkpointer.memory)


class Postgres(OnPostgres):
    """``PostgresSaver.from_conn_string`` (one connection, autocommit), after ``setup()``."""

    name = POSTGRES_SAVER

    def connect(self, url: str) -> Any:
        from langgraph.checkpoint.postgres import PostgresSaver

        saver = self.stack.enter_context(PostgresSaver.from_conn_string(url))
        saver.setup()
        return saver


# --- the run ------------------------------------------------------------------------------
_freeze_after_collect = [False]
"""--quick: what a collection before a measure leaves is frozen (``gc.freeze``), so the next
one scans only what was made since, not LangChain's and LangGraph's modules (a quick run's
24 collections were ~2 s of its ~7.4 s of own CPU; decision 0188). A full run's collector is
unchanged: its measures, the collector's passes inside the savers' calls among them, are judged."""


def _collect() -> None:
    """A full collection before a measure; in a quick run, what survives it is frozen."""
    gc.collect()
    if _freeze_after_collect[0]:
        gc.freeze()


def config(thread: str) -> dict[str, Any]:
    """The invoke config of a thread (a segment needs ``SEGMENT`` + a few steps)."""
    return {"configurable": {"thread_id": thread}, "recursion_limit": SEGMENT + 10}


def read_config(thread: str) -> dict[str, Any]:
    """The config a read names: the thread's latest checkpoint."""
    return {"configurable": {"thread_id": thread}}


def segment(saver: Saver, thread: str, start: int, measured: bool = True) -> float:
    """One invoke: the user turn ``start`` and the node's steps up to ``start + SEGMENT``.

    Returns the wall time; the process's CPU time of the invoke (every thread: the
    saver's background writes too) goes to ``saver.cpu``, the thread CPU inside the
    checkpointer's own calls less the collector's passes in them (``CallClock``) to
    ``saver.calls_cpu``, those passes' to ``saver.calls_gc``.
    """
    if measured:
        _collect()  # the garbage of the savers before falls on nobody
    if saver.clock is not None:
        saver.clock.reset()
    cpu = time.process_time()
    started = time.perf_counter()
    saver.graph.invoke({"messages": [message(start)]}, config(thread))
    spent = time.perf_counter() - started
    saver.cpu = time.process_time() - cpu
    saver.calls_cpu = None if saver.clock is None else saver.clock.own
    saver.calls_gc = None if saver.clock is None else saver.clock.gc_seconds
    return spent


def best(fn: Callable[[], object], times: int) -> float:
    """The fastest of ``times`` calls, seconds."""
    found = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        found.append(time.perf_counter() - started)
    return min(found)


class Results:
    """Every sample of the run, one per repeat: keys (saver, length)."""

    def __init__(self) -> None:
        self.step: dict[tuple[str, int], list[float]] = {}
        self.cpu: dict[tuple[str, int], list[float]] = {}  # the process's CPU per step
        self.calls: dict[tuple[str, int], list[float]] = {}  # thread CPU in its calls, per step
        self.calls_gc: dict[tuple[str, int], list[float]] = {}  # the collector's part of it
        # the calls' CPU per step at L ÷ a new thread's right after it, per run
        self.beside: dict[tuple[str, int], list[float]] = {}
        self.how: dict[tuple[str, int], str] = {}  # "grown", "prefilled", "skipped (…)"
        self.reads: dict[tuple[str, str, int], list[float]] = {}
        self.size: dict[str, list[int]] = {}
        self.size_at: dict[tuple[str, int], list[int]] = {}  # (saver, length): grown threads
        self.parts: dict[str, dict[str, int]] = {}
        self.storage_at = STORAGE_AT
        self.durability: dict[str, dict[str, Any]] = {}  # saver -> its storage's durability
        self.json_bytes = 0
        self.langchain_json_bytes = 0
        self.trips: dict[str, float] = {}  # saver -> round trips per step (PostgreSQL)

    @staticmethod
    def add(table: dict[Any, list[Any]], key: Any, value: Any) -> None:
        """Record one sample."""
        table.setdefault(key, []).append(value)


def measure_reads(saver: Saver, thread: str, length: int, results: Results) -> None:
    """Time reading the latest checkpoint; check it holds exactly the thread's messages."""
    conf = read_config(thread)
    found = saver.checkpointer.get_tuple(conf)
    got = found.checkpoint["channel_values"]["messages"]
    expected = [message(i).id for i in range(length)]
    if [m.id for m in got] != expected:
        raise AssertionError(
            f"{saver.name}: the latest checkpoint does not hold messages 0..{length}"
        )
    results.add(
        results.reads,
        (saver.name, "get_tuple", length),
        best(lambda: saver.checkpointer.get_tuple(conf), READS),
    )
    results.add(
        results.reads,
        (saver.name, "get_state", length),
        best(lambda: saver.graph.get_state(conf), READS),
    )
    fresh = saver.cold()
    if fresh is None:
        return
    _collect()
    started = time.perf_counter()
    tup = fresh.get_tuple(conf)
    results.add(
        results.reads, (saver.name, "get_tuple cold", length), time.perf_counter() - started
    )
    if [m.id for m in tup.checkpoint["channel_values"]["messages"]] != expected:
        raise AssertionError(f"{saver.name}: a cold read does not hold messages 0..{length}")


def run(
    savers: list[Saver],
    lengths: tuple[int, ...],
    repeats: int,
    prefill: bool,
    budget: float,
    warm: bool = True,
) -> Results:
    """Grow every saver's thread segment by segment, then the pre-filled lengths; per repeat.

    ``warm``: each saver first runs one untimed segment on a thread of its own, so the
    first measured length is not also the saver's first use (decision 0172).
    """
    results = Results()
    results.storage_at = storage_at = min(STORAGE_AT, max(lengths))
    grown = [message(i) for i in range(storage_at)]
    results.json_bytes = json_size(grown)
    results.langchain_json_bytes = langchain_json_size(grown)
    for repeat in range(repeats):
        for saver in savers:
            saver.open(repeat)
        if repeat == 0:  # as each saver's storage reports it, once it is open
            for saver in savers:
                results.durability[saver.name] = entry = saver.database()
                saver.durability = entry["label"]
            print("\n".join(report_json.durability_lines(results.durability)), flush=True)
        try:
            if warm:  # the pool's connections, prepared statements, caches: not the first length's cost
                for saver in savers:
                    if not saver.baseline:
                        segment(saver, f"warm-r{repeat}", 0, measured=False)
            thread = f"grown-r{repeat}"
            top = max(lengths)
            started = time.perf_counter()
            for end in range(SEGMENT, top + 1, SEGMENT):
                turn = end // SEGMENT % len(savers)
                for saver in savers[turn:] + savers[:turn]:
                    if end > min(saver.grows_to, top):
                        continue
                    spent = segment(saver, thread, end - SEGMENT, end in lengths)
                    if end in lengths and end != lengths[0] and saver.clock is not None:
                        # a new thread's first segment right after: the same process, the
                        # same moment; what differs is the thread's length (decision 0172)
                        mine, cpu = saver.calls_cpu, saver.cpu
                        segment(saver, f"beside-r{repeat}-{end}", 0)
                        if mine is not None and saver.calls_cpu:
                            ratio = mine / saver.calls_cpu
                            results.add(results.beside, (saver.name, end), ratio)
                        saver.calls_cpu, saver.cpu = mine, cpu
                    if end in lengths:
                        results.add(results.step, (saver.name, end), spent / SEGMENT)
                        results.add(results.cpu, (saver.name, end), saver.cpu / SEGMENT)
                        if saver.calls_cpu is not None and saver.calls_gc is not None:
                            results.add(results.calls, (saver.name, end), saver.calls_cpu / SEGMENT)
                            results.add(results.calls_gc, (saver.name, end), saver.calls_gc / SEGMENT)
                        results.how[(saver.name, end)] = "grown"
                        measure_reads(saver, thread, end, results)
                    if end in lengths or end == storage_at:  # not timed: after the segment
                        size, parts = saver.size()
                        if size is not None and end in lengths:
                            results.add(results.size_at, (saver.name, end), size)
                        if size is not None and end == storage_at:
                            results.add(results.size, saver.name, size)
                            results.parts[saver.name] = parts
                if end in lengths:
                    print(
                        f"repeat {repeat + 1}/{repeats}: {end:,} messages grown "
                        f"({time.perf_counter() - started:.0f} s)",
                        flush=True,
                    )
            for saver in savers:
                for length in lengths:
                    if length <= saver.grows_to:
                        continue
                    key = (saver.name, length)
                    if saver.baseline:
                        results.add(results.step, key, alone(saver, length) / SEGMENT)
                        results.add(results.cpu, key, saver.cpu / SEGMENT)
                        results.how[key] = "graph alone"
                        continue
                    if not prefill:
                        results.how[key] = "skipped (--no-prefill)"
                        continue
                    estimate = estimate_segment(results, saver.name, length)
                    if estimate > budget:
                        results.how[key] = (
                            f"skipped (over budget: ~{estimate:.0f} s > {budget:.0f} s)"
                        )
                        continue
                    spent = prefilled(saver, f"prefilled-r{repeat}-{length}", length)
                    results.add(results.step, key, spent / SEGMENT)
                    results.add(results.cpu, key, saver.cpu / SEGMENT)
                    if saver.calls_cpu is not None and saver.calls_gc is not None:
                        results.add(results.calls, key, saver.calls_cpu / SEGMENT)
                        results.add(results.calls_gc, key, saver.calls_gc / SEGMENT)
                    results.how[key] = "prefilled"
                    measure_reads(saver, f"prefilled-r{repeat}-{length}", length, results)
                    print(
                        f"repeat {repeat + 1}/{repeats}: {saver.name} at {length:,} (pre-filled)",
                        flush=True,
                    )
        finally:
            for saver in savers:
                saver.close()
    return results


def count_trips(savers: list[Saver], results: Results) -> None:
    """Round trips per step of each PostgreSQL saver: one segment of a new thread, counted."""
    for saver in savers:
        if saver.group != "PostgreSQL":
            continue
        saver.open(0)
        try:
            segment(saver, "round-trips", 0, measured=False)  # the thread's first write
            with round_trips.counting() as counter:
                segment(saver, "round-trips", SEGMENT, measured=False)
            results.trips[saver.name] = counter.trips / SEGMENT
        finally:
            saver.close()


def estimate_segment(results: Results, name: str, length: int) -> float:
    """Seconds one segment at ``length`` should take: the longest measured, scaled linearly."""
    known = [(n, median(t)) for (s, n), t in results.step.items() if s == name and n < length]
    if not known:
        return 0.0
    n, step = max(known)
    return step * SEGMENT * length / n * 2  # the pre-fill costs about a segment more


def alone(saver: Saver, length: int) -> float:
    """The graph without a checkpointer: one invoke from L − 99 messages of input to L."""
    start = length - SEGMENT
    given = [message(i) for i in range(start + 1)]
    _collect()
    cpu = time.process_time()
    started = time.perf_counter()
    saver.graph.invoke({"messages": given}, {"recursion_limit": SEGMENT + 10})
    spent = time.perf_counter() - started
    saver.cpu = time.process_time() - cpu
    return spent


def prefilled(saver: Saver, thread: str, length: int) -> float:
    """A thread brought to ``length - SEGMENT`` messages by one ``update_state``; time one segment."""
    start = length - SEGMENT
    saver.graph.update_state(read_config(thread), {"messages": [message(i) for i in range(start)]})
    return segment(saver, thread, start)


# --- the report ---------------------------------------------------------------------------
def median(values: list[float]) -> float:
    """The median sample."""
    return float(statistics.median(values))


def spread(values: list[float], fmt: str = "{:,.2f}") -> str:
    """``median (min–max)`` of the samples."""
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def report(
    savers: list[Saver],
    results: Results,
    lengths: tuple[int, ...],
    meta: dict[str, Any],
    quick: bool,
) -> list[dict[str, Any]]:
    """Print the tables (markdown) and the targets; return the targets with their verdicts."""
    repeats = max((len(v) for v in results.step.values()), default=0)
    print()
    report_json.describe(meta, results.durability)
    header = " | ".join(f"{n:,}" for n in lengths)
    rule = "---:|" * len(lengths)

    print(
        f"\n## Step time, ms per message (one super-step, one checkpoint), median (min–max) of {repeats}\n"
    )
    print(f"| saver | {header} | {lengths[-1]:,} ÷ {lengths[0]:,} |")
    print(f"|---|{rule}---:|")
    for s in savers:
        cells = [_step_cell(results, s.name, n) for n in lengths]
        print(f"| {s.name} | " + " | ".join(cells) + f" | {_growth(results, s.name, lengths)} |")
    if any(how == "prefilled" for how in results.how.values()):
        print(f"\n† pre-filled to L − {SEGMENT} messages by one update_state, then {SEGMENT} steps")

    print(
        "\nFlowmemSaver ÷ peer, speed per step (peer step time ÷ FlowmemSaver's in the same "
        "run), median [min–max] of the runs' ratios:\n"
    )
    print(f"| FlowmemSaver | peer | {header} |")
    print(f"|---|---|{rule}")
    for ours, peer in _pairs(savers):
        cells = []
        for n in lengths:
            ratios = _run_ratios(results, ours.name, peer.name, n)
            if not ratios:
                cells.append("—")
                continue
            cells.append(f"{median(ratios):,.2f}× [{min(ratios):,.2f}–{max(ratios):,.2f}]")
        print(f"| {ours.name} | {peer.name} | " + " | ".join(cells) + " |")
    if results.trips:
        print("\nRound trips per step (a segment of a new thread, counted; PostgreSQL):\n")
        for name, trips in results.trips.items():
            print(f"- {name}: {trips:.2f}")

    if any(s.baseline for s in savers):
        print(
            f"\nThe checkpointer's own cost: step time − the {GRAPH_ALONE}'s, ms per step "
            "(medians):\n"
        )
        print(f"| saver | {header} | {lengths[-1]:,} ÷ {lengths[0]:,} |")
        print(f"|---|{rule}---:|")
        for s in savers:
            if s.baseline:
                continue
            own = [_own(results, s.name, n) for n in lengths]
            cells = ["—" if v is None else f"{v * 1000:,.3f}" for v in own]
            growth = "—" if own[0] is None or own[-1] is None else f"{own[-1] / own[0]:,.1f}"
            print(f"| {s.name} | " + " | ".join(cells) + f" | {growth} |")

        print(
            f"\nThe checkpointer's own CPU: the process's CPU per step (every thread) − the "
            f"{GRAPH_ALONE}'s, ms per step (medians; the server's CPU not included):\n"
        )
        print(f"| saver | {header} | {lengths[-1]:,} ÷ {lengths[0]:,} |")
        print(f"|---|{rule}---:|")
        for s in savers:
            if s.baseline:
                continue
            own = [_own(results, s.name, n, results.cpu) for n in lengths]
            cells = ["—" if v is None else f"{v * 1000:,.3f}" for v in own]
            growth = "—" if own[0] is None or own[-1] is None else f"{own[-1] / own[0]:,.1f}"
            print(f"| {s.name} | " + " | ".join(cells) + f" | {growth} |")

    if any(s.name == NULL_SAVER for s in savers):
        print(
            f"\nThe saver's own CPU: the process's CPU per step − the {NULL_SAVER}'s "
            "(LangGraph's checkpointing work taken out), ms per step (medians):\n"
        )
        print(f"| saver | {header} | {lengths[-1]:,} ÷ {lengths[0]:,} |")
        print(f"|---|{rule}---:|")
        for s in savers:
            if s.baseline or s.name == NULL_SAVER:
                continue
            own = [_own(results, s.name, n, results.cpu, NULL_SAVER) for n in lengths]
            cells = ["—" if v is None else f"{v * 1000:,.3f}" for v in own]
            growth = "—" if own[0] is None or own[-1] is None else f"{own[-1] / own[0]:,.1f}"
            print(f"| {s.name} | " + " | ".join(cells) + f" | {growth} |")

    if results.calls:
        print(
            "\nThe saver's calls' own CPU: thread CPU inside its put, put_writes and get_tuple "
            "calls less the garbage collector's passes in them, ms per step, median (min–max) "
            f"of {repeats}; each run's at L ÷ at {lengths[0]:,}, min / median / max of the "
            "runs; and the collector's passes inside the calls, ms per step, medians "
            "(decision 0172):\n"
        )
        ratio_heads = " | ".join(f"{n:,} ÷ {lengths[0]:,}" for n in lengths[1:])
        gc_heads = " | ".join(f"gc at {n:,}" for n in lengths)
        print(f"| saver | {header} | {ratio_heads} | {gc_heads} |")
        print(f"|---|{rule}" + "---:|" * (2 * len(lengths) - 1))
        for s in savers:
            if (s.name, lengths[0]) not in results.calls:
                continue
            cells = []
            for n in lengths:
                found = results.calls.get((s.name, n))
                cells.append(spread([t * 1000 for t in found], "{:,.3f}") if found else "—")
            for n in lengths[1:]:
                ratios = _calls_ratios(results, s.name, n, lengths[0])
                cells.append(
                    f"{min(ratios):,.2f} / {median(ratios):,.2f} / {max(ratios):,.2f}" if ratios else "—"
                )
            for n in lengths:
                passes = results.calls_gc.get((s.name, n))
                cells.append(f"{median(passes) * 1000:,.3f}" if passes else "—")
            print(f"| {s.name} | " + " | ".join(cells) + " |")

    if results.beside:
        print(
            "\nThe saver's calls' own CPU per step on the thread at L ÷ on a new thread's first "
            f"{SEGMENT} steps right after it (the same process and moment: the machine's drift "
            "and the process's growing heap cancel), min / median / max of the runs "
            "(decision 0172):\n"
        )
        print("| saver | " + " | ".join(f"{n:,}" for n in lengths[1:]) + " |")
        print("|---|" + "---:|" * (len(lengths) - 1))
        for s in savers:
            cells = []
            for n in lengths[1:]:
                found = results.beside.get((s.name, n))
                cells.append(
                    f"{min(found):,.2f} / {median(found):,.2f} / {max(found):,.2f}" if found else "—"
                )
            if any(cell != "—" for cell in cells):
                print(f"| {s.name} | " + " | ".join(cells) + " |")

    print(f"\n## Reading the latest checkpoint, ms, median (min–max) of {repeats}\n")
    print(f"| saver | read | {header} | {lengths[-1]:,} ÷ {lengths[0]:,} |")
    print(f"|---|---|{rule}---:|")
    for s in savers:
        for read in ("get_tuple", "get_state", "get_tuple cold"):
            if (s.name, read, lengths[0]) not in results.reads:
                continue
            cells = []
            for n in lengths:
                found = results.reads.get((s.name, read, n))
                cells.append(spread([t * 1000 for t in found], "{:,.3f}") if found else "—")
            first = results.reads[(s.name, read, lengths[0])]
            last = results.reads.get((s.name, read, lengths[-1]))
            growth = f"{median(last) / median(first):,.1f}" if last else "—"
            print(f"| {s.name} | {read} | " + " | ".join(cells) + f" | {growth} |")
    print("(get_tuple cold: the first read of a new FlowmemSaver on the same database)")

    if results.size:
        messages = results.json_bytes
        print(f"\n## Storage after {results.storage_at:,} steps, median of {repeats}\n")
        print(
            f"The {results.storage_at:,} messages as JSON: {messages:,} bytes (role, content, id); "
            f"LangChain's messages_to_dict JSON: {results.langchain_json_bytes:,} bytes.\n"
        )
        print("| saver | what | bytes | ÷ JSON of the messages | largest parts |")
        print("|---|---|---:|---:|---|")
        for s in savers:
            if s.name not in results.size:
                continue
            size = median([float(v) for v in results.size[s.name]])
            parts = ", ".join(
                f"{k} {v / 1024:,.0f} KiB"
                for k, v in list(results.parts.get(s.name, {}).items())[:4]
            )
            what = {
                "SQLite": "file + -wal after a checkpoint",
                "PostgreSQL": "pg_total_relation_size of its tables",
            }.get(s.group, "")
            if s.name == INMEMORY:
                what = "serialized bytes held"
            print(f"| {s.name} | {what} | {size:,.0f} | {size / messages:,.1f} | {parts} |")

    targets = evaluate(savers, results, lengths)
    print("\n## Targets (issue 23 §4)\n")
    for t in targets:
        verdict = t["verdict"]
        if quick and verdict in ("PASS", "FAIL"):
            verdict = "not judged (--quick)"
        print(f"- {verdict}: {t['label']}: {t['value']} (target {t['goal']})")
    return targets


def _step_cell(results: Results, name: str, n: int) -> str:
    how = results.how.get((name, n), "—")
    found = results.step.get((name, n))
    if not found:
        return how
    return spread([t * 1000 for t in found], "{:,.3f}") + (" †" if how == "prefilled" else "")


def _growth(results: Results, name: str, lengths: tuple[int, ...]) -> str:
    first, last = results.step.get((name, lengths[0])), results.step.get((name, lengths[-1]))
    if not first or not last:
        return "—"
    return f"{median(last) / median(first):,.1f}"


def _pairs(savers: list[Saver]) -> list[tuple[Saver, Saver]]:
    """(flowmem saver, peer): each FlowmemSaver against the peers of its backend and InMemorySaver."""
    return [
        (ours, peer)
        for ours in savers
        if ours.flowmem
        for peer in savers
        if not peer.flowmem
        and not peer.baseline
        and peer.name != NULL_SAVER
        and peer.group in (ours.group, "memory")
    ]


def _own(
    results: Results,
    name: str,
    n: int,
    table: dict[tuple[str, int], list[float]] | None = None,
    base: str = GRAPH_ALONE,
) -> float | None:
    """Median step time (or ``table``'s: CPU) minus ``base``'s at ``n`` (seconds), None when either is missing."""
    table = results.step if table is None else table
    mine, alone = table.get((name, n)), table.get((base, n))
    if not mine or not alone:
        return None
    return median(mine) - median(alone)


def _calls_ratios(results: Results, name: str, n: int, first: int) -> list[float]:
    """Each run's calls' own CPU per step at ``n`` ÷ at ``first`` (the same run's thread, grown or pre-filled)."""
    at_n, at_first = results.calls.get((name, n), []), results.calls.get((name, first), [])
    return [a / b for a, b in zip(at_n, at_first, strict=False) if b]


def _ratio(results: Results, ours: str, peer: str, n: int) -> float | None:
    mine, theirs = results.step.get((ours, n)), results.step.get((peer, n))
    if not mine or not theirs:
        return None
    return median(theirs) / median(mine)


def _run_ratios(results: Results, ours: str, peer: str, n: int) -> list[float]:
    """The ratio peer ÷ ours of each run (repeat): both measured in it, side by side."""
    mine, theirs = results.step.get((ours, n), []), results.step.get((peer, n), [])
    return [t / m for m, t in zip(mine, theirs, strict=False) if m]


def evaluate(
    savers: list[Saver], results: Results, lengths: tuple[int, ...]
) -> list[dict[str, Any]]:
    """Every target of issue 23 §4 with its value and verdict (PASS, FAIL, not measured)."""
    names = {s.name for s in savers}
    targets: list[dict[str, Any]] = []

    def target(label: str, value: float | None, goal: float | None, at_most: bool = True) -> None:
        """``goal`` None: reported beside, no verdict."""
        wanted = "reported" if goal is None else f"{'<=' if at_most else '>='} {goal:g}"
        if value is None:
            targets.append(
                {"label": label, "value": "—", "goal": wanted, "verdict": "not measured"}
            )
            return
        if goal is None:
            verdict = "reported"
        else:
            verdict = "PASS" if (value <= goal if at_most else value >= goal) else "FAIL"
        targets.append(
            {
                "label": label,
                "value": f"{value:,.2f}",
                "number": value,
                "goal": wanted,
                "verdict": verdict,
            }
        )

    def step(name: str, n: int) -> float | None:
        found = results.step.get((name, n))
        return median(found) if found else None

    def read(name: str, what: str, n: int) -> float | None:
        found = results.reads.get((name, what, n))
        return median(found) if found else None

    def over(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else a / b

    first, last = lengths[0], 10_000
    for ours in (FLOWMEM_SQLITE, FLOWMEM_PG):
        if ours not in names:
            continue
        target(
            f"{ours} step time at 10,000 ÷ at 100",
            over(step(ours, last), step(ours, first)),
            2,
            True,
        )
        target(
            f"{ours} own cost (step − {GRAPH_ALONE}) at 10,000 ÷ at 100",
            over(_own(results, ours, last), _own(results, ours, first)),
            None,
        )
    target(
        f"{FLOWMEM_SQLITE} ÷ {SQLITE_SAVER} per step at 2,000 (×)",
        _ratio(results, FLOWMEM_SQLITE, SQLITE_SAVER, 2_000),
        20,
        False,
    )
    target(
        f"{FLOWMEM_SQLITE} ÷ {INMEMORY} per step at 10,000 (×)",
        _ratio(results, FLOWMEM_SQLITE, INMEMORY, 10_000),
        1,
        False,
    )
    if POSTGRES_SAVER in names and FLOWMEM_PG in names:
        at_first = _run_ratios(results, FLOWMEM_PG, POSTGRES_SAVER, first)
        target(
            f"{FLOWMEM_PG} ÷ {POSTGRES_SAVER} per step at {first:,}, the slowest run (× , issue 42 #4)",
            min(at_first) if at_first else None,
            1,
            False,
        )
        for n in lengths[1:]:  # LangGraph's own step grows (add_messages): the saver's must not
            target(
                f"{FLOWMEM_PG} own cost (step − {GRAPH_ALONE}) at {n:,} ÷ at {first:,} (flat, issue 42 #4)",
                over(_own(results, FLOWMEM_PG, n), _own(results, FLOWMEM_PG, first)),
                1.25,
                True,
            )
            target(  # what the machine's load and the peer's server work do not add to
                f"{FLOWMEM_PG} own CPU (process CPU per step − {GRAPH_ALONE}'s) at {n:,} ÷ at {first:,} (flat, issue 42 #4)",
                over(
                    _own(results, FLOWMEM_PG, n, results.cpu),
                    _own(results, FLOWMEM_PG, first, results.cpu),
                ),
                1.25,
                True,
            )
            target(  # LangGraph's own checkpointing work (the null saver's) grows; the saver's must not
                f"{FLOWMEM_PG} CPU per step − the {NULL_SAVER}'s at {n:,} ÷ at {first:,} (flat, issue 42 #4)",
                over(
                    _own(results, FLOWMEM_PG, n, results.cpu, NULL_SAVER),
                    _own(results, FLOWMEM_PG, first, results.cpu, NULL_SAVER),
                ),
                1.25,
                True,
            )
            ratios = _calls_ratios(results, FLOWMEM_PG, n, first)
            target(  # the saver's own calls alone, run by run (decision 0172)
                f"{FLOWMEM_PG} calls' own thread CPU per step (less the collector's passes) at "
                f"{n:,} ÷ at {first:,}, the median of the runs' ratios (reported)",
                median(ratios) if ratios else None,
                None,
            )
            beside = results.beside.get((FLOWMEM_PG, n), [])
            target(  # the same, against a new thread at the same moment: the steady measure
                f"{FLOWMEM_PG} calls' own thread CPU per step at {n:,} ÷ a new thread's right "
                "after it, the largest of the runs' ratios (flat, issue 42 #4)",
                max(beside) if beside else None,
                1.25,
                True,
            )
    if POSTGRES_SAVER in names:
        for n in (2_000, 10_000):
            target(
                f"{FLOWMEM_PG} ÷ {POSTGRES_SAVER} per step at {n:,} (×)",
                _ratio(results, FLOWMEM_PG, POSTGRES_SAVER, n),
                None,
            )
    for name in (FLOWMEM_SQLITE, FLOWMEM_PG, SQLITE_SAVER, POSTGRES_SAVER):
        if name in names:
            size = results.size.get(name)
            value = median([float(v) for v in size]) / results.json_bytes if size else None
            label = f"{name} storage after {results.storage_at:,} steps ÷ JSON of the messages"
            target(label, value, None if name in (SQLITE_SAVER, POSTGRES_SAVER) else 3)
    for ours in (FLOWMEM_SQLITE, FLOWMEM_PG):
        if ours not in names:
            continue
        for what in ("get_tuple", "get_state", "get_tuple cold"):
            target(
                f"{ours} {what} of the latest checkpoint at 10,000 ÷ at 100",
                over(read(ours, what, last), read(ours, what, first)),
                2,
                True,
            )
    return targets


PREFIX_LENGTHS = (100, 1_000, 3_000, 10_000)


def prefix_check(lengths: tuple[int, ...], rounds: int = 7) -> dict[str, Any]:
    """The stored prefix's check and an invoke's first ``message_lists``, before and after decision 0177.

    In one process, the two ways taking turns, min of ``rounds`` × 3 timings: *before*,
    the ``is`` walk over the stored messages (``LineHead.extended_by`` until 0177) and the
    new head's ``tuple``; *after*, the ``tuple`` and the addresses compared
    (``extended_by`` with ``addresses``). Then ``message_lists`` of an invoke's input
    checkpoint (its list the one the read returned): the plain scan against the
    remembered head's answer. Messages as the graph makes them; the next step's list
    from ``add_messages``. Microseconds a call.
    """
    import functools
    import operator
    import timeit

    from langgraph.graph.message import add_messages

    from flowmem.integrations.langgraph.lines import (
        ADDRESSES,
        LineHead,
        addresses,
        is_message_list,
        message_lists,
    )

    def walk(head: LineHead, messages: list[BaseMessage]) -> tuple[bool, tuple[BaseMessage, ...]]:
        found = len(messages) >= head.count and all(map(operator.is_, head.messages, messages))
        return found, tuple(messages)  # the new head's tuple, as before

    def read(head: LineHead, messages: list[BaseMessage]) -> bool:
        objects = tuple(messages)
        return head.extended_by(objects, addresses(objects))

    def scan(values: dict[str, Any]) -> list[Any]:
        return [v for v in values.values() if is_message_list(v)]

    found: dict[str, Any] = {"addresses": ADDRESSES, "lengths": {}}
    print(
        f"\nThe stored prefix's check (decision 0177; addresses read: {ADDRESSES}), "
        f"µs a call, min of {rounds} × 3:\n"
    )
    print(
        "| messages | is walk + tuple (before) | tuple + addresses (after) "
        "| input's message_lists, scan (before) | by the head (after) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for n in lengths:
        stored: Any = add_messages([], cast(Any, [message(i) for i in range(n)]))
        head = LineHead("k", n, tuple(stored))
        value: Any = add_messages(stored, cast(Any, [message(n)]))
        values = {"messages": list(stored), "__start__": {"messages": [message(n)]}}
        heads = {"messages": head}
        names: dict[str, Callable[[], object]] = {
            "walk": functools.partial(walk, head, value),
            "addresses": functools.partial(read, head, value),
            "scan": functools.partial(scan, values),
            "heads": functools.partial(message_lists, values, (), heads.get),
        }
        best = {name: float("inf") for name in names}
        for _ in range(rounds):
            for name, call in names.items():
                number = 200 if name in ("walk", "addresses") else 20
                taken = min(timeit.repeat(call, number=number, repeat=3)) / number * 1e6
                best[name] = min(best[name], taken)
        found["lengths"][n] = best
        print(
            f"| {n:,} | {best['walk']:.2f} | {best['addresses']:.2f} | {best['scan']:.1f} | {best['heads']:.1f} |",
            flush=True,
        )
    return found


def measurements(savers: list[Saver], results: Results, lengths: tuple[int, ...]) -> dict[str, Any]:
    """Every sample, its medians and the method of each cell, per saver (the JSON's own part)."""
    out: dict[str, Any] = {
        "lengths": list(lengths),
        "segment": SEGMENT,
        "storage_at": results.storage_at,
        "messages_json_bytes": results.json_bytes,
        "messages_langchain_json_bytes": results.langchain_json_bytes,
        "savers": {},
    }
    for s in savers:
        entry: dict[str, Any] = {"group": s.group, "flowmem": s.flowmem, "durability": s.durability}
        entry["lengths"] = {}
        for n in lengths:
            cell: dict[str, Any] = {"how": results.how.get((s.name, n), "not measured")}
            found = results.step.get((s.name, n))
            if found:
                cell["step_s"] = found
                cell["step_s_median"] = median(found)
            cpu = results.cpu.get((s.name, n))
            if cpu:
                cell["cpu_s"] = cpu
                cell["cpu_s_median"] = median(cpu)
            calls = results.calls.get((s.name, n))
            if calls:
                cell["calls_cpu_s"] = calls
                cell["calls_cpu_s_median"] = median(calls)
                cell["calls_gc_s"] = results.calls_gc.get((s.name, n), [])
                if n != lengths[0]:
                    cell["calls_cpu_ratio_per_run"] = _calls_ratios(results, s.name, n, lengths[0])
                    cell["calls_cpu_beside_ratio_per_run"] = results.beside.get((s.name, n), [])
            for read in ("get_tuple", "get_state", "get_tuple cold"):
                samples = results.reads.get((s.name, read, n))
                if samples:
                    cell[f"{read.replace(' ', '_')}_s"] = samples
                    cell[f"{read.replace(' ', '_')}_s_median"] = median(samples)
            sizes = results.size_at.get((s.name, n))
            if sizes:
                cell["storage_bytes"] = sizes
            entry["lengths"][str(n)] = cell
        if s.name in results.trips:
            entry["round_trips_per_step"] = results.trips[s.name]
        if s.name in results.size:
            entry["storage_bytes"] = results.size[s.name]
            entry["storage_parts"] = results.parts.get(s.name, {})
        out["savers"][s.name] = entry
    out["ratios"] = {
        f"{ours.name} ÷ {peer.name}": {
            str(n): _run_ratios(results, ours.name, peer.name, n) for n in lengths
        }
        for ours, peer in _pairs(savers)
    }
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 when a target is missed (never with ``--quick``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # a SIGTERM ends the run through its ``finally`` blocks: the throwaway server stops
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pgserver.add_arguments(
        parser,
        "a server URL, or 'start' for a throwaway durable server (PostgresSaver and "
        "FlowmemSaver on PostgreSQL); without it, the SQLite savers only",
    )
    parser.add_argument("--repeats", type=int, default=2, help="repeats of every measure")
    parser.add_argument(
        "--max-peer-length",
        type=int,
        default=2_000,
        help="the longest a peer's thread grows step by step (longer lengths: pre-filled)",
    )
    parser.add_argument(
        "--no-prefill", action="store_true", help="skip a peer's lengths past --max-peer-length"
    )
    parser.add_argument(
        "--no-warm",
        action="store_true",
        help="measure the first length on each saver's first use (no untimed segment first)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=300.0,
        help="seconds a pre-filled measurement may take; past it: skipped (over budget)",
    )
    parser.add_argument(
        "--only",
        help="comma list of savers to run: alone,flowmem,inmemory,sqlite,postgres (default: all)",
    )
    parser.add_argument(
        "--lengths",
        help="comma list of thread lengths, multiples of 100 (default 100,1000,2000,10000)",
    )
    parser.add_argument(
        "--prefix-check",
        action="store_true",
        help="only time the stored prefix's check and an invoke's first message_lists, "
        "before and after decision 0177 (--lengths: default 100,1000,3000,10000)",
    )
    report_json.add_arguments(parser, "langgraph", "100 and 1,000 messages, one repeat")
    args = parser.parse_args(argv)
    if args.prefix_check:
        chosen = tuple(int(n) for n in args.lengths.split(",")) if args.lengths else PREFIX_LENGTHS
        prefix_check(chosen)
        return 0
    pgserver.check(parser, args.postgres_nondurable, args.postgres != "start" and args.postgres)
    lengths = QUICK_LENGTHS if args.quick else LENGTHS
    if args.lengths:
        lengths = tuple(sorted(int(n) for n in args.lengths.split(",")))
        if any(n <= 0 or n % SEGMENT for n in lengths):
            parser.error(f"--lengths: positive multiples of {SEGMENT}")
    repeats = 1 if args.quick else max(1, args.repeats)
    _freeze_after_collect[0] = args.quick
    peer_top = min(args.max_peer_length, max(lengths))
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="flowmem-bench-lg-")))
        savers: list[Saver] = [
            GraphAlone(0),
            NullSaver(max(lengths)),
            FlowmemSqlite(tmp, max(lengths)),
            InMemory(peer_top),
            Sqlite(tmp, peer_top),
        ]
        pg: dict[str, str] | None = None
        if args.postgres:
            given = None if args.postgres == "start" else args.postgres
            url, _ = stack.enter_context(pgserver.server(given, not args.postgres_nondurable))
            pg = pgserver.postgres_settings(url)
            savers += [FlowmemPostgres(url, max(lengths)), Postgres(url, peer_top)]
        if args.only:
            keys = {FLOWMEM_SQLITE: "flowmem", FLOWMEM_PG: "flowmem", INMEMORY: "inmemory"}
            keys[GRAPH_ALONE] = "alone"
            keys[NULL_SAVER] = "null"
            keys |= {SQLITE_SAVER: "sqlite", POSTGRES_SAVER: "postgres"}
            chosen = set(args.only.split(","))
            savers = [s for s in savers if keys[s.name] in chosen]
        meta = report_json.environment(PACKAGES)
        print(
            f"LangGraph checkpointers: StateGraph(MessagesState), one AI message per step, "
            f"segments of {SEGMENT} steps per invoke; lengths {', '.join(f'{n:,}' for n in lengths)}; "
            f"{repeats} repeat(s); peers grow to {peer_top:,}; files in {tmp}",
            flush=True,
        )
        load = os.getloadavg()[0]
        results = run(savers, lengths, repeats, not args.no_prefill, args.budget, not args.no_warm)
        count_trips(savers, results)
        meta["load"] = f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (1-minute)"
        targets = report(savers, results, lengths, meta, args.quick)
        for t in targets:
            t["met"] = {"PASS": True, "FAIL": False}.get(t["verdict"])
        found = {"postgres": pg or {}, **measurements(savers, results, lengths)}
        report_json.write(
            args.json, "langgraph", argv, meta, results.durability, targets, found, args.quick
        )
    missed = [t["label"] for t in targets if t["verdict"] == "FAIL"]
    if args.quick:
        return 0
    print("\nall targets met" if not missed else f"\nmissed: {'; '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
