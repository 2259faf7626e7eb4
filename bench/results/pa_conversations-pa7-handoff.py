# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
from pathlib import Path
import asyncio, time
from flowmem.integrations.in_order import InOrder


async def main():
    q = InOrder()
    for _ in range(50):
        await q.queued("x", lambda: None)
    best = []
    for r in range(5):
        c = time.process_time()
        for _ in range(500):
            await q.queued("x", lambda: None)
        best.append((time.process_time() - c) / 500 * 1e6)
    print("handoff cpu us", min(best), best)
    best = []
    for r in range(5):
        c = time.process_time()
        for _ in range(500):
            await asyncio.sleep(0)
        best.append((time.process_time() - c) / 500 * 1e6)
    print("sleep0 us", min(best))


asyncio.run(main())
