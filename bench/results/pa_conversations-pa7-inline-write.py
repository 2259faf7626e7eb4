# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
"""Measurement only: the save's statements run on the event loop (deferred: committed at NORMAL),
its fsync in a thread before the save returns (the HTTP pool's path, decision 0029), against the
current worker path. Never in src/."""

import asyncio, sys, time, os, tempfile, statistics, importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from flowmem.integrations.pydantic_ai import store as st
from flowmem.store.locks import WouldBlock

S = st.FlowmemConversationStore
orig = S._write


async def inline_write(self, write, expected_revision, guard, named, alongside=None, held=None):
    cid = write.record.conversation_id
    store = self.memory.store
    if self._queues.busy(cid):
        return await orig(self, write, expected_revision, guard, named, alongside, held)
    try:
        with store.deferred():
            after = self._write_now(write, expected_revision, guard, named, held)
    except WouldBlock:
        FALLBACK[0] += 1
        return await orig(self, write, expected_revision, guard, named, alongside, held)
    except st.ConversationConflict:
        self._known.remember(cid, None)
        raise
    SYNCS[0] += 1 if store.sync_barrier() is not None else 0
    fut = (
        asyncio.get_running_loop().run_in_executor(None, store.sync)
        if store.sync_barrier() is not None
        else None
    )
    made = None if alongside is None else alongside()
    if fut is not None:
        await fut
    self._known.remember(cid, write.record)
    return made, after


SYNCS = [0]
FALLBACK = [0]


async def run(inline):
    S._write = inline_write if inline else orig
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
        wall = []
        for t in range(9):
            for c in cids:
                w0 = time.perf_counter()
                c0 = time.process_time()
                await fm.turn(pab.turn(26 + t), c)
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
        fm.close()
        return statistics.median(cpu), min(cpu), statistics.median(wall)


async def main():
    res = {False: [], True: []}
    for r in range(int(os.environ.get("ROUNDS", "6"))):
        for v in (False, True) if r % 2 else (True, False):
            res[v].append(await run(v))
    for k, v in res.items():
        print(
            "inline" if k else "worker",
            "cpu median-of-medians %.0f" % (statistics.median(x[0] for x in v) * 1e6),
            "min %.0f" % (min(x[1] for x in v) * 1e6),
            "wall med %.0f" % (statistics.median(x[2] for x in v) * 1e6),
            [round(x[0] * 1e6) for x in v],
        )


if __name__ == "__main__":
    asyncio.run(main())
    print("syncs", SYNCS, "fallbacks", FALLBACK)
