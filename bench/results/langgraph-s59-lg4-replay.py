"""A step's saver calls at 100 messages, replayed in one thread: their CPU (``time.thread_time``).

usage: PYTHONPATH=SRC python langgraph-s59-lg4-replay.py URL LABEL [flowmem|postgres] [ROUNDS]
One segment of ``bench/langgraph.py``'s graph (a new thread's first 100 steps) is run once
with the saver's ``put``/``put_writes``/``get_tuple`` calls recorded; then the recorded
calls are replayed ROUNDS times, each time on a thread of its own (the thread id replaced),
in this one thread, in the order LangGraph made them. Per round: the calls' thread CPU per
step (the fsync waits are not CPU). Prints one JSON line: every round, their min and median.
"""

import gc
import importlib.util
import json
import os
import sys
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
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 10
db = f"lg4r_{uuid.uuid4().hex[:8]}"
with psycopg.connect(url, autocommit=True) as c:
    c.execute(f"CREATE DATABASE {db}")
durl = lg.database_url(url, db)


def with_thread(config, thread):
    return {**config, "configurable": {**config["configurable"], "thread_id": thread}}


per = []
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
        recorded = []
        originals = {name: getattr(saver, name) for name in ("put", "put_writes", "get_tuple")}

        def recorder(name):
            call = originals[name]

            def record(*args, **kwargs):
                recorded.append((name, args, kwargs))
                return call(*args, **kwargs)

            return record

        for name in originals:
            setattr(saver, name, recorder(name))
        graph = lg.build_graph(saver)
        graph.invoke({"messages": [lg.message(0)]}, lg.config("recorded"))
        for name, call in originals.items():
            setattr(saver, name, call)
        steps = sum(1 for name, _, _ in recorded if name == "put") - 1
        for r in range(rounds + 1):
            thread = f"replay{r}"
            calls = [
                (originals[name], (with_thread(args[0], thread), *args[1:]), kwargs)
                for name, args, kwargs in recorded
            ]
            gc.collect()
            gc.disable()
            started = time.thread_time()
            for call, args, kwargs in calls:
                call(*args, **kwargs)
            spent = time.thread_time() - started
            gc.enable()
            if r:  # the first round warms
                per.append(spent / steps * 1000)
finally:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
print(json.dumps({"label": label, "kind": kind, "steps": steps, "calls_cpu_ms": [round(x, 4) for x in per],
                  "min": min(per), "median": sorted(per)[len(per) // 2]}))
