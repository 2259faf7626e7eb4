# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, time, os, tempfile, statistics, importlib.util, collections, functools, gc
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from flowmem.integrations.pydantic_ai import store as st

S = st.FlowmemConversationStore
cur = collections.defaultdict(float)
ON = [False]


def timed(owner, name, label):
    f = getattr(owner, name)

    @functools.wraps(f)
    def w(*a, **k):
        if not ON[0]:
            return f(*a, **k)
        c = time.thread_time()
        try:
            return f(*a, **k)
        finally:
            cur[label] += time.thread_time() - c

    setattr(owner, name, w)


timed(S, "_write_now", "worker")
timed(S, "_stored", "load._stored")
timed(st, "conversation_write", "save.conversation_write")
timed(S, "_made", "save.made")
gst = [0]


def cb(phase, info):
    if not ON[0]:
        return
    if phase == "start":
        gst[0] = time.thread_time()
    else:
        cur["gc"] += time.thread_time() - gst[0]


gc.callbacks.append(cb)
res = collections.defaultdict(list)


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
        for t in range(9):
            for c in cids:
                cur.clear()
                ON[0] = True
                p0 = time.process_time()
                t0 = time.thread_time()
                conv = await fm.store.load(c)
                t1 = time.thread_time()
                conv.messages.extend(pab.turn(26 + t))
                t2 = time.thread_time()
                await fm.store.save(conv)
                t3 = time.thread_time()
                p1 = time.process_time()
                ON[0] = False
                cur["caller.load"] = t1 - t0
                cur["caller.save"] = t3 - t2
                cur["process"] = p1 - p0
                for k, v in cur.items():
                    res[k].append(v)
    for k, v in res.items():
        v.sort()
        print(f"{k:24s} min {v[0] * 1e6:6.0f} med {statistics.median(v) * 1e6:6.0f}")


asyncio.run(main())
