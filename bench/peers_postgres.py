"""PostgreSQL append benchmark: flowmem's ``PostgresStore`` beside its PostgreSQL peers.

Not a test. One run, one PostgreSQL server, every system side by side:

- ``flowmem PostgresStore``: ``Store.append`` of one message (the tuned call);
- ``flowmem PostgresStore guarded``: the same with a ``WriteGuard`` (token and
  session), as the HTTP API's session-scope appends do (docs/decisions/0014);
- ``flowmem pg service default``: ``MemoryService.append`` as a user writes it;
- ``langchain-postgres``: ``PostgresChatMessageHistory.add_messages`` (one
  ``INSERT`` per message, no rules);
- ``agents SQLAlchemySession``: the OpenAI Agents SDK session on
  ``postgresql+asyncpg``;
- ``LangGraph PostgresSaver``: ``update_state`` with the ``add_messages`` reducer
  (every checkpoint stores the whole list; sampled every 20th round, lengths
  100, 1,000 and 2,000).

The messages are bench/store.py's conversation (user, assistant calling a tool,
the tool result, answer). Each run (``--repeats``, default 3) gives every system a
database of its own, made fresh for that run (``CREATE DATABASE``; a user's disk sees
new tables, not cleared and refilled ones), fills each buffer to its length through
the call it is then timed with (batches of 500: the guarded append with its guard, the
service through ``MemoryService.append``, each peer its own call), then
times single appends in interleaved rounds (every system, every length, one append
each; the systems' order rotates from round to round and from run to run), and drops
the databases. appends/s is reported as min / median / max over the runs. flowmem ÷
langchain-postgres (the plain append and the guarded one, what HTTP sends) is
reported at each length as min / median / max of the per-run ratios, by rate and by
the p50 of single appends, and judged on the minimum of each (issue 42 #3: >= 1.0).
Then, one system at a time, the WAL each append writes (``pg_stat_wal``: records,
full-page images, bytes; not in ``--quick``; ``bench/wal_postgres.py`` counts it per
message kind with pg_waldump).

    python bench/peers_postgres.py                      # starts a throwaway server
    python bench/peers_postgres.py --postgres URL       # or use this one
    python bench/store.py --postgres URL                # runs this after its own tables
    python bench/peers_postgres.py --quick              # tiny sizes: a smoke run

The throwaway server is durable (``fsync``, ``synchronous_commit`` and
``full_page_writes`` on, as initdb sets them; ``--postgres-nondurable`` turns them
off and the output says so); a server given by URL is used as it is configured.
Either way the run prints what the server reports, and writes it with every
sample and the targets to ``bench/results/peers_postgres.json`` (``--json PATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# Run as a script this folder is first on sys.path, where bench/http.py would shadow
# the standard library's ``http`` (the peers import it). Drop it; the benches' shared
# modules are in bench/lib, a sibling bench loads by path.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
# first: the pgserver wheel (PostgreSQL binaries for the tests) is also named pgserver
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import pgserver
import report_json
import siblings

PACKAGES = ("psycopg", "langchain-postgres", "openai-agents", "sqlalchemy", "asyncpg")
PACKAGES += ("langgraph", "langgraph-checkpoint-postgres")
_MESSAGES = siblings.load("store")  # turn / agents_item / langchain_message: one conversation


@dataclass(frozen=True)
class Plan:
    """The sizes of a run: buffer lengths (LangGraph's apart) and appends timed per repeat."""

    lengths: tuple[int, ...] = (100, 1_000, 10_000)
    langgraph_lengths: tuple[int, ...] = (100, 1_000, 2_000)
    rounds: int = 150  # single appends timed per system and length in each repeat


QUICK = Plan((50, 200), (50,), 10)
WAL_APPENDS = 200  # appends per system whose WAL is counted (after the timed rounds)
GUARDED = "flowmem PostgresStore guarded"
WAL_SYSTEMS = ("flowmem PostgresStore", GUARDED, "langchain-postgres")
STATS_FLUSHED_S = 11.0  # an idle backend reports its WAL counts within 10 s (PGSTAT_IDLE_INTERVAL)


class PgSystem:
    """One system: a buffer per length, filled, then timed single appends."""

    name = ""
    every = 1  # takes part in every ``every``-th round

    def __init__(self, lengths: tuple[int, ...], appends: int) -> None:
        """``appends``: how many single appends the run makes to each buffer."""
        self.lengths = lengths
        self.top = max(lengths) + appends  # the messages the run needs
        self.next = dict.fromkeys(lengths, 0)
        self.rates: dict[int, list[float]] = {n: [] for n in lengths}
        # every timed append's seconds, per repeat and length (the p50 of single appends)
        self.latencies: list[dict[int, list[float]]] = []
        self._times: dict[int, list[float]] = {n: [] for n in lengths}
        self._done = dict.fromkeys(lengths, 0)
        self._spent = dict.fromkeys(lengths, 0.0)

    def fill(self, length: int) -> None:
        """Bring the buffer of ``length`` to ``length`` messages (not timed)."""
        raise NotImplementedError

    def append(self, length: int, i: int) -> None:
        """Append message ``i`` alone to the buffer of ``length``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections and drop what the run stored."""

    def timed_append(self, length: int) -> None:
        """Append the next message of the buffer of ``length``, timing it."""
        i = length + self.next[length]
        started = time.perf_counter()
        self.append(length, i)
        took = time.perf_counter() - started
        self._spent[length] += took
        self._times[length].append(took)
        self._done[length] += 1
        self.next[length] += 1

    def end_repeat(self) -> None:
        """Record this repeat's appends/s per length and start the next one."""
        for n in self.lengths:
            if self._done[n]:
                self.rates[n].append(self._done[n] / self._spent[n])
            self._done[n], self._spent[n] = 0, 0.0
        self.latencies.append(self._times)
        self._times = {n: [] for n in self.lengths}


class FlowmemPg(PgSystem):
    """flowmem ``PostgresStore.append``, optionally guarded, or through ``MemoryService``."""

    def __init__(
        self, name: str, url: str, lengths: tuple[int, ...], appends: int, mode: str = "store"
    ) -> None:
        from flowmem.core import prepare
        from flowmem.store import Address, SessionRecord, WriteGuard, open_store

        self.name = name
        super().__init__(lengths, appends)
        self.mode = mode
        self.store = open_store(url)
        tag = uuid.uuid4().hex[:8]
        self.keys = {n: Address("session", f"bench-{tag}", f"chat-{n}") for n in lengths}
        self.rows = [prepare(_MESSAGES.turn(i), 1_755_000_000 + i)[0] for i in range(self.top)]
        self.guard: Any = None
        if mode == "guarded":
            from flowmem.auth import create_token

            session = f"bench-{tag}"
            self.store.create_session(SessionRecord(session, "bench", "bench"))
            _, record = create_token(self.store, "bench")
            self.guard = WriteGuard(record.id, session)
        if mode == "service":
            from flowmem.scope import ExecutionContext
            from flowmem.service import MemoryService

            self.service = MemoryService(self.store)
            self.context = ExecutionContext(user_id=f"bench-{tag}")
            self.keys = {n: Address("user", f"bench-{tag}", f"svc-{n}") for n in lengths}

    def fill(self, length: int) -> None:
        """Through the call each mode is timed with, as a user fills, in batches of 500.

        The guarded store with its guard (what an HTTP append of a batch sends), the
        service through ``MemoryService.append``; as the peers are filled with their own
        timed call (decision 0189). Batches of 500 give the same buffer as single appends
        for these turns.
        """
        key = self.keys[length]
        for start in range(0, length, 500):
            end = min(start + 500, length)
            if self.mode == "service":
                turns = [_MESSAGES.turn(i) for i in range(start, end)]
                self.service.append("user", key.key, turns, self.context)
            else:
                self.store.append(key, self.rows[start:end], guard=self.guard)
        assert self.store.count(key) == length

    def append(self, length: int, i: int) -> None:
        """One message per append."""
        if self.mode == "service":
            self.service.append("user", self.keys[length].key, _MESSAGES.turn(i), self.context)
        else:
            self.store.append(self.keys[length], [self.rows[i]], guard=self.guard)

    def close(self) -> None:
        """Drop the buffers and close the store."""
        for key in self.keys.values():
            self.store.clear(key)
        self.store.close()


class LangchainPostgres(PgSystem):
    """langchain-postgres ``PostgresChatMessageHistory.add_messages``, one message per call."""

    name = "langchain-postgres"

    def __init__(self, url: str, lengths: tuple[int, ...], appends: int) -> None:
        import psycopg
        from langchain_postgres import PostgresChatMessageHistory

        super().__init__(lengths, appends)
        self.conn = psycopg.connect(url)
        self.table = f"lc_bench_{uuid.uuid4().hex[:8]}"
        PostgresChatMessageHistory.create_tables(self.conn, self.table)
        self.histories = {
            n: PostgresChatMessageHistory(self.table, str(uuid.uuid4()), sync_connection=self.conn)
            for n in lengths
        }
        self.messages = [_MESSAGES.langchain_message(i) for i in range(self.top)]

    def fill(self, length: int) -> None:
        """Batches of 500 messages."""
        for start in range(0, length, 500):
            self.histories[length].add_messages(self.messages[start : min(start + 500, length)])

    def append(self, length: int, i: int) -> None:
        """One message per ``add_messages``."""
        self.histories[length].add_messages([self.messages[i]])

    def close(self) -> None:
        """Drop the table."""
        self.conn.execute(f"DROP TABLE IF EXISTS {self.table}")
        self.conn.commit()
        self.conn.close()


class AgentsAlchemy(PgSystem):
    """OpenAI Agents ``SQLAlchemySession.add_items`` on ``postgresql+asyncpg``."""

    name = "agents SQLAlchemySession"

    def __init__(self, url: str, lengths: tuple[int, ...], appends: int) -> None:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        super().__init__(lengths, appends)
        self.loop = asyncio.new_event_loop()
        tag = uuid.uuid4().hex[:8]
        alchemy = url.replace("postgresql://", "postgresql+asyncpg://", 1)
        self.sessions = {
            n: SQLAlchemySession.from_url(
                f"bench-{tag}-{n}",
                url=alchemy,
                create_tables=True,
                sessions_table=f"ag_sessions_{tag}",
                messages_table=f"ag_messages_{tag}",
            )
            for n in lengths
        }
        self.tables = (f"ag_messages_{tag}", f"ag_sessions_{tag}")
        self.url = url
        self.items = [_MESSAGES.agents_item(i) for i in range(self.top)]

    def fill(self, length: int) -> None:
        """Batches of 500 items."""
        for start in range(0, length, 500):
            batch = self.items[start : min(start + 500, length)]
            self.loop.run_until_complete(self.sessions[length].add_items(batch))

    def append(self, length: int, i: int) -> None:
        """One item per ``add_items``."""
        self.loop.run_until_complete(self.sessions[length].add_items([self.items[i]]))

    def close(self) -> None:
        """Dispose of the engines and drop the tables."""
        import psycopg

        for session in self.sessions.values():
            self.loop.run_until_complete(session.engine.dispose())
        self.loop.close()
        with psycopg.connect(self.url, autocommit=True) as conn:
            for table in self.tables:
                conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")


class LangGraphPg(PgSystem):
    """LangGraph ``PostgresSaver`` + ``add_messages``: one ``update_state`` per message."""

    name = "LangGraph PostgresSaver"
    every = 20

    def __init__(self, url: str, lengths: tuple[int, ...], appends: int) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.graph import START, MessagesState, StateGraph
        from psycopg.rows import dict_row

        super().__init__(lengths, appends)
        self.conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(self.conn)  # type: ignore[arg-type]
        saver.setup()
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {})
        builder.add_edge(START, "agent")
        self.graph = builder.compile(checkpointer=saver)
        tag = uuid.uuid4().hex[:8]
        self.threads = [f"bench-{tag}-{n}" for n in lengths]
        self.configs = {n: {"configurable": {"thread_id": f"bench-{tag}-{n}"}} for n in lengths}

    def fill(self, length: int) -> None:
        """One update carrying the first ``length`` messages."""
        messages = [_MESSAGES.langchain_message(i) for i in range(length)]
        self.graph.update_state(self.configs[length], {"messages": messages})  # type: ignore[arg-type]

    def append(self, length: int, i: int) -> None:
        """One message per ``update_state``."""
        message = _MESSAGES.langchain_message(i)
        self.graph.update_state(self.configs[length], {"messages": [message]})  # type: ignore[arg-type]

    def close(self) -> None:
        """Delete the threads and close the connection."""
        for thread in self.threads:
            self.graph.checkpointer.delete_thread(thread)  # type: ignore[union-attr]
        self.conn.close()


