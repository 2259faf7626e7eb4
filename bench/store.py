"""Benchmark of the durable buffer against the SQLite peers: appends, loads, memory.

Run with ``make bench`` (not part of the tests). One conversation, one message per
append, on files at the same durability: WAL with ``synchronous=FULL`` (a committed
append survives power loss) for flowmem's ``SqliteStore`` (its default), for
``agents.SQLiteSession.add_items``, for LangChain's ``SQLChatMessageHistory``
(``langchain_community``, through SQLAlchemy) and for LangGraph's ``SqliteSaver``
with the ``add_messages`` reducer. The messages are the same turns in each
system's shape: a user question, an assistant turn calling a tool, the tool
result, an answer.

Beside the store's own append (the tuned call), ``MemoryService.append`` is measured
as a user writes it, in the ``session`` scope (``flowmem service default``: the
context names the session, which the first append creates), and with
``return_messages=True`` (``flowmem service +messages``: the whole buffer back after
every append).

Everything is measured ``--repeats`` times (default 3), each a run on fresh files, and
reported as median (min–max) (issue 42 §5):

- appends/second and the p50 (and p99) of a single append at buffer lengths 100, 1,000
  and 10,000 (``--big``: also 100,000): in each run every system at every length gets
  ``--files`` files of its own (default 5, decision 0198; 1 before), made for that run
  (never a cleared and refilled one), filled in batches, then single appends timed one
  at a time in rounds, each file of every system once a round with the systems' order
  rotated by one each round, so disk and machine noise fall evenly on all of them; a
  run's rate and p50 pool its files' appends (5 x 200 a length: a larger sample of the
  same appends, docs/performance.md); LangGraph at 100, 1,000 and 2,000. The ratios flowmem ÷ peer
  are taken per run (by rate, and the peer's p50 ÷ flowmem's) and reported as min /
  median / max. ``--disk-writer MIB`` starts another process rewriting a file of that
  size beside the databases, 1 MiB per write, each fsynced, while the runs append (the
  user's disk shared); ``--dir`` chooses the disk (the run prints which); ``--plain-wal``
  adds the default call on a store that makes no room ahead in its WAL (flowmem before
  decision 0154), measured in the same rounds;
- the time to load the last 50 rows and the whole buffer at each length;
- the memory of loading a large buffer (``MEMORY_ROWS`` messages; LangGraph fewer):
  the tracemalloc peak of the load call holding its result ("above baseline", the
  issue's measure) and what the result itself keeps, per message; for flowmem also
  ``iter_rows`` (the streaming read: nothing kept);
- the peak memory (tracemalloc) of one flowmem append at each length.

The normalization table (issue 15 §5) is measured first, before the storage
sections grow the heap: ``normalize`` and ``check_sendable`` against deepagents'
``PatchToolCallsMiddleware`` on ``bench/core.py``'s histories of 1,000 and 10,000
messages, with the flowmem / deepagents ratio; ``--only normalization`` runs that
section alone.

Groups: the SQLite systems here; ``--postgres URL`` (or ``FLOWMEM_BENCH_POSTGRES``)
adds flowmem on PostgreSQL (its own group: ratios are taken against each group's
``tuned`` flowmem system), then ``bench/peers_postgres.py`` compares flowmem with the
PostgreSQL peers on that server, in the same run, in a process of its own
(``--postgres start``: on a throwaway server, durable unless ``--postgres-nondurable``).
With ``--guarded`` every flowmem store append carries a ``WriteGuard`` (a token and the
session), as the HTTP API's session-scope appends do (decision 0014).

The run prints the durability of every database it used (each SQLite file's journal
mode and ``synchronous``, what a PostgreSQL server reports) and writes it, with every
sample and the targets, to ``bench/results/store.json`` (``--json PATH``); the
PostgreSQL peers' JSON is written beside it (``store-peers_postgres.json``) and
included in it. ``--quick`` (tiny buffers, one repeat, one timed load, 5 peak probes) is a smoke run, never judged.

Targets (issues 3 §6 and 15): appends/s at 10,000 rows >= 0.75 x at 100; >= 1.0 x
SQLiteSession and SQLChatMessageHistory at every length, for the default call
too; >= 20 x LangGraph+SqliteSaver at 2,000 rows; last-50 load at 10,000 within
2 x at 100; peak append memory independent of length; load memory per message
<= 1.0 x SQLiteSession (peak of the call holding its result). Issues 26 §3 and 42 §2:
the default call (session scope) >= 1.3 x SQLiteSession by rate and >= 1.0 x at the
p50 at every length, at the minimum of the per-run ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

# Run as ``python bench/store.py``, this folder is first on sys.path, where a sibling
# module (bench/http.py) would shadow the standard library's ``http`` that the peers'
# imports need. Drop it; the benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
# first: the pgserver wheel (PostgreSQL binaries for the tests) is also named pgserver
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import pgserver
import report_json
import siblings

from flowmem.core import prepare
from flowmem.errors import ConflictError
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, SessionRecord, Store, WriteGuard, open_store

PACKAGES = ("openai-agents", "langchain-community", "sqlalchemy", "langgraph")
PACKAGES += ("langgraph-checkpoint-sqlite", "deepagents")
MEMORY_PROBES = 20
MEMORY_ROWS = 100_000  # messages of the buffer whose load memory is measured
LANGGRAPH_MEMORY_ROWS = 10_000  # one checkpoint holds them all: kept smaller


@dataclass(frozen=True)
class Plan:
    """The sizes of a run (``QUICK``: a smoke run's)."""

    lengths: tuple[int, ...] = (100, 1_000, 10_000)
    langgraph_lengths: tuple[int, ...] = (100, 1_000, 2_000)
    rounds: int = 200  # single appends timed at each length, repeat and file, one per round
    files: int = 5  # fresh files per system and length in each run, appended in the same rounds
    memory_rows: int = MEMORY_ROWS  # at most, per system (LangGraph's own is smaller)
    normalization: tuple[int, ...] = (1_000, 10_000)  # history sizes of bench/core.py's section
    samples: int = 7  # CPU-time samples per normalization repeat (the best counts)
    loads: tuple[int, int] = (5, 3)  # timed loads (last 50, whole) per repeat: the best counts
    probes: int = MEMORY_PROBES  # single appends whose tracemalloc peak is taken per length


QUICK = Plan((50, 200), (50, 200), 20, 1, 1_000, (100, 1_000), 2, (1, 1), 5)  # shape only, never judged


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


class System:
    """One system under test: named buffers, filled, appended to and loaded.

    ``group`` is the backend its ratios are taken in; ``role`` is ``tuned`` (flowmem's
    fastest call: the group's reference), ``default`` (flowmem as a user calls it)
    or ``peer``. ``loads``: its load times are measured; ``memory_rows``: the size of
    the buffer whose load memory is measured (0: not measured).
    """

    name = ""
    group = "SQLite"
    role = "peer"
    every = 1  # takes part in every ``every``-th round (slow systems sample fewer appends)
    loads = True
    memory_rows = MEMORY_ROWS

    def __init__(self, lengths: tuple[int, ...]) -> None:
        self.lengths = lengths

    def fill(self, buffer: str, length: int) -> None:
        """Create the buffer named ``buffer`` with exactly ``length`` messages (not timed)."""
        raise NotImplementedError

    def append(self, buffer: str, i: int) -> None:
        """Append message ``i`` alone to ``buffer``."""
        raise NotImplementedError

    def last50(self, buffer: str) -> object:
        """Load the last 50 rows of ``buffer``."""
        raise NotImplementedError

    def whole(self, buffer: str) -> object:
        """Load the whole ``buffer``; return what was loaded."""
        raise NotImplementedError

    def memory_probes(self, buffer: str) -> dict[str, Callable[[], object]]:
        """Name -> a call loading ``buffer`` whose memory is measured (default: ``whole``)."""
        return {self.name: lambda: self.whole(buffer)}

    def database(self) -> dict[str, Any]:
        """The durability of the database it writes, as read from it (report_json's entry)."""
        raise NotImplementedError

    def wal(self) -> str | None:
        """The SQLite write-ahead log it writes (None: none), whose size changes are counted."""
        return None

    def close(self) -> None:
        """Release files and connections."""


# --quick: what a collection leaves is frozen (gc.freeze), so the next one scans only what
# was made since, not the peers' modules, imported when their systems are first made (after
# main's freeze): with them each of the run's ~56 collections cost 0.1-0.2 s, over half the
# quick run's CPU. A full run leaves the collector as it is (its measures are judged).
_freeze_after_collect = False


def _collect() -> None:
    """A full collection before a measure; in a quick run, what survives it is frozen."""
    gc.collect()
    if _freeze_after_collect:
        gc.freeze()


def _best(fn: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        _collect()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def _sched() -> tuple[int, int] | None:
    """The calling thread's time on a CPU and waiting for one, in ns (Linux' schedstat; None elsewhere)."""
    try:
        with open("/proc/thread-self/schedstat") as found:
            fields = found.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def _peak(fn: Callable[[], object]) -> int:
    _collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _load_memory(fn: Callable[[], object]) -> tuple[int, int]:
    """(peak, kept): tracemalloc's peak during ``fn`` and what its result still holds."""
    _collect()
    tracemalloc.start()
    result = fn()
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    _collect()
    return peak, kept


class Rows:
    """flowmem's prepared messages, made once for every instance (prepared the same each time)."""

    made: ClassVar[list[Any]] = []

    def __getitem__(self, index: Any) -> Any:
        end = (index.stop if isinstance(index, slice) else index) + 1
        while len(self.made) < end:
            self.made.append(prepare(turn(len(self.made)), 1_755_000_000 + len(self.made))[0])
        return self.made[index]


def sqlite_at(folder: Path) -> str:
    """A flowmem SQLite URL for a fresh file in ``folder``."""
    return f"sqlite:///{folder / 'flowmem.db'}"


def disk_of(path: Path) -> str:
    """The device, mount point and file system that hold ``path`` (/proc/mounts)."""
    found = ("?", "?", "?")
    with contextlib.suppress(OSError):
        real = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, kind = line.split()[:3]
            if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(found[1]):
                found = (device, mount, kind)
    return f"{found[0]} mounted on {found[1]} ({found[2]})"


_WRITER = """
import os, signal, sys
path, size = sys.argv[1], int(sys.argv[2]) << 20
block, written = os.urandom(1 << 20), [0]
signal.signal(signal.SIGTERM, lambda *_: (print(written[0]), sys.stdout.flush(), os._exit(0)))
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
while True:
    os.pwrite(fd, block, written[0] % size)
    os.fsync(fd)
    written[0] += len(block)
"""


class DiskWriter:
    """Another process writing to the databases' disk: a file of ``mib`` MiB rewritten, 1 MiB per fsync."""

    def __init__(self, folder: Path, mib: int) -> None:
        self.mib = mib
        self.path = folder / "disk-writer.bin"
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(self.path), str(mib)], stdout=subprocess.PIPE, text=True
        )

    def stop(self) -> dict[str, Any]:
        """Stop the writer; what it wrote (MiB/s over the run)."""
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        seconds = time.monotonic() - self.started
        written = int(out.strip() or 0)
        rate = written / 2**20 / seconds
        label = (
            f"another process rewrote a {self.mib} MiB file beside the databases, 1 MiB per "
            f"write, each fsynced: {rate:,.1f} MiB/s over {seconds:,.0f} s"
        )
        self.path.unlink(missing_ok=True)
        return {"file_mib": self.mib, "written_mib": written / 2**20, "seconds": seconds, "label": label}


