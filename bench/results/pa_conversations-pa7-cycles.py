# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, time, os, tempfile, statistics, importlib.util, gc, collections
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)


async def main():
    with tempfile.TemporaryDirectory() as d:
        fm = pab.Flowmem(Path(d))
        cids = [f"c{i}" for i in range(5)]
        for c in cids:
            await fm.fill(pab.history(100), c)
        for c in cids:
            await fm.turn(pab.turn(25), c)
        for c in cids:
            await fm.turn(pab.turn(25), c)
        gc.collect()
        gc.disable()
        for t in range(4):
            for c in cids:
                await fm.turn(pab.turn(26 + t), c)
        gc.set_debug(gc.DEBUG_SAVEALL)
        n = gc.collect()
        print("unreachable after 20 turns:", n, "per turn", n / 20)
        kinds = collections.Counter(type(o).__name__ for o in gc.garbage)
        print(kinds.most_common(25))
        gc.set_debug(0)


asyncio.run(main())
