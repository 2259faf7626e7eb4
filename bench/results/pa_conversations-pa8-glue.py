# Decision 0220 (PA8): standalone cost of the glue's parts of a turn (min of 7 x N, µs a call).
import asyncio, importlib.util, tempfile, timeit, dataclasses, os
from pathlib import Path
spec = importlib.util.spec_from_file_location("pab", "/work/main/bench/pa_conversations.py")
pab = importlib.util.module_from_spec(spec); spec.loader.exec_module(pab)
from flowmem.integrations.pydantic_ai import store as st
from flowmem.integrations.pydantic_ai.writes import record_of, RECORD, check_entry_ids, conversation_write
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord

async def setup(d):
    fm = pab.Flowmem(Path(d))
    await fm.fill(pab.history(100), "c0")
    await fm.turn(pab.turn(25), "c0")
    return fm

def t(label, fn, n=2000):
    best = min(timeit.repeat(fn, number=n, repeat=7)) / n * 1e6
    print(f"{label:40s} {best:8.2f} µs")

with tempfile.TemporaryDirectory() as d:
    fm = asyncio.run(setup(d))
    s = fm.store
    stored = s.tables.get("c0")
    t("tables.get (pa_get)", lambda: s.tables.get("c0"))
    t("record_of", lambda: record_of(stored))
    rec = record_of(stored)
    t("RECORD.dump_python json", lambda: RECORD.dump_python(rec, mode="json"))
    t("_session", lambda: s._session("c0", "conversation read"))
    t("_claim", lambda: s._claim("c0", rec))
    t("ConversationRecord()", lambda: ConversationRecord(conversation_id="c0", head_id="x"))
    msgs = pab.turn(30)
    ents = []
    p = rec.head_id
    for m in msgs:
        ents.append(ConversationEntry(parent_id=p, message=m)); p = ents[-1].id
    t("check_entry_ids", lambda: check_entry_ids(rec, ents))
    t("conversation_write", lambda: conversation_write("c0", rec, ents, stored, []), 300)
    t("dataclasses.replace(rec)", lambda: dataclasses.replace(rec))
    fm.close()