class Flowmem(System):
    """flowmem's store (SQLite file at its default durability, or PostgreSQL): the tuned call."""

    role = "tuned"

    def __init__(
        self,
        name: str,
        url: str,
        lengths: tuple[int, ...],
        guarded: bool = False,
        group: str = "SQLite",
    ) -> None:
        self.name = name
        self.group = group
        super().__init__(lengths)
        self.url = url
        self.store: Store = open_store(url)
        self.rows = Rows()
        self.used: set[Address] = set()
        self.guard: WriteGuard | None = None
        if guarded:
            from flowmem.auth import create_token

            with contextlib.suppress(ConflictError):  # a server's session of an earlier run
                self.store.create_session(SessionRecord("bench", "bench", "bench"))
            _, record = create_token(self.store, "bench")
            self.guard = WriteGuard(record.id, "bench")

    def address(self, buffer: str) -> Address:
        """The buffer's address (one per system and buffer name)."""
        found = Address("session", "bench", f"{self.name}-{buffer}")
        self.used.add(found)
        return found

    def fill(self, buffer: str, length: int) -> None:
        """Batches of 500 give the same buffer as single appends for these turns."""
        key = self.address(buffer)  # a fresh buffer on a fresh file (SQLite), never cleared
        for start in range(0, length, 500):
            end = min(start + 500, length)
            self.store.append(key, self.rows[start:end])
        assert self.store.count(key) == length

    def append(self, buffer: str, i: int) -> None:
        """One message per append."""
        self.store.append(self.address(buffer), [self.rows[i]], guard=self.guard)

    def last50(self, buffer: str) -> object:
        """The last 50 rows through the position index."""
        return self.store.load(self.address(buffer), last=50)

    def whole(self, buffer: str) -> object:
        """Every row."""
        return self.store.load(self.address(buffer))

    def memory_probes(self, buffer: str) -> dict[str, Callable[[], object]]:
        """``load`` (the list) and ``iter_rows`` (streamed, nothing kept)."""
        key = self.address(buffer)

        def streamed() -> None:
            for _ in self.store.iter_rows(key):
                pass

        return {f"{self.name} load": self.whole_of(key), f"{self.name} iter_rows": streamed}

    def whole_of(self, key: Address) -> Callable[[], object]:
        """A call loading ``key`` whole."""
        return lambda: self.store.load(key)

    def append_peaks(
        self, buffers: dict[int, str], rounds: int, probes: int = MEMORY_PROBES
    ) -> dict[int, int]:
        """Median tracemalloc peak of single appends to each length's buffer (after ``rounds``)."""
        peaks: dict[int, int] = {}
        for length, buffer in buffers.items():
            found = []
            for i in range(length + rounds, length + rounds + probes):
                found.append(_peak(lambda i=i, b=buffer: self.append(b, i)))  # type: ignore[misc]
            peaks[length] = int(statistics.median(found))
        return peaks

    def database(self) -> dict[str, Any]:
        """What the PostgreSQL server reports, or the SQLite file's mode and flowmem's setting."""
        if self.group == "PostgreSQL":
            return pgserver.postgres_durability(self.url)
        path, synchronous = self.store.path, self.store.synchronous  # type: ignore[attr-defined]
        return report_json.flowmem_sqlite_durability(path, synchronous)

    def wal(self) -> str | None:
        """The SQLite file's log (a PostgreSQL store has none here)."""
        return None if self.group != "SQLite" else f"{self.store.path}-wal"  # type: ignore[attr-defined]

    def close(self) -> None:
        """Close the store (on a server, its benchmark buffers dropped first; a file is removed)."""
        if self.group != "SQLite":
            for key in self.used:
                self.store.clear(key)
        self.store.close()


