# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, time, os, tempfile, statistics, importlib.util, collections, sqlite3, threading
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from flowmem.store.sqlite import driver

T = collections.defaultdict(list)
ON = [False]
order = []


def execute(conn, sql, *args):
    if not ON[0]:
        return sqlite3.Connection.execute(conn, sql, *args)
    c = time.thread_time()
    try:
        return sqlite3.Connection.execute(conn, sql, *args)
    finally:
        k = (threading.current_thread().name[:6], " ".join(sql.split())[:110])
        T[k].append(time.thread_time() - c)
        if k not in order:
            order.append(k)


driver._Connection.execute = execute


async def main():
    with tempfile.TemporaryDirectory() as d:
        fm = pab.Flowmem(Path(d))
        cids = [f"c{i}" for i in range(5)]
        for c in cids:
            await fm.fill(pab.history(100), c)
        for c in cids:
            await fm.turn(pab.turn(25), c)
        ON[0] = True
        n = 0
        for t in range(9):
            for c in cids:
                await fm.turn(pab.turn(26 + t), c)
                n += 1
        ON[0] = False
        tot = 0
        for k in order:
            v = sorted(T[k])
            tot += sum(v) / n
            print(
                f"{len(v) / n:4.1f} {v[0] * 1e6:6.0f} {statistics.median(v) * 1e6:6.0f}  {k[0]} {k[1]}"
            )
        print("total stmt cpu per turn us", tot * 1e6)


asyncio.run(main())
