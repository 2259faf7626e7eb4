# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, time, os, tempfile, statistics, importlib.util, gc
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from flowmem.integrations import copies

VARS = {"plain": (False, False), "dict": (True, False), "stores": (True, True)}


async def run(v):
    copies.Plan.compiled, copies.STORES = VARS[v]
    copies._PROGRAMS.clear()
    with tempfile.TemporaryDirectory() as d:
        fm = pab.Flowmem(Path(d))
        cids = [f"c{i}" for i in range(5)]
        for c in cids:
            await fm.fill(pab.history(100), c)
        for c in cids:
            await fm.turn(pab.turn(25), c)
        for c in cids:
            await fm.turn(pab.turn(25), c)
        cpu = []
        g0 = gc.get_stats()[0]["collections"]
        for t in range(9):
            for c in cids:
                c0 = time.process_time()
                await fm.turn(pab.turn(26 + t), c)
                cpu.append(time.process_time() - c0)
        g = (gc.get_stats()[0]["collections"] - g0) / 45
        fm.close()
        return statistics.median(cpu), min(cpu), g


async def main():
    res = {k: [] for k in VARS}
    order = list(VARS)
    for r in range(6):
        for v in order if r % 2 else order[::-1]:
            res[v].append(await run(v))
    for k, v in res.items():
        print(
            k,
            "median-of-medians %.0f" % (statistics.median(x[0] for x in v) * 1e6),
            "min %.0f" % (min(x[1] for x in v) * 1e6),
            "gen0/turn %.2f" % statistics.mean(x[2] for x in v),
        )


asyncio.run(main())
