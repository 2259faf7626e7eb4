"""Where a PostgreSQL append's CPU goes: flowmem's plain and guarded appends beside langchain-postgres.

Not a test. One throwaway server (durable by default, as initdb sets it and as every
bench starts one, docs/decisions/0057; ``--postgres-nondurable`` turns ``fsync``,
``synchronous_commit`` and ``full_page_writes`` off, so the commit's flush does not
hide the CPU, and the output says NON-DURABLE), with ``pg_stat_statements``
(``track=top``) and ``track_functions=pl`` loaded for the counts. Every system gets a
database of its own (bench/peers_postgres.py's systems: ``Store.append`` of one
message, the same with the HTTP API's ``WriteGuard``, and
``PostgresChatMessageHistory.add_messages``), fills a buffer to ``--length``, then
appends in batches interleaved system by system, the order rotated every batch. Per
append, the minimum and median over the batches of:

- wall (``perf_counter``) and client CPU (``process_time``: the Python process);
- server CPU: the system's backends' time on a CPU (``/proc/<pid>/schedstat``, ns),
  summed over every backend connected to its database;

then, apart (load-independent counts): statements per append and each statement's
mean server execution time (``pg_stat_statements``), the trigger functions' time
(``pg_stat_user_functions``), and round trips per append (the times the client
blocked on the server's answer, bench/lib/round_trips.py). ``--profile N`` prints a
cProfile of N appends of each flowmem system (tottime).

    python bench/pg_append_cpu.py --postgres-nondurable   # the CPU alone, 1,000-row buffers
    python bench/pg_append_cpu.py                         # initdb's settings: the flush counted
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # bench/http.py would shadow the standard library's http
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import pgserver
import report_json
import round_trips
import siblings

_PEERS = siblings.load("peers_postgres")
SETTINGS = (
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.track=top",
    "track_functions=pl",
)


def backends(admin: Any, database: str) -> list[int]:
    """The pids of the client backends connected to ``database``."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'",
        (database,),
    ).fetchall()
    return [int(row[0]) for row in rows]


