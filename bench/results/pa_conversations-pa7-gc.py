# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, time, os, tempfile, importlib.util, gc, collections
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
CONV = 5
TURNS = 9
tm = collections.defaultdict(float)
cnt = collections.Counter()
st = [0]
on = [False]


def cb(phase, info):
    if not on[0]:
        return
    if phase == "start":
        st[0] = time.thread_time()
    else:
        tm[info["generation"]] += time.thread_time() - st[0]
        cnt[info["generation"]] += 1


gc.callbacks.append(cb)


async def main():
    with tempfile.TemporaryDirectory() as d:
        fm = pab.Flowmem(Path(d))
        cids = [f"c{i}" for i in range(CONV)]
        for c in cids:
            await fm.fill(pab.history(100), c)
        for c in cids[:2]:
            await fm.turn(pab.turn(25), c)
        print("gc counts", gc.get_count(), "objects", len(gc.get_objects()))
        n = 0
        on[0] = True
        c0 = time.process_time()
        for t in range(TURNS):
            added = pab.turn(26 + t)
            for c in cids:
                await fm.turn(added, c)
                n += 1
        on[0] = False
        tot = time.process_time() - c0
        print("turn cpu mean ms", tot / n * 1e3)
        for g in sorted(cnt):
            print(
                "gen",
                g,
                "count/turn",
                cnt[g] / n,
                "ms/turn",
                tm[g] / n * 1e3,
                "us each",
                tm[g] / cnt[g] * 1e6,
            )


asyncio.run(main())