class FlowmemService(Flowmem):
    """``MemoryService.append`` called as a user writes it: scope, key, one message, context.

    In the ``session`` scope (issue 26 §3): the context names its user and a session,
    one per buffer, which the first append creates (decision 0032), as an agent's
    conversation does. ``asked`` adds ``return_messages=True`` (the whole buffer back
    after each append: the default before decision 0017); without it the call is
    exactly the documented default, so this row shows what a direct caller gets.
    """

    loads = False  # it loads through the same store as the tuned row
    memory_rows = 0

    def __init__(
        self,
        name: str,
        url: str,
        lengths: tuple[int, ...],
        asked: bool,
        group: str = "SQLite",
        plain_wal: bool = False,
    ) -> None:
        super().__init__(name, url, lengths, group=group)
        self.role = "default" if not asked else "default+messages"
        if plain_wal:  # SQLite's log grown by every commit: flowmem before decision 0154
            self.store.wal_room.enabled = False  # type: ignore[attr-defined]
            self.role = "default, plain WAL"
        self.service = MemoryService(self.store)
        self.contexts: dict[str, ExecutionContext] = {}
        self.extra: dict[str, Any] = {"return_messages": True} if asked else {}

    def context(self, buffer: str) -> ExecutionContext:
        """The context of ``buffer``'s conversation: the user and its own session."""
        if buffer not in self.contexts:
            session = f"{self.name}-{buffer}".replace(" ", "-").replace("+", "")
            self.contexts[buffer] = ExecutionContext(user_id="bench", session_id=session)
        return self.contexts[buffer]

    def address(self, buffer: str) -> Address:
        """The session-scope buffer the service call resolves to."""
        found = Address("session", str(self.context(buffer).session_id), "chat")
        self.used.add(found)
        return found

    def append(self, buffer: str, i: int) -> None:
        """One message per call, through the service with its default arguments."""
        self.service.append("session", "chat", turn(i), self.context(buffer), **self.extra)


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
        self.factory = lambda buffer: FullSyncSession(f"bench-{buffer}", db_path=path)
        self.path = path
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[str, Any] = {}

    def session(self, buffer: str) -> Any:
        """The session of ``buffer`` (opened once)."""
        if buffer not in self.sessions:
            self.sessions[buffer] = self.factory(buffer)
        return self.sessions[buffer]

    def fill(self, buffer: str, length: int) -> None:
        """Batches of 500 items."""
        session = self.session(buffer)
        self.loop.run_until_complete(session.clear_session())
        for start in range(0, length, 500):
            batch = [agents_item(i) for i in range(start, min(start + 500, length))]
            self.loop.run_until_complete(session.add_items(batch))

    def append(self, buffer: str, i: int) -> None:
        """One item per ``add_items``."""
        self.loop.run_until_complete(self.session(buffer).add_items([agents_item(i)]))

    def last50(self, buffer: str) -> object:
        """``get_items(limit=50)``."""
        return self.loop.run_until_complete(self.session(buffer).get_items(limit=50))

    def whole(self, buffer: str) -> object:
        """``get_items()``."""
        return self.loop.run_until_complete(self.session(buffer).get_items())

    def wal(self) -> str | None:
        """Its file's log."""
        return f"{self.path}-wal"

    def database(self) -> dict[str, Any]:
        """Read from the connection the sessions write with (this thread's)."""
        session = next(iter(self.sessions.values()), None) or self.session("durability")
        return report_json.sqlite_durability(session._get_connection())

    def close(self) -> None:
        """Close the sessions and the loop."""
        for session in self.sessions.values():
            session.close()
        self.loop.close()