def on_cpu_ns(pids: list[int]) -> int:
    """Nanoseconds the processes ``pids`` spent on a CPU (``/proc/<pid>/schedstat``)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
            total += int(stat.read().split()[0])
    return total


class Measured:
    """One system on its own database, with what its batches measured (µs per append)."""

    def __init__(self, system: Any, database: str, length: int) -> None:
        self.system = system
        self.database = database
        self.length = length
        self.wall: list[float] = []
        self.client: list[float] = []
        self.server: list[float] = []
        self.pids: list[int] = []

    def batch(self, admin: Any, size: int) -> None:
        """Time ``size`` appends: wall, the process's CPU and the backends' CPU, per append."""
        self.pids = self.pids or backends(admin, self.database)
        server0 = on_cpu_ns(self.pids)
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        for _ in range(size):
            self.system.timed_append(self.length)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        server = on_cpu_ns(self.pids) - server0
        self.wall.append(wall / size * 1e6)
        self.client.append(cpu / size * 1e6)
        self.server.append(server / size / 1e3)


def summary(values: list[float]) -> dict[str, float]:
    """min and median."""
    return {"min": min(values), "median": statistics.median(values)}


def statements(admin: Any, measured: list[Measured], appends: int) -> dict[str, Any]:
    """Statements and round trips per append, each statement's mean server time, the triggers' time."""
    import psycopg

    found: dict[str, Any] = {}
    for item in measured:
        admin.execute("SELECT pg_stat_statements_reset()")
        with psycopg.connect(
            admin.info.dsn.replace("dbname=postgres", f"dbname={item.database}"), autocommit=True
        ) as conn:
            conn.execute("SELECT pg_stat_reset()")  # this database's function counts
        with round_trips.counting() as counter:
            for _ in range(appends):
                item.system.timed_append(item.length)
        time.sleep(0.6)  # the backends report their function counts when idle (500 ms)
        rows = admin.execute(
            """SELECT s.query, s.calls, s.total_exec_time, s.rows FROM pg_stat_statements s
                JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s
                AND s.query NOT LIKE 'SELECT pg_stat_reset%%' ORDER BY s.total_exec_time DESC""",
            (item.database,),
        ).fetchall()
        with psycopg.connect(
            admin.info.dsn.replace("dbname=postgres", f"dbname={item.database}"), autocommit=True
        ) as conn:
            functions = conn.execute(
                "SELECT funcname, calls, self_time, total_time FROM pg_stat_user_functions ORDER BY total_time DESC"
            ).fetchall()
        calls = sum(int(r[1]) for r in rows)
        found[item.system.name] = {
            "appends": appends,
            "statements_per_append": calls / appends,
            "round_trips_per_append": counter.trips / appends,
            "server_exec_us_per_append": sum(float(r[2]) for r in rows) * 1e3 / appends,
            "statements": [
                {
                    "query": " ".join(str(r[0]).split())[:160],
                    "calls_per_append": int(r[1]) / appends,
                    "mean_exec_us": float(r[2]) * 1e3 / max(int(r[1]), 1),
                }
                for r in rows
            ],
            "functions": [
                {
                    "name": str(f[0]),
                    "calls_per_append": int(f[1]) / appends,
                    "self_us_per_call": float(f[2]) * 1e3 / max(int(f[1]), 1),
                    "total_us_per_call": float(f[3]) * 1e3 / max(int(f[1]), 1),
                }
                for f in functions
            ],
        }
    return found


def profile(measured: list[Measured], appends: int, top: int = 25) -> dict[str, str]:
    """A cProfile of ``appends`` appends of each flowmem system (by tottime), printed and returned."""
    found = {}
    for item in measured:
        if not item.system.name.startswith("flowmem"):
            continue
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(appends):
            item.system.timed_append(item.length)
        prof.disable()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        out.write(f"Python calls per append: {stats.total_calls / appends:.1f}\n")  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(top)
        found[item.system.name] = out.getvalue()
        print(f"\n--- {item.system.name}: cProfile of {appends} appends ---\n{out.getvalue()}")
    return found


def main(argv: list[str] | None = None) -> int:
    """Measure and print the CPU per append of each system; write the JSON."""
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--postgres-nondurable",
        action="store_true",
        help="fsync, synchronous_commit and full_page_writes off (the output says NON-DURABLE);"
        " default: durable, as initdb sets it",
    )
    parser.add_argument(
        "--length", type=int, default=1_000, help="rows in each buffer before timing"
    )
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch", type=int, default=40, help="appends per batch")
    parser.add_argument("--counted", type=int, default=200, help="appends counted for statements")
    parser.add_argument(
        "--profile", type=int, default=0, help="appends profiled per flowmem system"
    )
    parser.add_argument("--only", default="flowmem,guarded,langchain")
    report_json.add_arguments(parser, "pg_append_cpu", "tiny sizes")
    args = parser.parse_args(argv)
    if args.quick:
        args.length, args.batches, args.batch, args.counted = 50, 2, 5, 10
    appends = args.batches * args.batch + args.counted + args.profile + 100
    plan = _PEERS.Plan((args.length,), (args.length,), appends)
    meta = report_json.environment(_PEERS.PACKAGES)
    with pgserver.throwaway_postgres(not args.postgres_nondurable, settings=SETTINGS) as (url, _):
        durability = {"PostgreSQL": pgserver.postgres_durability(url)}
        report_json.describe(meta, durability)
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            with _PEERS.fresh_databases(url) as fresh:
                urls: list[str] = []

                def made() -> str:
                    urls.append(fresh())
                    return urls[-1]

                systems = _PEERS.build(made, plan, True, args.only)
                measured = [
                    Measured(s, u.rsplit("/", 1)[1], args.length)
                    for s, u in zip(systems, urls, strict=True)
                ]
                try:
                    for item in measured:
                        item.system.fill(args.length)
                        for _ in range(50):  # warm: prepared statements, known facts, caches
                            item.system.timed_append(args.length)
                    for number in range(args.batches):
                        turn = number % len(measured)
                        for item in measured[turn:] + measured[:turn]:
                            item.batch(admin, args.batch)
                    counts = statements(admin, measured, args.counted)
                    profiles = profile(measured, args.profile) if args.profile else {}
                finally:
                    for item in measured:
                        item.system.close()
    results: dict[str, Any] = {"length": args.length, "batches": args.batches, "batch": args.batch}
    print(
        f"\nper append at {args.length:,} rows, µs, min / median of {args.batches} batches of {args.batch}"
    )
    print(
        f"{'system':32} {'wall':>15} {'client CPU':>15} {'server CPU':>15} {'stmts':>6} {'trips':>6} {'exec':>7}"
    )
    peer = next((m for m in measured if m.system.name == "langchain-postgres"), None)
    for item in measured:
        name = item.system.name
        c = counts[name]
        entry = {
            "wall_us": summary(item.wall),
            "client_cpu_us": summary(item.client),
            "server_cpu_us": summary(item.server),
            **c,
        }
        if peer is not None:
            entry["ratio_to_langchain_median"] = {
                key: statistics.median(getattr(item, key)) / statistics.median(getattr(peer, key))
                for key in ("wall", "client", "server")
            }
        results[name] = entry
        cells = [
            f"{min(v):6.0f} / {statistics.median(v):6.0f}"
            for v in (item.wall, item.client, item.server)
        ]
        print(
            f"{name:32} {cells[0]:>15} {cells[1]:>15} {cells[2]:>15} "
            f"{c['statements_per_append']:6.2f} {c['round_trips_per_append']:6.2f} {c['server_exec_us_per_append']:7.1f}"
        )
    for item in measured:
        c = counts[item.system.name]
        print(f"\n{item.system.name}: statements (calls per append, mean exec µs)")
        for s in c["statements"]:
            print(f"  {s['calls_per_append']:5.2f} {s['mean_exec_us']:7.1f}  {s['query'][:110]}")
        for f in c["functions"]:
            print(
                f"  function {f['name']}: {f['calls_per_append']:.3f} per append, {f['total_us_per_call']:.1f} µs a call"
            )
    if profiles:
        results["profiles"] = profiles
    report_json.write(
        args.json,
        "pg_append_cpu",
        list(argv or sys.argv[1:]),
        meta,
        durability,
        [],
        results,
        args.quick,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
