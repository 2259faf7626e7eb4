# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
import asyncio, sys, os, tempfile, importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
V = os.environ.get("VARIANT", "worker")
if V == "inline":
    sys.argv = ["x"]
    import runpy

    ns = runpy.run_path(
        str(Path(__file__).resolve().parent / "pa_conversations-pa7-inline-write.py")
    )
    from flowmem.integrations.pydantic_ai import store as st

    st.FlowmemConversationStore._write = ns["inline_write"]
N = int(os.environ.get("TURNS", "20"))


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
        for t in range(N // 5):
            for c in cids:
                await fm.turn(pab.turn(26 + t), c)
        fm.close()


asyncio.run(main())
