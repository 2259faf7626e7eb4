"""Profile the saver's calls (every thread) in the segment at 100 and the one at 1,000 of one grown thread.
usage: PYTHONPATH=SRC python prof.py URL KIND(flowmem|postgres|null) OUTPREFIX [whole]
whole: profile every thread for the whole invoke (threading.setprofile) instead of only inside the calls."""

import cProfile, gc, importlib.util, json, os, pstats, sys, threading, time, uuid

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BENCH, "lib"))
spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lg)
import psycopg

url, kind, out = sys.argv[1], sys.argv[2], sys.argv[3]
whole = len(sys.argv) > 4 and sys.argv[4] == "whole"
db = f"lg5_{uuid.uuid4().hex[:8]}"
with psycopg.connect(url, autocommit=True) as c:
    c.execute(f"CREATE DATABASE {db}")
durl = lg.database_url(url, db)
import contextlib

try:
    if kind == "flowmem":
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        cm = FlowmemSaver.from_conn_string(durl)
    elif kind == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        cm = PostgresSaver.from_conn_string(durl)
    elif kind == "nulltuple":
        null = lg.NullSaver(1000).make(0)
        orig = null.put

        def put(config, checkpoint, metadata, new_versions):
            null.keep = tuple(checkpoint["channel_values"].get("messages", ()))
            return orig(config, checkpoint, metadata, new_versions)

        null.put = put
        cm = contextlib.nullcontext(null)
    else:
        cm = contextlib.nullcontext(lg.NullSaver(1000).make(0))
    with cm as saver:
        if kind == "postgres":
            saver.setup()
        graph = lg.build_graph(saver)
        for w in range(2):
            graph.invoke({"messages": [lg.message(0)]}, lg.config(f"warm{w}"))
        profs = []
        local = threading.local()
        on = [False]
        if not whole:
            inner = {name: getattr(saver, name) for name in lg.CLOCKED}

            def wrap(call):
                def profiled(*a, **k):
                    if not on[0] or getattr(local, "depth", 0):
                        return call(*a, **k)
                    p = getattr(local, "p", None)
                    if p is None:
                        p = local.p = cProfile.Profile(time.thread_time)
                        profs.append(p)
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
        results = {}
        for end in range(100, 1001, 100):
            measured = end in (100, 1000)
            gc.collect()
            if measured:
                profs.clear()
                local.__dict__.clear() if False else None
                local = threading.local()
                on[0] = True
                if whole:
                    ps = []

                    def starter(*a):
                        p = cProfile.Profile(time.thread_time)
                        ps.append(p)
                        p.enable()

                    threading.setprofile(starter)
                    mp = cProfile.Profile(time.thread_time)
                    mp.enable()
            cpu = time.process_time()
            graph.invoke({"messages": [lg.message(end - 100)]}, lg.config("grown"))
            cpu = time.process_time() - cpu
            if measured:
                on[0] = False
                if whole:
                    mp.disable()
                    threading.setprofile(None)
                    for p in ps:
                        p.disable()
                    allp = [mp] + ps
                else:
                    allp = list(profs)
                st = pstats.Stats(allp[0])
                for p in allp[1:]:
                    st.add(p)
                st.dump_stats(f"{out}-{end}.prof")
                ncalls = sum(v[1] for v in st.stats.values())
                tt = sum(v[2] for v in st.stats.values())
                results[end] = {
                    "calls_per_step": ncalls / 100,
                    "tottime_ms_per_step": tt / 100 * 1000,
                    "proc_cpu_ms_per_step": cpu / 100 * 1000,
                }
finally:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
print(json.dumps(results))
