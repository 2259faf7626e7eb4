"""The saver's calls at 100 messages on PostgreSQL: their thread CPU and Python calls per step.

usage: PYTHONPATH=SRC python langgraph-s59-lg4-prof.py URL LABEL [flowmem|postgres] [SEGMENTS] [PROFILE_OUT]
Each segment is a new thread's first 100 steps (the bench's length 100), after two warm
segments. Per segment: the thread CPU inside put/put_writes/get_tuple (bench CallClock, less
gc) per step; then one more segment under cProfile (only inside those calls, every thread)
for the call count. Prints one JSON line.
"""

import cProfile
import gc
import importlib.util
import json
import os
import pstats
import sys
import threading
import time
import uuid

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BENCH, "lib"))
spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lg)
import psycopg  # noqa: E402

url, label = sys.argv[1], sys.argv[2]
kind = sys.argv[3] if len(sys.argv) > 3 else "flowmem"
segments = int(sys.argv[4]) if len(sys.argv) > 4 else 5
out = sys.argv[5] if len(sys.argv) > 5 else None
db = f"lg4_{uuid.uuid4().hex[:8]}"
with psycopg.connect(url, autocommit=True) as c:
    c.execute(f"CREATE DATABASE {db}")
durl = lg.database_url(url, db)
try:
    if kind == "flowmem":
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        cm = FlowmemSaver.from_conn_string(durl)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        cm = PostgresSaver.from_conn_string(durl)
    with cm as saver:
        if kind != "flowmem":
            saver.setup()
        graph = lg.build_graph(saver)
        for w in range(2):
            graph.invoke({"messages": [lg.message(0)]}, lg.config(f"warm{w}"))
        clock = lg.CallClock(saver)
        per = []
        for s in range(segments):
            gc.collect()
            clock.reset()
            graph.invoke({"messages": [lg.message(0)]}, lg.config(f"seg{s}"))
            per.append(clock.own / lg.SEGMENT * 1000)
        clock.close()
        # profile only inside the calls: wrap again, each call under the thread's profiler
        profs = []
        local = threading.local()
        inner = {name: getattr(saver, name) for name in lg.CLOCKED}

        def wrap(call):
            def profiled(*a, **k):
                p = getattr(local, "p", None)
                if p is None:
                    p = local.p = cProfile.Profile(time.thread_time)
                    profs.append(p)
                if getattr(local, "depth", 0):
                    return call(*a, **k)
                local.depth = 1
                p.enable()
                try:
                    return call(*a, **k)
                finally:
                    p.disable()
                    local.depth = 0

            return profiled

        for name, call in inner.items():
            setattr(saver, name, wrap(call))
        gc.collect()
        graph.invoke({"messages": [lg.message(0)]}, lg.config("profiled"))
        st = pstats.Stats(profs[0])
        for p in profs[1:]:
            st.add(p)
        ncalls = sum(v[1] for v in st.stats.values())
        if out:
            st.dump_stats(out)
finally:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
print(json.dumps({"label": label, "kind": kind, "calls_cpu_ms": per, "min": min(per),
                  "median": sorted(per)[len(per) // 2], "python_calls": ncalls / lg.SEGMENT}))
