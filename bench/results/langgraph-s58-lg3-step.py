"""One FlowmemSaver (or PostgresSaver) segment of 100 steps on a fresh database: counts per step.

usage: PYTHONPATH=SRC python step.py URL LABEL [postgres]
Prints one JSON line: per step: python calls (cProfile, whole process), round trips,
statements (pg_stat_statements of the db), backend CPU (schedstat of the db's backends),
client CPU, bytes on the sockets (ss), WAL bytes, wal syncs.
"""

import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
import uuid
import threading

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/
sys.path.insert(0, os.path.join(BENCH, "lib"))
import importlib.util

spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lgbench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lgbench)
import psycopg
import round_trips

url, label = sys.argv[1], sys.argv[2]
kind = sys.argv[3] if len(sys.argv) > 3 else "flowmem"
STEPS = 100
db = f"lg3_{uuid.uuid4().hex[:8]}"
with psycopg.connect(url, autocommit=True) as c:
    c.execute(f"CREATE DATABASE {db}")
durl = lgbench.database_url(url, db)


def backends(admin):
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (db,)
    ).fetchall()
    return [r[0] for r in rows]


def cpu_ns(pid):
    try:
        return int(open(f"/proc/{pid}/schedstat").read().split()[0])
    except FileNotFoundError:
        return 0


def sock_bytes():
    """bytes_sent + bytes_received of this process's TCP sockets (ss)."""
    out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True).stdout
    total = [0, 0]
    lines = out.splitlines()
    me = f"pid={os.getpid()},"
    for i, line in enumerate(lines):
        if me in line and i + 1 < len(lines):
            info = lines[i + 1]
            for part in info.split():
                if part.startswith("bytes_sent:"):
                    total[0] += int(part.split(":")[1])
                if part.startswith("bytes_received:"):
                    total[1] += int(part.split(":")[1])
    return total


results = {}
try:
    if kind == "flowmem":
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        cm = FlowmemSaver.from_conn_string(durl)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        cm = PostgresSaver.from_conn_string(durl)
    with cm as saver, psycopg.connect(durl, autocommit=True) as admin:
        if kind != "flowmem":
            saver.setup()
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        graph = lgbench.build_graph(saver)
        # warm: two segments on a thread of its own
        for w in range(2):
            graph.invoke({"messages": [lgbench.message(0)]}, lgbench.config(f"warm{w}"))
        thread = "measured"
        start = int(sys.argv[4]) if len(sys.argv) > 4 else 0
        # grow to start
        for s in range(0, start, 100):
            graph.invoke({"messages": [lgbench.message(s)]}, lgbench.config(thread))
        import gc

        gc.collect()
        admin.execute("SELECT pg_stat_statements_reset()")
        pids = backends(admin)
        cpu0 = {p: cpu_ns(p) for p in pids}
        lsn0 = admin.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        wal0 = admin.execute("SELECT wal_sync, wal_records FROM pg_stat_wal").fetchone()
        sb0 = sock_bytes()
        prof = cProfile.Profile()
        pc0 = time.process_time()
        t0 = time.perf_counter()
        profs = []
        if not os.environ.get("LG3_NOPROF"):
            import threading

            def _hook(*a):
                p = cProfile.Profile()
                profs.append(p)
                p.enable()

            threading.setprofile(_hook)
        with round_trips.counting() as trips:
            if not os.environ.get("LG3_NOPROF"): prof.enable()
            graph.invoke({"messages": [lgbench.message(start)]}, lgbench.config(thread))
            prof.disable()
            threading.setprofile(None) if profs or not os.environ.get("LG3_NOPROF") else None
        wall = time.perf_counter() - t0
        pcpu = time.process_time() - pc0
        sb1 = sock_bytes()
        pids2 = backends(admin)
        cpu1 = {p: cpu_ns(p) for p in pids2}
        bcpu = sum(cpu1[p] - cpu0.get(p, 0) for p in pids2 if p in cpu0)
        lsn1 = admin.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        walb = admin.execute("SELECT pg_wal_lsn_diff(%s, %s)", (lsn1, lsn0)).fetchone()[0]
        wal1 = admin.execute("SELECT wal_sync, wal_records FROM pg_stat_wal").fetchone()
        stmts = admin.execute(
            "SELECT s.calls, s.total_exec_time, s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 150) "
            "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
            "WHERE d.datname = %s ORDER BY s.total_exec_time DESC",
            (db,),
        ).fetchall()
        try:
            st = pstats.Stats(prof)
            for p in profs:
                st.add(p)
            ncalls = sum(v[1] for v in st.stats.values())
        except TypeError:
            ncalls = 0
        results = {
            "label": label,
            "calls": ncalls / STEPS,
            "trips": trips.trips / STEPS,
            "backend_cpu_ms": bcpu / 1e6 / STEPS,
            "client_cpu_ms": pcpu * 1000 / STEPS,
            "wall_ms": wall * 1000 / STEPS,
            "sent": (sb1[0] - sb0[0]) / STEPS,
            "recv": (sb1[1] - sb0[1]) / STEPS,
            "wal_bytes": float(walb) / STEPS,
            "wal_sync": (wal1[0] - wal0[0]) / STEPS,
            "wal_records": (wal1[1] - wal0[1]) / STEPS,
            "statements": sum(r[0] for r in stmts if "pg_stat" not in r[3] and "pg_current_wal" not in r[3]) / STEPS,
            "stmt_ms": sum(r[1] for r in stmts if "pg_stat" not in r[3]) / STEPS,
            "stmts": [(r[0], round(r[1], 2), r[3]) for r in stmts[:40]],
        }
        if os.environ.get("LG3_PROFILE"):
            st.dump_stats(os.environ["LG3_PROFILE"])
finally:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
print(json.dumps(results))
