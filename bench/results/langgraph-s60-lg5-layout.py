import gc, importlib.util, os, sys, time, uuid, contextlib

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BENCH, "lib"))
spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lg)
exec(
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "langgraph-s60-lg5-savers.py"))
    .read()
    .split("try:\n    graphs")[0]
    .split("stack = contextlib.ExitStack()")[1]
    .join(["stack = contextlib.ExitStack()\n", ""])
    if False
    else ""
)
import psycopg
from langgraph.graph.message import add_messages

url = sys.argv[1]
kinds = sys.argv[2:]
src = open(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "langgraph-s60-lg5-savers.py")
).read()
start = src.index("stack = contextlib.ExitStack()")
end = src.index("try:\n    graphs")
exec(src[start:end])
try:
    graphs = {k: lg.build_graph(make(k)) for k in kinds}
    for end in range(100, 1001, 100):
        for k in kinds:
            graphs[k].invoke({"messages": [lg.message(end - 100)]}, lg.config("t"))
    lists = {k: graphs[k].get_state(lg.read_config("t")).values["messages"] for k in kinds}
    fresh = [lg.message(i) for i in range(1000)]
    lists["fresh"] = fresh
    new = [lg.message(5000)]
    for rnd in range(3):
        for k, l in lists.items():
            best = (
                min(
                    min((time.thread_time(), add_messages(l, new), time.thread_time())[::2][::-1])
                    for _ in range(1)
                )
                if False
                else None
            )
            ts = []
            for _ in range(200):
                t0 = time.perf_counter()
                add_messages(l, new)
                ts.append(time.perf_counter() - t0)
            addrs = sorted(id(m) for m in l)
            span = addrs[-1] - addrs[0]
            import statistics

            gaps = [b - a for a, b in zip(addrs, addrs[1:])]
            print(
                f"{k:10s} add_messages min {min(ts) * 1e6:7.1f} us median {sorted(ts)[100] * 1e6:7.1f} us; span {span / 1e6:.1f} MB median gap {statistics.median(gaps)}"
            )
finally:
    stack.close()
    with psycopg.connect(url, autocommit=True) as c:
        for db in dbs:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
