# Decision 0214 (session 60, PA7): measurement script, run from the repository root with .venv/bin/python.
from pathlib import Path
import timeit, importlib.util, sys

spec = importlib.util.spec_from_file_location(
    "pab", str(Path(__file__).resolve().parents[1] / "pa_conversations.py")
)
pab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pab)
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.usage import RunUsage
from flowmem.integrations.pydantic_ai import writes, dumps, rows

msgs = pab.turn(30)
ents = []
p = "x"
for m in msgs:
    e = ConversationEntry(parent_id=p, message=m)
    ents.append(e)
    p = e.id
rec = ConversationRecord(
    conversation_id="c",
    head_id=p,
    usage=RunUsage(input_tokens=1000, output_tokens=300, requests=50),
)


def t(label, f, n=300):
    best = min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6
    print(f"{label:40s} {best:8.1f} us")


t("conversation_write", lambda: writes.conversation_write("c", rec, ents, None, []))
t("message_dumps x4", lambda: [dumps.message_dumps(m) for m in msgs])
t("dump_python only x4", lambda: [dumps._ADAPTER.dump_python([m], mode="json") for m in msgs])
d = [dumps.message_dumps(m) for m in msgs]
t("entry_rows x4", lambda: [rows.entry_rows(e, x[0]) for e, x in zip(ents, d)])
t("RECORD.dump_python", lambda: writes.RECORD.dump_python(rec, mode="json"))
t("micros", lambda: writes.micros(rec.updated_at))
for m, x in zip(msgs, d):
    print(type(m).__name__, x[2] is not None, len(x[1]))