class LangChainSQL(System):
    """LangChain's ``SQLChatMessageHistory`` on SQLite (SQLAlchemy), WAL + synchronous=FULL.

    ``add_message`` per message; a load is ``.messages`` (it has no tail read: the
    last 50 are sliced from the whole list).
    """

    name = "LangChain SQLChatMessageHistory"

    def __init__(self, path: Path, lengths: tuple[int, ...]) -> None:
        import warnings

        from sqlalchemy import create_engine, event

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # langchain-community announces its sunset
            from langchain_community.chat_message_histories import SQLChatMessageHistory

        super().__init__(lengths)
        self.engine = create_engine(f"sqlite:///{path}")

        @event.listens_for(self.engine, "connect")
        def durable(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA synchronous=FULL")

        self.factory = lambda buffer: SQLChatMessageHistory(
            session_id=f"bench-{buffer}", connection=self.engine
        )
        self.histories: dict[str, Any] = {}

    def history(self, buffer: str) -> Any:
        """The history of ``buffer`` (made once)."""
        if buffer not in self.histories:
            self.histories[buffer] = self.factory(buffer)
        return self.histories[buffer]

    def fill(self, buffer: str, length: int) -> None:
        """Batches of 500 messages (``add_messages``: one transaction each)."""
        history = self.history(buffer)
        history.clear()
        for start in range(0, length, 500):
            history.add_messages(
                [langchain_message(i) for i in range(start, min(start + 500, length))]
            )

    def append(self, buffer: str, i: int) -> None:
        """One ``add_message``."""
        self.history(buffer).add_message(langchain_message(i))

    def last50(self, buffer: str) -> object:
        """The whole list, sliced."""
        return self.history(buffer).messages[-50:]

    def whole(self, buffer: str) -> object:
        """``.messages``."""
        return self.history(buffer).messages

    def database(self) -> dict[str, Any]:
        """Read from a connection of the engine's pool (its listener set the pragmas)."""
        with self.engine.connect() as conn:
            return report_json.sqlite_durability(conn.connection.dbapi_connection)  # type: ignore[arg-type]

    def close(self) -> None:
        """Dispose of the engine."""
        self.engine.dispose()


class LangGraph(System):
    """LangGraph ``SqliteSaver`` + ``add_messages``: one ``update_state`` per message.

    Each thread is filled with one ``update_state`` carrying all earlier messages (the
    state one-by-one appends would reach); every checkpoint stores the whole list.
    """

    name = "LangGraph SqliteSaver"
    every = 20
    memory_rows = LANGGRAPH_MEMORY_ROWS

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

    @staticmethod
    def config(buffer: str) -> Any:
        """The thread of ``buffer``."""
        return {"configurable": {"thread_id": f"bench-{buffer}"}}

    def fill(self, buffer: str, length: int) -> None:
        """One update carrying the first ``length`` messages (a fresh thread per buffer)."""
        messages = [langchain_message(i) for i in range(length)]
        self.graph.update_state(self.config(buffer), {"messages": messages})

    def append(self, buffer: str, i: int) -> None:
        """One message per ``update_state``."""
        self.graph.update_state(self.config(buffer), {"messages": [langchain_message(i)]})

    def last50(self, buffer: str) -> object:
        """The checkpoint holds the whole list; take its last 50."""
        return self.graph.get_state(self.config(buffer)).values["messages"][-50:]

    def whole(self, buffer: str) -> object:
        """The whole list from the latest checkpoint."""
        return self.graph.get_state(self.config(buffer)).values["messages"]

    def database(self) -> dict[str, Any]:
        """Read from the saver's connection."""
        return report_json.sqlite_durability(self.conn)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class Results:
    """Every measurement of one run: samples per (system, what, length), one per repeat."""

    def __init__(self) -> None:
        self.rate: dict[tuple[str, int], list[float]] = {}
        self.last50: dict[tuple[str, int], list[float]] = {}
        self.whole: dict[tuple[str, int], list[float]] = {}
        self.memory: dict[str, list[tuple[int, int]]] = {}  # probe -> [(peak, kept)]
        self.memory_rows: dict[str, int] = {}
        self.append_peak: dict[tuple[str, int], int] = {}
        self.p50: dict[tuple[str, int], list[float]] = {}  # each run's median single append, s
        self.p99: dict[tuple[str, int], list[float]] = {}
        self.wal_grew: dict[tuple[str, int], list[int]] = {}  # each run's appends that grew the WAL file
        self.appended: dict[tuple[str, int], int] = {}  # single appends timed per run
        self.times: dict[tuple[str, int], list[list[float]]] = {}  # each run's single appends, s, in order
        self.grew_at: dict[tuple[str, int], list[list[int]]] = {}  # each run's appends (index) that grew it
        # each run's appends' [ns on a CPU, ns waiting for one] (schedstat), in append_s's order
        self.sched: dict[tuple[str, int], list[list[tuple[int, int]]]] = {}

    @staticmethod
    def add(table: dict[Any, list[Any]], key: Any, value: Any) -> None:
        """Record one sample."""
        table.setdefault(key, []).append(value)


def buffer_name(length: int, repeat: int, copy: int = 0) -> str:
    """The buffer of one length in one repeat on one of its files (fresh each repeat)."""
    return f"r{repeat}-n{length}" + (f"-f{copy}" if copy else "")


@dataclass(frozen=True)
class Spec:
    """A system to measure: the lengths it is measured at, and how to open it on fresh files."""

    name: str
    lengths: tuple[int, ...]
    make: Callable[[Path], System]  # a new instance whose files are in a fresh folder


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _size(path: str | None) -> int:
    """The size of the file at ``path`` (0: none)."""
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def run(specs: list[Spec], repeats: int, plan: Plan, base: Path) -> Results:
    """Measure every system ``repeats`` times, each time on fresh files: loads, appends, then memory.

    A run opens each system at each length on ``plan.files`` files of its own, made for
    that run (no file is cleared and refilled), fills each, times its loads (on the
    first file), then appends one message per round to every file of every system at
    every length, the systems' order rotated by one each round, so disk and machine
    noise fall on all of them alike. Each append is timed alone: a run's rate is its
    appends (on all its files) / their time, its p50 the median append. The run's
    appends are kept in the order made: round by round, in each round file 0 first,
    so an append's file is its index modulo ``plan.files``.
    """
    results = Results()
    rounds, files = plan.rounds, plan.files
    lengths = sorted({n for spec in specs for n in spec.lengths})
    for repeat in range(repeats):
        print(f"run {repeat + 1}/{repeats}: fresh files, filling", flush=True)
        # per length, per file: the systems, each on a file of its own
        members: dict[int, list[list[System]]] = {}
        for length in lengths:
            members[length] = [[] for _ in range(files)]
            for copy in range(files):
                folder = base / f"run{repeat}-n{length}" / f"file{copy}"
                for spec in specs:
                    if length not in spec.lengths:
                        continue
                    (folder / spec.name.replace(" ", "-")).mkdir(parents=True)
                    system = spec.make(folder / spec.name.replace(" ", "-"))
                    members[length][copy].append(system)
                    buffer = buffer_name(length, repeat, copy)
                    system.fill(buffer, length)
                    if system.loads and copy == 0:
                        key = (system.name, length)
                        results.add(results.last50, key, _best(lambda s=system, b=buffer: s.last50(b), plan.loads[0]))  # type: ignore[misc]
                        results.add(results.whole, key, _best(lambda s=system, b=buffer: s.whole(b), plan.loads[1]))  # type: ignore[misc]
        print(f"run {repeat + 1}/{repeats}: appending, the order rotated each round", flush=True)
        times: dict[tuple[str, int], list[float]] = {}
        done: dict[tuple[str, int, int], int] = {}  # single appends made so far to each file
        grew: dict[tuple[str, int], int] = {}  # appends whose commit changed the WAL file's size
        grew_at: dict[tuple[str, int], list[int]] = {}  # which appends (their index in ``times``)
        # each append's ns on a CPU and waiting for one, of the thread that called it
        sched: dict[tuple[str, int], list[tuple[int, int]]] = {}
        sizes = {
            (s.name, n, copy): _size(s.wal())
            for n, copies in members.items()
            for copy, group in enumerate(copies)
            for s in group
            if s.wal()
        }
        for round_no in range(rounds):
            for length in lengths:
                for copy, group in enumerate(members[length]):
                    turn = round_no % len(group)
                    for system in group[turn:] + group[:turn]:
                        if round_no % system.every:
                            continue
                        key = (system.name, length)
                        found = times.setdefault(key, [])
                        made = done.get((system.name, length, copy), 0)
                        before = _sched()  # read outside the timed span
                        started = time.perf_counter()
                        system.append(buffer_name(length, repeat, copy), length + made)
                        found.append(time.perf_counter() - started)
                        after = _sched()
                        done[(system.name, length, copy)] = made + 1
                        if before is not None and after is not None:
                            sched.setdefault(key, []).append((after[0] - before[0], after[1] - before[1]))
                        wal = (system.name, length, copy)
                        if wal in sizes:  # after the timed append: a stat, not timed
                            size = _size(system.wal())
                            grew[key] = grew.get(key, 0) + (size != sizes[wal])
                            if size != sizes[wal]:
                                grew_at.setdefault(key, []).append(len(found) - 1)
                            sizes[wal] = size
        for key, found in times.items():
            results.add(results.rate, key, len(found) / sum(found))
            results.add(results.p50, key, quantile(found, 0.5))
            results.add(results.p99, key, quantile(found, 0.99))
            results.appended[key] = len(found)
            results.add(results.times, key, [round(t, 7) for t in found])
            if key in grew:
                results.add(results.wal_grew, key, grew[key])
                results.add(results.grew_at, key, grew_at.get(key, []))
            if key in sched:
                results.add(results.sched, key, sched[key])
        for length, copies in members.items():
            for copy, group in enumerate(copies):
                for system in group:
                    tuned = isinstance(system, Flowmem) and system.role == "tuned"
                    if repeat == repeats - 1 and copy == 0 and tuned:
                        buffers = {length: buffer_name(length, repeat)}
                        peak = system.append_peaks(buffers, rounds, plan.probes)  # type: ignore[attr-defined]
                        results.append_peak[(system.name, length)] = peak[length]
                    system.close()
        for length in lengths:
            shutil.rmtree(base / f"run{repeat}-n{length}", ignore_errors=True)
    return results


def memory(systems: list[System], repeats: int, results: Results) -> None:
    """The memory of a whole load of each system's large buffer (fresh files of their own)."""
    print("memory of a whole load", flush=True)
    for system in systems:
        if not system.memory_rows:
            continue
        system.fill("memory", system.memory_rows)
        for _ in range(repeats):
            for probe, fn in system.memory_probes("memory").items():
                results.add(results.memory, probe, _load_memory(fn))
                results.memory_rows[probe] = system.memory_rows


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    """``median (min–max)`` of the samples."""
    if len(values) == 1:
        return fmt.format(values[0])
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} ({fmt.format(low)}–{fmt.format(high)})"


