import importlib.util, os, sys, uuid, re

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BENCH, "lib"))
spec = importlib.util.spec_from_file_location("lgbench", os.path.join(BENCH, "langgraph.py"))
lg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lg)
import psycopg
from flowmem.store.postgres.checkpoints import STATEMENTS

url = sys.argv[1]
upto = int(sys.argv[2])
db = f"lg5z_{uuid.uuid4().hex[:8]}"
with psycopg.connect(url, autocommit=True) as c:
    c.execute(f"CREATE DATABASE {db}")
durl = lg.database_url(url, db)
from flowmem.integrations.langgraph.saver import FlowmemSaver

text = STATEMENTS["cp_known+guard+line+head"]
n = 0


def sub(m):
    global n
    n += 1
    return f"${n}"


ptext = re.sub(r"%s", sub, text)
print(ptext)
try:
    with FlowmemSaver.from_conn_string(durl) as saver:
        g = lg.build_graph(saver)
        with psycopg.connect(durl, autocommit=True) as c:
            for end in range(100, upto + 1, 100):
                g.invoke({"messages": [lg.message(end - 100)]}, lg.config("t"))
                if end == int(os.environ.get("ANALYZE_AT", "0")):
                    c.execute("ANALYZE")
                    print("analyzed at", end)
                if end in (100, 200, 500, upto):
                    h = c.execute(
                        "select id, count, last_major, bytes from buffers where key = 'langgraph'"
                    ).fetchone()
                    latest = c.execute(
                        "SELECT checkpoint_id FROM lg_checkpoints WHERE thread_id = 't' ORDER BY checkpoint_id DESC LIMIT 1"
                    ).fetchone()[0]
                    params = [*h, h[0], h[2], "t", "", latest]
                    c.execute("BEGIN")
                    c.execute("SELECT set_config('flowmem.cp_guard', 'true', true)")
                    c.execute(f"PREPARE v AS {ptext}")
                    for mode in ("force_custom_plan", "force_generic_plan"):
                        c.execute(f"SET LOCAL plan_cache_mode = {mode}")
                        rows = (
                            psycopg.ClientCursor(c)
                            .execute(
                                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE v("
                                + ", ".join(["%s"] * len(params))
                                + ")",
                                params,
                            )
                            .fetchall()
                        )
                        hits = re.findall(
                            r"shared hit=(\d+)", rows[0][0] + "".join(r[0] for r in rows[:3])
                        )
                        print(
                            end,
                            mode,
                            "top buffers:",
                            [r[0] for r in rows if "Buffers" in r[0]][:1],
                            "| scans:",
                            [r[0].strip()[:60] for r in rows if "Scan" in r[0] or "Filter" in r[0]],
                        )
                    c.execute("ROLLBACK")
                    c.execute("DEALLOCATE v")
finally:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
