# Decision 0220 (PA8): Python calls a pydantic-ai turn at 100 messages, caller and worker (cProfile).
# Run from a tree's root: PYTHONPATH=<src> python prof.py [OUT.prof]
import asyncio, cProfile, importlib.util, os, pstats, sys, tempfile, time
from pathlib import Path

BENCH = os.environ.get("BENCH", "/work/main/bench/pa_conversations.py")
spec = importlib.util.spec_from_file_location("pab", BENCH)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from flowmem.integrations.pydantic_ai import store as st
import flowmem
print("flowmem from", flowmem.__file__)

PROF = {'w': cProfile.Profile()}
orig = st.FlowmemConversationStore._write_now


def profiled(self, *a, **k):
    w = PROF['w']
    w.enable()
    try:
        return orig(self, *a, **k)
    finally:
        w.disable()


PROFILE_WORKER = os.environ.get("WORKER", "1") == "1"
if PROFILE_WORKER:
    st.FlowmemConversationStore._write_now = profiled
N = int(os.environ.get("ROUNDS", "9"))


async def main():
    caller = cProfile.Profile()
    with tempfile.TemporaryDirectory() as d:
        fm = pab.Flowmem(Path(d))
        cids = [f"c{i}" for i in range(5)]
        for c in cids:
            await fm.fill(pab.history(100), c)
        for w in (25, 26):
            for c in cids:
                await fm.turn(pab.turn(w), c)
        PROF['w'] = cProfile.Profile()
        turns = 0
        cpu = []
        for t in range(N):
            for c in cids:
                added = pab.turn(27 + t)
                caller.enable()
                await fm.turn(added, c)
                caller.disable()
                turns += 1
        fm.close()
    return caller, turns


caller, turns = asyncio.run(main())
for name, prof in (("caller", caller), ("worker", PROF["w"])):
    s = pstats.Stats(prof)
    total = sum(v[1] for v in s.stats.values())  # ncalls incl. recursive
    prim = sum(v[0] for v in s.stats.values())
    print(f"== {name}: {total / turns:.1f} calls a turn ({prim / turns:.1f} primitive), {turns} turns")
    if len(sys.argv) > 1:
        prof.dump_stats(f"{sys.argv[1]}.{name}")