def median(values: list[float]) -> float:
    """The median sample."""
    return float(statistics.median(values))


def per_repeat(results: Results, ours: str, theirs: str, length: int) -> list[float]:
    """The ratio ``ours / theirs`` of appends/s in each repeat (both timed in its rounds)."""
    mine, peer = results.rate[(ours, length)], results.rate[(theirs, length)]
    return [a / b for a, b in zip(mine, peer, strict=True)]


def p50_ratios(results: Results, ours: str, theirs: str, length: int) -> list[float]:
    """Each run's ``theirs`` p50 / ``ours`` (above 1: our single append is faster)."""
    mine, peer = results.p50[(ours, length)], results.p50[(theirs, length)]
    return [b / a for a, b in zip(mine, peer, strict=True)]


def ratios(results: Results, systems: list[System]) -> dict[str, Any]:
    """Each flowmem call ÷ each peer of its group, per length: min, median, max of the per-run ratios."""
    out: dict[str, Any] = {}
    for ours in systems:
        if ours.role == "peer":
            continue
        for peer in systems:
            if peer.role != "peer" or peer.group != ours.group:
                continue
            for n in sorted(set(ours.lengths) & set(peer.lengths)):
                if (ours.name, n) not in results.rate or (peer.name, n) not in results.rate:
                    continue
                entry = out.setdefault(f"{ours.name} / {peer.name}", {})
                for what, found in (
                    ("rate", per_repeat(results, ours.name, peer.name, n)),
                    ("p50", p50_ratios(results, ours.name, peer.name, n)),
                ):
                    entry.setdefault(what, {})[str(n)] = {
                        "min": min(found),
                        "median": statistics.median(found),
                        "max": max(found),
                        "runs": found,
                    }
    return out


