"""The kept copy's share of a flowmem turn at 100 messages: Plan.copy's CPU (thread_time) per turn against the turn's CPU."""
import asyncio, importlib.util, logging, tempfile, time, statistics as st, os
from pathlib import Path
spec = importlib.util.spec_from_file_location("b", "/work/main/bench/pa_conversations.py")
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
logging.getLogger("flowmem.integrations.pydantic_ai").setLevel(logging.ERROR)
from flowmem.integrations import copies
real = copies.Plan.copy
spent = []
def timed(self):
    c = time.thread_time()
    try:
        return real(self)
    finally:
        spent.append(time.thread_time() - c)
copies.Plan.copy = timed
async def go():
    out = {"copy": [], "turn_cpu": [], "copies": []}
    with tempfile.TemporaryDirectory() as tmp:
        s = b.Flowmem(Path(tmp)); await s.fill(b.history(100)); await s.turn(b.turn(25)); await s.turn(b.turn(26))
        for i in range(40):
            spent.clear(); c = time.process_time()
            await s.turn(b.turn(27 + i))
            out["turn_cpu"].append(time.process_time() - c); out["copy"].append(sum(spent)); out["copies"].append(len(spent))
        s.close()
    return out
for r in range(3):
    o = asyncio.run(go())
    print(f"load {os.getloadavg()[0]:.1f}: " + ", ".join(f"{k} {min(v)*1e6 if k != 'copies' else min(v):.0f}/{st.median(v)*1e6 if k != 'copies' else st.median(v):.0f}" for k, v in o.items()))
