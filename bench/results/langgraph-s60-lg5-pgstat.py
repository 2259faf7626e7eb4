"""pg_stat_statements per step over the segment at 100 and at 1,000 of a flowmem thread (bench graph)."""

import importlib.util, os, sys, uuid, contextlib, json

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BENCH, "lib"))
spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lg)
import psycopg

url = sys.argv[1]
src = open(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "langgraph-s60-lg5-savers.py")
).read()
exec(src[src.index("stack = contextlib.ExitStack()") : src.index("try:\n    graphs")])


def snap(c, db):
    rows = c.execute(
        """select queryid, regexp_replace(query, $$\s+$$, $$ $$, $$g$$), calls, rows, shared_blks_hit, shared_blks_read, wal_bytes
                        from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = %s""",
        (db,),
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


try:
    saver = make("flowmem")
    db = dbs[-1]
    g = lg.build_graph(saver)
    g.invoke({"messages": [lg.message(0)]}, lg.config("warm"))
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("create extension if not exists pg_stat_statements")
        out = {}
        for end in range(100, 1001, 100):
            a = snap(c, db)
            g.invoke({"messages": [lg.message(end - 100)]}, lg.config("t"))
            b = snap(c, db)
            if end == int(os.environ.get("ANALYZE_AT", "0")):
                c.execute("ANALYZE")
                print("analyzed at", end)
            if end in (100, 600, 1000):
                per = {}
                for q, v in b.items():
                    o = a.get(q, (v[0], 0, 0, 0, 0, 0))
                    d = [(v[i] - o[i]) / 100 for i in range(1, 6)]
                    if d[0]:
                        per[v[0]] = d
                out[end] = per
        tot = {end: [sum(x[i] for x in out[end].values()) for i in range(5)] for end in out}
        print(
            "totals per step (calls, rows, shared hit, shared read, wal bytes):",
            {e: [round(x, 2) for x in t] for e, t in tot.items()},
        )
        for q in sorted(set(out[100]) | set(out[1000])):
            if max(out[100].get(q, [0, 0, 0])[2], out[1000].get(q, [0, 0, 0])[2]) > 2:
                print(
                    f"{str([round(x, 2) for x in out[100].get(q, [])][:3]):20s} {str([round(x, 2) for x in out[600].get(q, [])][:3]):20s} {str([round(x, 2) for x in out[1000].get(q, [])][:3]):20s} {q[:150]}"
                )
finally:
    stack.close()
    with psycopg.connect(url, autocommit=True) as c:
        for db in dbs:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