def report(
    systems: list[System], results: Results, repeats: int, targets: report_json.Targets
) -> None:
    """Print the tables (markdown) and check the targets."""
    groups: dict[str, list[System]] = {}
    for system in systems:
        groups.setdefault(system.group, []).append(system)
    target = targets.check

    for group, members in groups.items():
        tuned = next((s for s in members if s.role == "tuned"), None)
        lengths = sorted({n for s in members for n in s.lengths})
        print(f"\n## {group}: appends/s, median (min–max) of {repeats} repeats\n")
        print("| system | call | " + " | ".join(f"{n:,} rows" for n in lengths) + " |")
        print("|---|---|" + "---:|" * len(lengths))
        for s in members:
            cells = [
                spread(results.rate[(s.name, n)]) if (s.name, n) in results.rate else "—"
                for n in lengths
            ]
            print(f"| {s.name} | {s.role} | " + " | ".join(cells) + " |")
        if tuned is not None:
            print(f"\nflowmem ({tuned.name} / default call) ÷ peer, medians:\n")
            print("| peer | " + " | ".join(f"{n:,}" for n in lengths) + " |")
            print("|---|" + "---:|" * len(lengths))
            default = next((s for s in members if s.role == "default"), None)
            for s in members:
                if s.role != "peer":
                    continue
                cells = []
                for n in lengths:
                    theirs = results.rate.get((s.name, n))
                    ours = results.rate.get((tuned.name, n))
                    if not theirs or not ours:
                        cells.append("—")
                        continue
                    mine = f"{median(ours) / median(theirs):.2f}"
                    if default is not None and (default.name, n) in results.rate:
                        mine += f" / {median(results.rate[(default.name, n)]) / median(theirs):.2f}"
                    cells.append(mine)
                print(f"| {s.name} | " + " | ".join(cells) + " |")

        print(f"\n## {group}: p50 of a single append, ms, median (min–max) of {repeats} runs\n")
        print("| system | " + " | ".join(f"{n:,} rows" for n in lengths) + " |")
        print("|---|" + "---:|" * len(lengths))
        for s in members:
            cells = [
                spread([v * 1000 for v in results.p50[(s.name, n)]], "{:,.2f}")
                if (s.name, n) in results.p50
                else "—"
                for n in lengths
            ]
            print(f"| {s.name} | " + " | ".join(cells) + " |")
        if any((s.name, n) in results.wal_grew for s in members for n in lengths):
            print(
                f"\n## {group}: single appends whose commit changed the WAL file's size, of each run's, "
                f"median (min–max) of {repeats} runs (a count: the load does not move it)\n"
            )
            print("| system | " + " | ".join(f"{n:,} rows" for n in lengths) + " |")
            print("|---|" + "---:|" * len(lengths))
            for s in members:
                cells = [
                    f"{spread([float(v) for v in results.wal_grew[(s.name, n)]])} of {results.appended[(s.name, n)]}"
                    if (s.name, n) in results.wal_grew
                    else "—"
                    for n in lengths
                ]
                print(f"| {s.name} | " + " | ".join(cells) + " |")
        found = ratios(results, members)
        if found:
            print(f"\n{group}: flowmem ÷ peer per run, min / median / max (rate; p50 = peer's ÷ ours)\n")
            print("| flowmem ÷ peer | what | " + " | ".join(f"{n:,}" for n in lengths) + " |")
            print("|---|---|" + "---:|" * len(lengths))
            for pair, entry in found.items():
                for what in ("rate", "p50"):
                    cells = []
                    for n in lengths:
                        r = entry[what].get(str(n))
                        cells.append("—" if r is None else f"{r['min']:.2f} / {r['median']:.2f} / {r['max']:.2f}")
                    print(f"| {pair} | {what} | " + " | ".join(cells) + " |")

        print(f"\n## {group}: load time, ms, median (min–max) of {repeats} repeats\n")
        print("| system | read | " + " | ".join(f"{n:,} rows" for n in lengths) + " |")
        print("|---|---|" + "---:|" * len(lengths))
        for s in members:
            if not s.loads:
                continue
            for label, table in (("last 50", results.last50), ("whole", results.whole)):
                cells = [
                    spread([t * 1000 for t in table[(s.name, n)]], "{:,.2f}")
                    if (s.name, n) in table
                    else "—"
                    for n in lengths
                ]
                print(f"| {s.name} | {label} | " + " | ".join(cells) + " |")

        probes = [
            p
            for s in members
            if s.memory_rows
            for p in s.memory_probes("memory")
            if p in results.memory
        ]
        if probes:
            print(
                f"\n## {group}: memory of loading a whole buffer, median (min–max) of {repeats} repeats\n"
            )
            print("| load | messages | peak MiB | peak bytes/message | kept bytes/message |")
            print("|---|---:|---:|---:|---:|")
            for p in probes:
                rows = results.memory_rows[p]
                peaks = [peak for peak, _ in results.memory[p]]
                kept = [k for _, k in results.memory[p]]
                print(
                    f"| {p} | {rows:,} | {spread([v / 2**20 for v in peaks], '{:,.1f}')} | "
                    f"{spread([v / rows for v in peaks])} | {spread([v / rows for v in kept])} |"
                )

        if tuned is not None and (tuned.name, lengths[0]) in results.append_peak:
            cells = [f"{results.append_peak[(tuned.name, n)] / 1024:,.1f}" for n in tuned.lengths]
            print(
                f"\npeak memory of one {tuned.name} append, KiB: "
                + ", ".join(f"{n:,} rows {c}" for n, c in zip(tuned.lengths, cells, strict=True))
            )

        if tuned is None or group != "SQLite":
            continue
        print(f"\nTargets ({group})")
        rate = {n: median(results.rate[(tuned.name, n)]) for n in tuned.lengths}
        first, last = tuned.lengths[0], tuned.lengths[-1]
        target(f"appends/s at {last:,} / at {first:,}", rate[last] / rate[first], 0.75)
        default = next((s for s in members if s.role == "default"), None)
        for peer_name in ("agents SQLiteSession", "LangChain SQLChatMessageHistory"):
            peer = next((s for s in members if s.name == peer_name), None)
            if peer is None:
                continue
            for n in tuned.lengths:
                theirs = median(results.rate[(peer.name, n)])
                target(f"flowmem / {peer_name} appends/s at {n:,}", rate[n] / theirs, 1.0)
                if default is not None:
                    ours = median(results.rate[(default.name, n)])
                    target(f"flowmem default call / {peer_name} at {n:,}", ours / theirs, 1.0)
        agents = next((s for s in members if s.name == "agents SQLiteSession"), None)
        if default is not None and agents is not None:
            # issues 26 §3 and 42 §2: each run's own ratios (both measured in its rounds, on
            # fresh files), their minimum: by rate and at the p50 of single appends
            for n in tuned.lengths:
                by_rate = per_repeat(results, default.name, agents.name, n)
                p50s = p50_ratios(results, default.name, agents.name, n)
                print(
                    f"  default call / SQLiteSession at {n:,}, per run: rate {spread(by_rate, '{:.2f}')},"
                    f" p50 {spread(p50s, '{:.2f}')}"
                )
                target(f"flowmem default call / SQLiteSession at {n:,}, min of runs", min(by_rate), 1.3)
                target(f"flowmem default call / SQLiteSession p50 at {n:,}, min of runs", min(p50s), 1.0)
        graph = next((s for s in members if s.name == "LangGraph SqliteSaver"), None)
        if graph is not None:
            # flowmem at LangGraph's longest (2,000 rows) lies between two of its lengths
            # (1,000 and 10,000); take the lower
            top = graph.lengths[-1]
            below = max(n for n in tuned.lengths if n <= top)
            above = min((n for n in tuned.lengths if n >= top), default=below)
            ours = min(rate[below], rate[above])
            theirs = median(results.rate[(graph.name, top)])
            target(f"flowmem / LangGraph appends/s at {top:,}", ours / theirs, 20.0)
        last50 = {n: median(results.last50[(tuned.name, n)]) for n in tuned.lengths}
        label = f"last-50 load time at {last:,} / at {first:,}"
        target(label, last50[last] / last50[first], 2.0, True)
        peaks = results.append_peak
        target(
            f"peak append memory at {last:,} / at {first:,}",
            peaks[(tuned.name, last)] / peaks[(tuned.name, first)],
            1.5,
            True,
        )
        agents = results.memory.get("agents SQLiteSession")
        ours_load = results.memory.get(f"{tuned.name} load")
        if agents and ours_load:
            theirs = median([p for p, _ in agents]) / results.memory_rows["agents SQLiteSession"]
            mine = median([p for p, _ in ours_load]) / results.memory_rows[f"{tuned.name} load"]
            target("load memory per message / SQLiteSession (peak)", mine / theirs, 1.0, True)


