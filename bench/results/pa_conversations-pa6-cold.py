"""The worker's statements in a save: wall vs the worker's CPU (thread_time), the kept copy made alongside (0170 seam on) or after (off)."""
import asyncio, importlib.util, logging, statistics as st, tempfile, threading, time, os, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("b", "/work/main/bench/pa_conversations.py")
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
logging.getLogger("flowmem.integrations.pydantic_ai").setLevel(logging.ERROR)
from flowmem.store.sqlite import _Connection
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore as S
execute = _Connection.execute
rec = []
caller = None
def counted(self, sql, *a):
    if threading.get_ident() == caller:
        return execute(self, sql, *a)
    w, c = time.perf_counter(), time.thread_time()
    try:
        return execute(self, sql, *a)
    finally:
        rec.append((sql, time.perf_counter() - w, time.thread_time() - c))
_Connection.execute = counted
async def go(alongside, turns=40):
    global caller
    caller = threading.get_ident()
    S.copies_while_writing = alongside
    out = {"first_wall": [], "first_cpu": [], "rest_wall": [], "rest_cpu": [], "stmts_wall": [], "stmts_cpu": [], "turn": []}
    with tempfile.TemporaryDirectory() as tmp:
        sysm = b.Flowmem(Path(tmp)); await sysm.fill(b.history(100)); await sysm.turn(b.turn(25))
        for i in range(turns):
            rec.clear()
            t = time.perf_counter()
            await sysm.turn(b.turn(26 + i))
            out["turn"].append(time.perf_counter() - t)
            body = [r for r in rec if r[0] not in ("COMMIT",) and not r[0].startswith("BEGIN")]
            out["first_wall"].append(body[0][1]); out["first_cpu"].append(body[0][2])
            out["rest_wall"].append(sum(r[1] for r in body[1:]) / (len(body) - 1)); out["rest_cpu"].append(sum(r[2] for r in body[1:]) / (len(body) - 1))
            out["stmts_wall"].append(sum(r[1] for r in body)); out["stmts_cpu"].append(sum(r[2] for r in body))
        sysm.close()
    return out
for rnd in range(3):
    for alongside in ((True, False) if rnd % 2 == 0 else (False, True)):
        o = asyncio.run(go(alongside))
        print(f"round {rnd} copy {'alongside' if alongside else 'after    '} load {os.getloadavg()[0]:.1f}: " + ", ".join(f"{k} {min(v)*1e6:.0f}/{st.median(v)*1e6:.0f}" for k, v in o.items()), flush=True)
# per statement, by its place in the save: wall / CPU medians, copy alongside
per = {}
async def one():
    global caller
    caller = threading.get_ident()
    S.copies_while_writing = True
    with tempfile.TemporaryDirectory() as tmp:
        sysm = b.Flowmem(Path(tmp)); await sysm.fill(b.history(100)); await sysm.turn(b.turn(25))
        for i in range(40):
            rec.clear()
            await sysm.turn(b.turn(26 + i))
            for j, (sql, w, c) in enumerate(rec):
                per.setdefault((j, " ".join(sql.split())[:60]), []).append((w, c))
        sysm.close()
asyncio.run(one())
for (j, sql), v in sorted(per.items()):
    print(f"{j:2} n={len(v):2} wall {st.median(x[0] for x in v)*1e6:6.0f} cpu {st.median(x[1] for x in v)*1e6:6.0f}  {sql}")