def build(
    fresh: Callable[[], str], plan: Plan, peers: bool = True, only: str | None = None
) -> list[PgSystem]:
    """The systems of one run, flowmem first, each on a fresh database (``fresh()``: its URL)."""
    n, graph, appends = plan.lengths, plan.langgraph_lengths, plan.rounds + WAL_APPENDS
    makers: list[tuple[str, Callable[[str], PgSystem]]] = [
        ("flowmem", lambda url: FlowmemPg("flowmem PostgresStore", url, n, appends)),
        ("guarded", lambda url: FlowmemPg(GUARDED, url, n, appends, "guarded")),
        (
            "service",
            lambda url: FlowmemPg("flowmem pg service default", url, n, appends, "service"),
        ),
    ]
    if peers:
        makers += [
            ("langchain", lambda url: LangchainPostgres(url, n, appends)),
            ("agents", lambda url: AgentsAlchemy(url, n, appends)),
            ("langgraph", lambda url: LangGraphPg(url, graph, appends)),
        ]
    chosen = [make for key, make in makers if only is None or key in only.split(",")]
    return [make(fresh()) for make in chosen]


def run(systems: list[PgSystem], rounds: int, shift: int = 0) -> None:
    """Fill every buffer, then time single appends in interleaved rounds (one run).

    ``shift``: where the rotation starts (the run's number: every run starts elsewhere).
    """
    for system in systems:
        for length in system.lengths:
            system.fill(length)
    lengths = sorted({n for system in systems for n in system.lengths})
    for round_no in range(rounds):
        # the order rotates every round: whoever runs right after the peers that
        # allocate the most (LangGraph, the Agents SDK) pays their garbage
        # collection, so every system takes every place equally often
        turn = (round_no + shift) % len(systems)
        for length in lengths:
            for system in systems[turn:] + systems[:turn]:
                if length in system.lengths and round_no % system.every == 0:
                    system.timed_append(length)
    for system in systems:
        system.end_repeat()