def measurements(results: Results, plan: Plan, repeats: int) -> dict[str, Any]:
    """Every sample of the run, keyed system -> length (the JSON's own part)."""

    def table(found: dict[tuple[str, int], Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for (name, n), value in found.items():
            out.setdefault(name, {})[str(n)] = value
        return out

    return {
        "plan": asdict(plan),
        "repeats": repeats,
        "appends_per_s": table(results.rate),
        "last50_load_s": table(results.last50),
        "whole_load_s": table(results.whole),
        "load_memory": {
            probe: {
                "messages": results.memory_rows[probe],
                "peak_bytes": [peak for peak, _ in found],
                "kept_bytes": [kept for _, kept in found],
            }
            for probe, found in results.memory.items()
        },
        "append_peak_bytes": table(results.append_peak),
        "append_p50_s": table(results.p50),
        "append_p99_s": table(results.p99),
        "wal_size_changes": table(results.wal_grew),  # per run: appends whose commit changed it
        # per run: every single append's seconds, in the order made (a fresh file's first
        # appends against its later ones: the room made in its log, its first checkpoint)
        "append_s": table(results.times),
        "wal_size_changed_at": table(results.grew_at),  # per run: those appends' indexes in append_s
        # per run, per append: [ns the calling thread ran, ns it waited for a CPU] (Linux'
        # schedstat): for flowmem, whose append runs on that thread, its time less both is
        # time it slept (its flush, a lock); a peer's worker threads are not counted
        "append_sched_ns": table(results.sched),
    }


def postgres_peers(args: argparse.Namespace, quick: bool) -> tuple[int, dict[str, Any]]:
    """Run bench/peers_postgres.py (same run, a process of its own); its exit code and JSON."""
    command = ["--no-peers"] if args.no_peers else []
    if args.postgres != "start":
        command += ["--postgres", args.postgres]
    elif args.postgres_nondurable:
        command += [pgserver.NONDURABLE]
    command += ["--quick"] if quick else ["--repeats", str(max(1, args.repeats))]
    path = args.json.with_name(f"{args.json.stem}-peers_postgres.json")
    command += ["--json", str(path)]
    # in a process of its own: not on the heap the SQLite section left (hundreds of
    # MiB of loaded buffers), which slows every system's allocations unevenly
    script = str(Path(__file__).with_name("peers_postgres.py"))
    done = subprocess.run([sys.executable, script, *command])
    return done.returncode, json.loads(path.read_text()) if path.exists() else {}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 when a target is missed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pgserver.add_arguments(
        parser,
        "a server URL (flowmem on it, then the PostgreSQL peers), or 'start': the peers "
        "on a throwaway durable server",
    )
    parser.add_argument("--no-peers", action="store_true", help="measure flowmem only")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of every measure")
    parser.add_argument(
        "--guarded", action="store_true", help="flowmem appends carry a token and session guard"
    )
    parser.add_argument(
        "--only",
        choices=["normalization"],
        help="run one section only: normalization (bench/core.py's histories, vs deepagents)",
    )
    parser.add_argument("--big", action="store_true", help="also at 100,000 rows (slow)")
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the memory of a whole load (appends and loads only)"
    )
    parser.add_argument(
        "--dir", default=None, help="where the fresh files are made (the disk measured; default: $TMPDIR)"
    )
    parser.add_argument(
        "--plain-wal",
        action="store_true",
        help="also the default call with SQLite's log grown by every commit (no room made ahead: decision 0154)",
    )
    parser.add_argument(
        "--disk-writer",
        type=int,
        default=0,
        metavar="MIB",
        help="while appending, another process rewrites a file of MIB MiB beside the databases, "
        "1 MiB at a time, each write fsynced (0: none)",
    )
    parser.add_argument(
        "--files",
        type=int,
        default=None,
        metavar="N",
        help="fresh files per system and length in each run, every one appended to in the same "
        f"rounds: N x {Plan.rounds} single appends a run (default {Plan.files}; --quick: {QUICK.files})",
    )
    report_json.add_arguments(parser, "store", "tiny buffers, one repeat")
    args = parser.parse_args(argv)
    pgserver.check(parser, args.postgres_nondurable, args.postgres != "start" and args.postgres)
    if args.files is not None and args.files < 1:
        parser.error("--files must be at least 1")
    plan = QUICK if args.quick else Plan()
    if args.files is not None:
        plan = replace(plan, files=args.files)
    repeats = 1 if args.quick else max(1, args.repeats)
    meta = report_json.environment(PACKAGES)
    targets = report_json.Targets(args.quick)
    durability: dict[str, dict[str, Any]] = {}
    found: dict[str, Any] = {}
    core = siblings.load("core")
    found["normalization"] = core.section(targets, plan.normalization, repeats, plan.samples)
    if args.only == "normalization":
        report_json.write(args.json, "store", argv, meta, {}, targets.items, found, args.quick)
        return 0 if args.quick or not targets.failed else 1
    lengths = plan.lengths + ((100_000,) if args.big and not args.quick else ())
    graph = plan.langgraph_lengths
    with tempfile.TemporaryDirectory(prefix="flowmem-bench-", dir=args.dir) as tmp:
        base = Path(tmp)
        print(f"flowmem store benchmark: one message per append, WAL + synchronous=FULL, in {tmp}")
        print(f"disk: {disk_of(base)}")
        print(f"each run: {plan.files} fresh file(s) per system and length, {plan.rounds} rounds of single appends")
        specs = [
            Spec("flowmem SqliteStore", lengths, lambda f: Flowmem("flowmem SqliteStore", sqlite_at(f), lengths, args.guarded)),
            # the service as a user calls it (the default) and asking for the buffer back
            Spec("flowmem service", lengths, lambda f: FlowmemService("flowmem service", sqlite_at(f), lengths, asked=False)),
            Spec("flowmem service +messages", lengths, lambda f: FlowmemService("flowmem service +messages", sqlite_at(f), lengths, asked=True)),
        ]  # fmt: skip
        if args.plain_wal:  # the default call without the room made ahead in the WAL, side by side
            specs.append(Spec("flowmem service plain WAL", lengths, lambda f: FlowmemService("flowmem service plain WAL", sqlite_at(f), lengths, asked=False, plain_wal=True)))  # fmt: skip
        if not args.no_peers:
            specs.append(Spec("agents SQLiteSession", lengths, lambda f: AgentsSession(f / "agents.db", lengths)))
            specs.append(Spec("LangChain SQLChatMessageHistory", lengths, lambda f: LangChainSQL(f / "langchain.db", lengths)))
            specs.append(Spec("LangGraph SqliteSaver", graph, lambda f: LangGraph(f / "langgraph.db", graph)))  # fmt: skip
        if args.postgres and args.postgres != "start":
            pg, url = "PostgreSQL", args.postgres
            specs.append(Spec("flowmem PostgresStore", lengths, lambda f: Flowmem("flowmem PostgresStore", url, lengths, args.guarded, group=pg)))
            specs.append(Spec("flowmem pg service", lengths, lambda f: FlowmemService("flowmem pg service", url, lengths, False, group=pg)))  # fmt: skip
        if args.quick:  # the peers' imports make each gc.collect() of a measure cost 0.15 s
            global _freeze_after_collect
            _freeze_after_collect = True
            gc.freeze()
        writer = DiskWriter(base, args.disk_writer) if args.disk_writer else None
        try:
            results = run(specs, repeats, plan, base)
        finally:
            writing = writer.stop() if writer is not None else None
        (base / "memory").mkdir()
        systems: list[System] = []
        for spec in specs:
            (base / "memory" / spec.name.replace(" ", "-")).mkdir()
            systems.append(spec.make(base / "memory" / spec.name.replace(" ", "-")))
        try:
            for system in systems:
                system.memory_rows = 0 if args.no_memory else min(system.memory_rows, plan.memory_rows)
            memory(systems, repeats, results)
            durability = {system.name: system.database() for system in systems}
        finally:
            for system in systems:
                system.close()
        print()
        report_json.describe(meta, durability)
        if writing is not None:
            print(f"concurrent disk writer: {writing['label']}")
        report(systems, results, repeats, targets)
    found["disk"] = disk_of(Path(args.dir or tempfile.gettempdir()))
    found["disk_writer"] = writing
    found.update(measurements(results, plan, repeats))
    found["ratios"] = ratios(results, systems)
    failed = targets.failed
    if not args.quick:
        print("\nall targets met" if not failed else f"\nmissed: {', '.join(failed)}")
    if args.postgres:  # the PostgreSQL peers, same run (bench/peers_postgres.py)
        code, peers = postgres_peers(args, args.quick)
        found["postgres_peers"] = peers
        theirs = {f"peers: {k}": v for k, v in peers.get("durability", {}).items()}
        print("\n".join(report_json.durability_lines(theirs)) if theirs else "")
        durability |= theirs
        failed += ["postgres"] if code else []
    report_json.write(args.json, "store", argv, meta, durability, targets.items, found, args.quick)
    return 0 if args.quick or not failed else 1


if __name__ == "__main__":
    sys.exit(main())
