# LG5 (decision 0213): usage in each script's docstring; the saver makers are langgraph-s60-lg5-savers.py
"""Interleaved: several savers in one process, each grows threads to 1,000; process CPU per step at 100 and at 1,000.
usage: python ab.py URL REPEATS kind1 kind2 ..."""

import gc, importlib.util, os, sys, time, uuid, contextlib, json

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BENCH, "lib"))
spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lg)
import psycopg

url, repeats, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
stack = contextlib.ExitStack()
dbs = []


def make(kind):
    if kind in ("flowmem", "postgres"):
        db = f"lg5_{uuid.uuid4().hex[:8]}"
        dbs.append(db)
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {db}")
        durl = lg.database_url(url, db)
        if kind == "flowmem":
            from flowmem.integrations.langgraph.saver import FlowmemSaver

            return stack.enter_context(FlowmemSaver.from_conn_string(durl))
        from langgraph.checkpoint.postgres import PostgresSaver

        s = stack.enter_context(PostgresSaver.from_conn_string(durl))
        s.setup()
        return s
    null = lg.NullSaver(1000).make(0)
    if kind == "nulltuple":
        orig = null.put

        def put(config, checkpoint, metadata, new_versions):
            null.keep = tuple(checkpoint["channel_values"].get("messages", ()))
            return orig(config, checkpoint, metadata, new_versions)

        null.put = put
    if kind.startswith("nullwork"):
        size = int(kind[8:] or 256) * 1024
        orig2 = null.put

        def putw(config, checkpoint, metadata, new_versions):
            b = bytearray(size)  # zeroed: touched
            b[::64] = bytes(len(b[::64]))
            return orig2(config, checkpoint, metadata, new_versions)

        null.put = putw
    return null


try:
    graphs = {k: lg.build_graph(make(k)) for k in kinds}
    import threading

    am = {"t": 0.0}
    clocks = {}
    for k, g in graphs.items():
        ch = g.channels["messages"]
        op = ch.operator

        def timed(a, b, op=op):
            t0 = time.thread_time()
            try:
                return op(a, b)
            finally:
                am["t"] += time.thread_time() - t0

        ch.operator = timed
        if g.checkpointer is not None:
            clocks[k] = lg.CallClock(g.checkpointer)
        if k == "flowmem":
            import flowmem.integrations.langgraph.saver as sv

            cp = g.checkpointer

            def wrapt(obj, name, label):
                f = getattr(obj, name)

                def w(*a, **kw):
                    t0 = time.thread_time()
                    try:
                        return f(*a, **kw)
                    finally:
                        piece[label] = piece.get(label, 0.0) + time.thread_time() - t0

                setattr(obj, name, w)

            wrapt(cp, "_plan", "plan")
            wrapt(cp.heads, "remember", "remember")
            wrapt(cp.tables, "put_checkpoint", "put_checkpoint")
            wrapt(cp.tables, "put_writes", "put_writes")
            wrapt(cp, "_write_thread", "write_thread")
            wrapt(sv, "message_channels", "message_channels")
            wrapt(cp.memory, "session_claim", "session_claim")
            wrapt(cp, "get_tuple", "get_tuple")
    piece = {}
    pieces = {100: [], 1000: []}
    parts = {k: {100: [], 1000: []} for k in kinds}
    for k, g in graphs.items():
        g.invoke({"messages": [lg.message(0)]}, lg.config("warm"))
    res = {k: {100: [], 1000: []} for k in kinds}
    for r in range(repeats):
        for end in range(100, 1001, 100):
            order = kinds if (r + end // 100) % 2 else kinds[::-1]
            for k in order:
                gc.collect()
                am["t"] = 0.0
                piece.clear()
                if k in clocks:
                    clocks[k].reset()
                cpu = time.process_time()
                graphs[k].invoke({"messages": [lg.message(end - 100)]}, lg.config(f"t{r}"))
                cpu = time.process_time() - cpu
                if end in (100, 1000):
                    res[k][end].append(cpu / 100 * 1000)
                    if k == "flowmem":
                        pieces[end].append({p: v / 100 * 1e6 for p, v in piece.items()})
                    parts[k][end].append(
                        (am["t"] / 100 * 1000, clocks[k].own / 100 * 1000 if k in clocks else 0.0)
                    )
    for k in kinds:
        a, b = min(res[k][100]), min(res[k][1000])
        print(
            f"{k:10s} at100 min {a:.3f} at1000 min {b:.3f} growth {b - a:.3f} ms/step; medians {sorted(res[k][100])[repeats // 2]:.3f} {sorted(res[k][1000])[repeats // 2]:.3f}"
        )
    for k in kinds:
        a100 = min(p[0] for p in parts[k][100])
        a1000 = min(p[0] for p in parts[k][1000])
        c100 = min(p[1] for p in parts[k][100])
        c1000 = min(p[1] for p in parts[k][1000])
        print(
            f"{k:10s} add_messages {a100:.3f} -> {a1000:.3f} (+{a1000 - a100:.3f}); saver calls {c100:.3f} -> {c1000:.3f} (+{c1000 - c100:.3f}); min"
        )
    for p in sorted(pieces[100][0]):
        a = min(x.get(p, 0) for x in pieces[100])
        b = min(x.get(p, 0) for x in pieces[1000])
        print(f"  flowmem {p:18s} {a:8.2f} -> {b:8.2f} us/step (+{b - a:.2f}) min")
    json.dump({"res": res, "parts": parts}, open("/tmp/langgraph-s60-lg5-parts.json", "w"))
finally:
    stack.close()
    with psycopg.connect(url, autocommit=True) as c:
        for db in dbs:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
