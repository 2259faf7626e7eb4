# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
from pathlib import Path
import timeit, importlib.util, gc, sys

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from pydantic_ai.messages import ModelMessagesTypeAdapter as A
from flowmem.integrations import copies

msgs = A.validate_json(A.dump_json(pab.history(100)))
copies.STORES = True
pb = copies.planned(msgs)
copies._PROGRAMS.clear()
copies.STORES = False
pa = copies.planned(msgs)
copies.Plan.compiled = False
pp = copies.planned(msgs)
copies.Plan.compiled = True


def plain():
    copies.Plan.compiled = False
    try:
        return pp.copy()
    finally:
        copies.Plan.compiled = True


for r in range(4):
    for name, f in (("plain", plain), ("dict", pa.copy), ("stores", pb.copy)):
        print(name, round(min(timeit.repeat(f, number=200, repeat=9)) / 200 * 1e6, 1), end="  ")
    print()
