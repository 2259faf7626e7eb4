# Decision 0220 (PA8): measurement script, run with /work/main/.venv/bin/python and PYTHONPATH=<a tree's src>.
import timeit, json, importlib.util
spec = importlib.util.spec_from_file_location("pab", "/work/main/bench/pa_conversations.py")
pab = importlib.util.module_from_spec(spec); spec.loader.exec_module(pab)
from flowmem.integrations.pydantic_ai.rows import entries_from, entry_rows
from flowmem.integrations.pydantic_ai.writes import _new_entry
from flowmem.store.editor import load_row
from pydantic_ai.conversation_store import ConversationEntry
msgs = pab.history(120)
ids = [f"id-{i}" for i in range(120)]
def t(label, fn, n=500):
    best = min(timeit.repeat(fn, number=n, repeat=7)) / n * 1e6
    print(f"{label:40s} {best:8.2f} µs")
t("entries_from 120", lambda: entries_from(ids, msgs))
e = ConversationEntry(parent_id="p", message=pab.turn(3)[1])
ne = _new_entry(e, [])
import flowmem.store.rows as r
print(type(ne.rows[0]))
body = json.dumps(ne.rows[0])
print(len(body))
t("load_row(body) assistant", lambda: load_row(body), 5000)
