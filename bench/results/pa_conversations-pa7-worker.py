# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, time, os, tempfile, statistics, importlib.util, collections, functools, sqlite3
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from flowmem.store.conversations import lines, sql
from flowmem.integrations.pydantic_ai import store as st
from flowmem.store.sqlite import driver
import flowmem.core.append as ap

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


def execute(conn, q, *args):
    if not ON[0]:
        return sqlite3.Connection.execute(conn, q, *args)
    c = time.thread_time()
    try:
        return sqlite3.Connection.execute(conn, q, *args)
    finally:
        cur["execute" + (" COMMIT" if q.startswith("COMMIT") else "")] += time.thread_time() - c


driver._Connection.execute = execute
timed(st.FlowmemConversationStore, "_write_now", "_write_now")
timed(lines, "write_lines", "write_lines")
timed(lines, "prepared", "prepared")
timed(lines, "apply_append", "apply_append")
timed(lines, "_resolved", "_resolved")
timed(sql._SqlTx, "flush", "flush") if hasattr(sql, "_SqlTx") else None
res = collections.defaultdict(list)


async def main():
    with tempfile.TemporaryDirectory() as d:
        fm = pab.Flowmem(Path(d))
        cids = [f"c{i}" for i in range(5)]
        for c in cids:
            await fm.fill(pab.history(100), c)
        for c in cids:
            await fm.turn(pab.turn(25), c)
        for t in range(9):
            for c in cids:
                cur.clear()
                ON[0] = True
                await fm.turn(pab.turn(26 + t), c)
                ON[0] = False
                for k, v in cur.items():
                    res[k].append(v)
    for k, v in res.items():
        v.sort()
        print(f"{k:16s} n={len(v)} min {v[0] * 1e6:6.0f} med {statistics.median(v) * 1e6:6.0f}")


asyncio.run(main())
