# Decision 0220 (PA8): Plan.copy's instance copy, state filled by update (plain) vs __dict__ set to a copy of the kept state.
import timeit, gc, importlib.util, pickle
spec = importlib.util.spec_from_file_location("pab", "/work/main/bench/pa_conversations.py")
pab = importlib.util.module_from_spec(spec); spec.loader.exec_module(pab)
from flowmem.integrations import copies
copies.SETS_STATE = False  # both variants patched into the plain path's copier
from pydantic_ai.messages import ModelMessagesTypeAdapter as A
msgs = A.validate_json(A.dump_json(pab.history(120)))
plan = copies.planned(msgs)
_new = object.__new__
def _copy_instance2(node):
    made = _new(node[1])
    state = node[2].copy()
    for key, inner in node[3]:
        state[key] = inner[0](inner)
    made.__dict__ = state
    return made
import sys
def run(fn):
    copies._copy_instance = fn
    # rebuild plan so node[0] points to the chosen function
    p = copies.planned(msgs)
    return min(timeit.repeat(p.copy, number=300, repeat=7)) / 300 * 1e6
orig = copies._copy_instance
for i in range(8):
    print("plain %.1f µs   dictset %.1f µs" % (run(orig), run(_copy_instance2)))
copies._copy_instance = _copy_instance2
p = copies.planned(msgs); c = p.copy()
print("equal", c == msgs, c == pickle.loads(pickle.dumps(msgs)))
def tracked(objs):
    gc.collect(); before = len(gc.get_objects()); x = objs(); after = len(gc.get_objects()); return after - before
copies._copy_instance = orig; p0 = copies.planned(msgs)
copies._copy_instance = _copy_instance2; p1 = copies.planned(msgs)
print("tracked new objects: plain", tracked(p0.copy), "dictset", tracked(p1.copy))
