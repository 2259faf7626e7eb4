"""What opening a ``PostgresStore`` costs, on a migrated database (decision 0202).

Run with ``python bench/pg_open.py`` (not part of the tests). It starts a throwaway
durable server (``bench/lib/pgserver.py``), migrates a database once, then for each
code of ``--srcs NAME=DIR,...`` (``before=/tmp/old/src,after=src``) runs a fresh
process on that code that opens and closes ``PostgresStore(url)`` ``--opens`` times
(after two not counted), the codes alternating over ``--rounds`` rounds. Per open:

- ``sessions``: backends the server started (``pg_stat_database.sessions``, read
  by a connection kept open, after the opens' backends have exited);
- ``server_cpu_ms``: the CPU of the server's reaped children (its backends), from
  the postmaster's ``/proc`` entry (``cutime + cstime``);
- ``client_cpu_ms`` / ``wall_ms``: this process's CPU (``time.process_time``, every
  thread) and wall of ``PostgresStore(url)`` then ``close()``, the minimum and median;
- ``threads``: threads started by an open (``threading.Thread.start``);
- ``statements``: statements the client sent (each a round trip, none pipelined at
  open), counted on psycopg's pure-Python libpq binding (``PSYCOPG_IMPL=python``) in
  a process of its own;
- ``calls``: Python function calls of one open, by cProfile, close included;
- ``cli_sessions``: backends one ``flowmem token list --database URL`` process started
  (the CLI's store open, ``open_store``), over ``--cli`` processes a code.

Counts do not move with the machine's load; CPU and wall do (quote the load).
JSON to ``--json PATH`` (default ``bench/results/pg_open.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # bench/http.py would shadow the standard library's http

HERE = Path(__file__).resolve().parent
CLI = "from flowmem.cli import main; main()"  # the console script


def _reaped_cpu(pid: int) -> float:
    """A process's reaped children's CPU seconds (``/proc/PID/stat`` cutime + cstime)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _sessions(conn: Any) -> int:
    """Backends started on the current database so far (PostgreSQL 14+)."""
    row = conn.execute(
        "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0])


def child(url: str, opens: int, postmaster: int) -> dict[str, Any]:
    """Open and close the store ``opens`` times; what each cost (see the module)."""
    import cProfile
    import pstats
    import threading

    import psycopg

    from flowmem.store.postgres import PostgresStore

    for _ in range(2):
        PostgresStore(url).close()
    started = [0]
    plain_start = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started[0] += 1
        plain_start(self)

    threading.Thread.start = counted  # type: ignore[method-assign]
    admin = psycopg.connect(url, autocommit=True)
    time.sleep(0.3)
    sessions0, cpu0 = _sessions(admin), _reaped_cpu(postmaster)
    cpus, walls = [], []
    for _ in range(opens):
        w0, c0 = time.perf_counter(), time.process_time()
        PostgresStore(url).close()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    time.sleep(1.0)  # the backends exit and are reaped after the client closes
    sessions = (_sessions(admin) - sessions0) / opens
    server = (_reaped_cpu(postmaster) - cpu0) / opens
    threads = started[0] / opens
    threading.Thread.start = plain_start  # type: ignore[method-assign]
    profile = cProfile.Profile()
    profile.enable()
    PostgresStore(url).close()
    profile.disable()
    calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    admin.close()
    return {
        "sessions": sessions,
        "server_cpu_ms": round(1000 * server, 3),
        "client_cpu_ms": [round(1000 * min(cpus), 3), round(1000 * statistics.median(cpus), 3)],
        "wall_ms": [round(1000 * min(walls), 3), round(1000 * statistics.median(walls), 3)],
        "threads": threads,
        "calls": calls,
    }


def child_statements(url: str) -> dict[str, Any]:
    """Statements one open sends, on the pure-Python libpq binding (``PSYCOPG_IMPL=python``)."""
    import psycopg.pq

    assert psycopg.pq.__impl__ == "python", psycopg.pq.__impl__
    from flowmem.store.postgres import PostgresStore

    PostgresStore(url).close()
    sent: list[str] = []
    cls = psycopg.pq.PGconn
    names = (
        "send_query",
        "send_query_params",
        "send_prepare",
        "send_query_prepared",
        "exec_",
        "exec_params",
    )
    for name in names:
        plain = getattr(cls, name)

        def wrapped(self: Any, *args: Any, _plain: Any = plain, **kwargs: Any) -> Any:
            sent.append(
                bytes(args[0]).decode()[:60] if args and isinstance(args[0], bytes) else "?"
            )
            return _plain(self, *args, **kwargs)

        setattr(cls, name, wrapped)
    connects = [0]
    plain_connect = cls.connect_start

    def connect_start(conninfo: bytes) -> Any:
        connects[0] += 1
        return plain_connect(conninfo)

    cls.connect_start = staticmethod(connect_start)  # type: ignore[assignment,method-assign]
    store = PostgresStore(url)
    store.close()
    return {"statements": len(sent), "sent": sent, "connects": connects[0]}


def main() -> None:
    """Parse the arguments; run the codes' processes alternating; print and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--srcs", default=f"after={HERE.parent / 'src'}")
    parser.add_argument("--opens", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cli", type=int, default=3)
    parser.add_argument("--json", default=str(HERE / "results" / "pg_open.json"))
    parser.add_argument("--child", nargs=3, metavar=("URL", "OPENS", "POSTMASTER"))
    parser.add_argument("--child-statements", metavar="URL")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]))))
        return
    if args.child_statements:
        print(json.dumps(child_statements(args.child_statements)))
        return

    import psycopg

    sys.path.insert(0, str(HERE))
    from lib.pgserver import throwaway_postgres

    srcs = dict(item.split("=", 1) for item in args.srcs.split(","))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in srcs}
    with throwaway_postgres() as (server_url, postmaster):
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE opens")
        url = server_url.rsplit("/", 1)[0] + "/opens"
        first = next(iter(srcs.values()))
        env = {**os.environ, "PYTHONPATH": first}
        migrate = f"from flowmem.store.postgres import PostgresStore as S; S({url!r}).close()"
        subprocess.run([sys.executable, "-c", migrate], env=env, check=True)
        statements: dict[str, Any] = {}
        for name, src in srcs.items():
            env = {**os.environ, "PYTHONPATH": src, "PSYCOPG_IMPL": "python"}
            done = subprocess.run(
                [sys.executable, __file__, "--child-statements", url],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            statements[name] = json.loads(done.stdout)
        cli: dict[str, float] = {}
        with psycopg.connect(url, autocommit=True) as admin:
            for name, src in srcs.items():
                env = {**os.environ, "PYTHONPATH": src}
                command = [sys.executable, "-c", CLI, "token", "list", "--database", url]
                time.sleep(0.5)
                before = _sessions(admin)
                for _ in range(args.cli):
                    subprocess.run(command, env=env, capture_output=True, check=True)
                time.sleep(1.0)
                admin.execute("SELECT pg_stat_clear_snapshot()")
                cli[name] = (_sessions(admin) - before) / max(1, args.cli)
        for round_ in range(args.rounds):
            order = list(srcs.items()) if round_ % 2 == 0 else list(srcs.items())[::-1]
            for name, src in order:
                env = {**os.environ, "PYTHONPATH": src}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", url, str(args.opens), str(postmaster)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                results[name].append(json.loads(done.stdout))
    load = os.getloadavg()
    summary: dict[str, Any] = {}
    for name, runs in results.items():
        summary[name] = {
            "sessions": min(r["sessions"] for r in runs),
            "connects": statements[name]["connects"],
            "statements": statements[name]["statements"],
            "threads": min(r["threads"] for r in runs),
            "calls": min(r["calls"] for r in runs),
            "client_cpu_ms_min": min(r["client_cpu_ms"][0] for r in runs),
            "client_cpu_ms_median": min(r["client_cpu_ms"][1] for r in runs),
            "wall_ms_min": min(r["wall_ms"][0] for r in runs),
            "wall_ms_median": min(r["wall_ms"][1] for r in runs),
            "server_cpu_ms": min(r["server_cpu_ms"] for r in runs),
            "cli_sessions": cli[name],
        }
        print(name, json.dumps(summary[name]))
        print(name, "sent:", statements[name]["sent"])
    print("load", load)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                "load": load,
                "summary": summary,
                "statements": statements,
                "runs": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
