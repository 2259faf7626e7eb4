# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
from pathlib import Path
import timeit, importlib.util

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from pydantic_ai.messages import ModelMessagesTypeAdapter as A
from pydantic_core import to_json
from flowmem.integrations.pydantic_ai import dumps

msgs = pab.turn(30)


def per():
    return [dumps.message_dumps(m) for m in msgs]


def batched():
    ds = A.dump_python(msgs, mode="json")
    fulls = [to_json(d) for d in ds]
    leans = [to_json(dumps._without_none(d)) for d in ds]
    again = A.validate_json(b"[" + b",".join(leans) + b"]")
    back = A.dump_python(again, mode="json")
    return [
        (d, l.decode(), a)
        for d, f, l, a, b in zip(ds, fulls, leans, again, back)
        if to_json(b) == f
    ]


assert len(batched()) == 4
for f in (per, batched, per, batched):
    print(f.__name__, min(timeit.repeat(f, number=300, repeat=7)) / 300 * 1e6)
