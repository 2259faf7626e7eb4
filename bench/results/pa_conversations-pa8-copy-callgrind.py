# Decision 0220 (PA8): instructions of Plan.copy at 120 pydantic-ai messages (VARIANT plain|state|storeattr, N copies).
import os, importlib.util
spec = importlib.util.spec_from_file_location("pab", "/work/main/bench/pa_conversations.py")
pab = importlib.util.module_from_spec(spec); spec.loader.exec_module(pab)
from flowmem.integrations import copies
from pydantic_ai.messages import ModelMessagesTypeAdapter as A
_new = object.__new__
def _storeattr(node):
    made = _new(node[1])
    state = node[2].copy()
    for key, inner in node[3]:
        state[key] = inner[0](inner)
    made.__dict__ = state
    return made
v = os.environ["VARIANT"]
copies.SETS_STATE = v != "plain"
if v == "storeattr":
    copies._copy_instance_state = _storeattr
msgs = A.validate_json(A.dump_json(pab.history(120)))
p = copies.planned(msgs)
for _ in range(int(os.environ["N"])):
    p.copy()