@dataclass
class Runs:
    """One system's figures over the runs: appends/s and every timed append, per run and length."""

    name: str
    lengths: tuple[int, ...]
    rates: dict[int, list[float]]
    latencies: list[dict[int, list[float]]]

    def add(self, system: PgSystem) -> None:
        """Keep the run ``system`` made (its one repeat)."""
        for n in self.lengths:
            self.rates[n] += system.rates[n]
        self.latencies += system.latencies


def runs_of(system: PgSystem) -> Runs:
    """An empty record for ``system``'s runs."""
    return Runs(system.name, system.lengths, {n: [] for n in system.lengths}, [])


def ratios(ours: Runs, peer: Runs, n: int) -> tuple[list[float], list[float], float]:
    """At length ``n``: each run's appends/s ratio, each run's p50 ratio, and the pooled p50 ratio.

    A p50 ratio is the peer's median append time over ours: above 1.0 the typical
    append is faster, not only the total.
    """
    per_run = [a / b for a, b in zip(ours.rates[n], peer.rates[n], strict=True)]
    p50s = [
        statistics.median(theirs[n]) / statistics.median(mine[n])
        for mine, theirs in zip(ours.latencies, peer.latencies, strict=True)
    ]
    mine = statistics.median(t for run in ours.latencies for t in run[n])
    theirs = statistics.median(t for run in peer.latencies for t in run[n])
    return per_run, p50s, theirs / mine


