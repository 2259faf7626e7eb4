# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, time, os, tempfile, statistics, importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from flowmem.integrations.pydantic_ai import FlowmemConversationStore as S
from flowmem.integrations import copies


async def run(flag):
    S.copies_while_writing = flag
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
        for t in range(9):
            for c in cids:
                c0 = time.process_time()
                await fm.turn(pab.turn(26 + t), c)
                cpu.append(time.process_time() - c0)
        fm.close()
        return statistics.median(cpu), min(cpu)


async def main():
    res = {True: [], False: []}
    for r in range(6):
        for flag in (True, False) if r % 2 else (False, True):
            res[flag].append(await run(flag))
    for k, v in res.items():
        print(
            k,
            "median-of-medians %.0f" % (statistics.median(x[0] for x in v) * 1e6),
            "min %.0f" % (min(x[1] for x in v) * 1e6),
        )


asyncio.run(main())