def spread(values: list[float]) -> dict[str, float]:
    """min / median / max."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def report(records: list[Runs], targets: report_json.Targets) -> dict[str, Any]:
    """Print the table (min / median / max appends/s) and check the targets; return the ratios.

    flowmem (plain and guarded) ÷ langchain-postgres at each length: min / median /
    max of the per-run ratios, by rate and by p50; judged on the minimum of each
    (issue 42 #3: >= 1.0 at every length).
    """
    print(f"\n{'system':32} {'length':>7} {'min':>8} {'median':>8} {'max':>8}  appends/s")
    for record in records:
        for n in record.lengths:
            r = record.rates[n]
            print(
                f"{record.name:32} {n:7d} {min(r):8.0f} {statistics.median(r):8.0f} {max(r):8.0f}"
            )
    by_name = {record.name: record for record in records}
    peer = by_name.get("langchain-postgres")
    found: dict[str, Any] = {}
    if peer is None:
        return found
    runs = len(peer.latencies)
    print("\nflowmem / langchain-postgres, per-run ratios [min median max]: by rate; by p50")
    for name in ("flowmem PostgresStore", GUARDED):
        ours = by_name.get(name)
        if ours is None:
            continue
        found[name] = {}
        for n in peer.lengths:
            per_run, p50s, pooled = ratios(ours, peer, n)
            found[name][str(n)] = {
                "rate": spread(per_run),
                "p50": spread(p50s),
                "p50_pooled": pooled,
            }
            text = " ".join(f"{v:.2f}" for v in spread(per_run).values())
            p50 = " ".join(f"{v:.2f}" for v in spread(p50s).values())
            print(f"  {name} at {n:,}: rate [{text}]; p50 [{p50}] (pooled {pooled:.2f})")
    print(f"\nTargets: flowmem / langchain-postgres >= 1.0, the minimum of {runs} runs")
    for name in ("flowmem PostgresStore", GUARDED):
        ours = by_name.get(name)
        if ours is None:
            continue
        for n in peer.lengths:
            per_run, p50s, _ = ratios(ours, peer, n)
            label = f"{name} / langchain-postgres at {n:,}"
            targets.check(f"{label}: appends/s (min of {runs} runs)", min(per_run), 1.0)
            targets.check(f"{label}: p50 of single appends (min of {runs} runs)", min(p50s), 1.0)
    return found


def wal_per_append(systems: list[PgSystem], url: str, appends: int) -> dict[str, dict[str, float]]:
    """WAL records, full-page images and bytes per append (``pg_stat_wal``), one system at a time.

    Each system alone appends ``appends`` messages to its middle buffer, after a
    ``VACUUM`` and a ``CHECKPOINT`` (when allowed: every system then pays the same
    full-page images), with autovacuum paused (``autovacuum_paused``);
    the counts are read once every backend has reported them. Other activity on
    the server (autovacuum) is counted too: a figure is an upper bound.
    """
    import psycopg

    found: dict[str, dict[str, float]] = {}
    with psycopg.connect(url, autocommit=True) as conn, autovacuum_paused(conn):

        def counts() -> tuple[int, int, int]:
            row = conn.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal").fetchone()
            assert row is not None
            return int(row[0]), int(row[1]), int(row[2])

        for system in systems:
            if system.name not in WAL_SYSTEMS:
                continue
            length = system.lengths[len(system.lengths) // 2]
            for settle in ("VACUUM (ANALYZE)", "CHECKPOINT"):  # no autovacuum, equal page images
                with contextlib.suppress(psycopg.Error):
                    conn.execute(settle)
            time.sleep(STATS_FLUSHED_S)
            before = counts()
            for _ in range(appends):
                system.timed_append(length)
            time.sleep(STATS_FLUSHED_S)
            after = counts()
            records, fpi, size = (b - a for a, b in zip(before, after, strict=True))
            found[system.name] = {
                "length": length,
                "records": records / appends,
                "fpi": fpi / appends,
                "bytes": size / appends,
            }
        system_rates_reset(systems)
    print(f"\nWAL per append (pg_stat_wal, {appends} appends each, after a CHECKPOINT)")
    for name, wal in found.items():
        print(
            f"  {name:32} at {wal['length']:,}: {wal['records']:.1f} records, "
            f"{wal['fpi']:.2f} full-page images, {wal['bytes']:.0f} bytes"
        )
    return found


@contextlib.contextmanager
def autovacuum_paused(conn: Any) -> Iterator[None]:
    """Pause autovacuum while WAL is counted (a superuser's server: the throwaway one), then restore it.

    Its writes would be counted as the appends' (pg_stat_wal is the server's total).
    Elsewhere nothing changes, and the figures are upper bounds.
    """
    import psycopg

    try:
        conn.execute("ALTER SYSTEM SET autovacuum = off")
        conn.execute("SELECT pg_reload_conf()")
    except psycopg.Error:
        yield
        return
    try:
        yield
    finally:
        conn.execute("ALTER SYSTEM RESET autovacuum")
        conn.execute("SELECT pg_reload_conf()")


def system_rates_reset(systems: list[PgSystem]) -> None:
    """Forget the WAL phase's timings (they are not the interleaved rounds')."""
    for system in systems:
        system._done = dict.fromkeys(system.lengths, 0)
        system._spent = dict.fromkeys(system.lengths, 0.0)
        system._times = {n: [] for n in system.lengths}


def measurements(
    records: list[Runs],
    plan: Plan,
    repeats: int,
    wal: dict[str, dict[str, float]],
    found: dict[str, Any],
) -> dict[str, Any]:
    """Every run's appends/s per system and length, p50s, the ratios and WAL (the JSON's own part)."""
    return {
        "repeats": repeats,
        "fresh_database": "per run and per system (CREATE DATABASE)",
        "rounds": plan.rounds,
        "wal_per_append": wal,
        "ratios_to_langchain_postgres": found,
        "p50_append_s": {
            record.name: {
                str(n): statistics.median(t for run in record.latencies for t in run[n])
                for n in record.lengths
            }
            for record in records
        },
        "p50_append_s_per_run": {
            record.name: {
                str(n): [statistics.median(run[n]) for run in record.latencies]
                for n in record.lengths
            }
            for record in records
        },
        "appends_per_s": {
            record.name: {
                str(n): {"samples": rates, "median": statistics.median(rates)}
                for n, rates in record.rates.items()
            }
            for record in records
        },
    }


@contextlib.contextmanager
def fresh_databases(url: str) -> Iterator[Callable[[], str]]:
    """Hand out URLs of new, empty databases on the server at ``url``; drop them all at the end."""
    import psycopg

    made: list[str] = []
    with psycopg.connect(url, autocommit=True) as admin:

        def fresh() -> str:
            name = f"peers_{uuid.uuid4().hex[:12]}"
            admin.execute(f"CREATE DATABASE {name}")
            made.append(name)
            parts = urlsplit(url)
            return urlunsplit(parts._replace(path=f"/{name}"))

        try:
            yield fresh
        finally:
            for name in made:
                with contextlib.suppress(psycopg.Error):
                    admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main(argv: list[str] | None = None) -> int:
    """Run the PostgreSQL comparison; exit 1 when flowmem trails langchain-postgres."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pgserver.add_arguments(parser, "a server URL (default: start a throwaway durable one)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true", help="measure flowmem only")
    parser.add_argument("--only", default=None, help="comma list: flowmem,guarded,service,…")
    parser.add_argument("--no-wal", action="store_true", help="skip the WAL count per append")
    report_json.add_arguments(parser, "peers_postgres", "tiny buffers, one repeat")
    args = parser.parse_args(argv)
    pgserver.check(parser, args.postgres_nondurable, args.postgres)
    plan = QUICK if args.quick else Plan()
    repeats = 1 if args.quick else max(1, args.repeats)
    meta = report_json.environment(PACKAGES)
    with pgserver.server(args.postgres, not args.postgres_nondurable) as (url, _):
        durability = {"PostgreSQL": pgserver.postgres_durability(url)}
        print(f"PostgreSQL appends: one message per append, {repeats} runs, fresh databases")
        report_json.describe(meta, durability)
        records: dict[str, Runs] = {}
        wal: dict[str, dict[str, float]] = {}
        for number in range(repeats):
            with fresh_databases(url) as fresh:
                systems = build(fresh, plan, not args.no_peers, args.only)
                try:
                    run(systems, plan.rounds, number)
                    last = number == repeats - 1
                    if last and not (args.no_wal or args.quick):
                        wal = wal_per_append(systems, url, WAL_APPENDS)
                finally:
                    for system in systems:
                        system.close()
                for system in systems:
                    records.setdefault(system.name, runs_of(system)).add(system)
        targets = report_json.Targets(args.quick)
        found = report(list(records.values()), targets)
    failed = targets.failed
    results = measurements(list(records.values()), plan, repeats, wal, found)
    report_json.write(
        args.json, "peers_postgres", argv, meta, durability, targets.items, results, args.quick
    )
    if args.quick:
        return 0
    print("\nall targets met" if not failed else f"\nmissed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
