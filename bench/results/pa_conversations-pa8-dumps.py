# Decision 0220 (PA8): measurement script, run with /work/main/.venv/bin/python and PYTHONPATH=<a tree's src>.
import timeit, importlib.util
spec = importlib.util.spec_from_file_location("pab", "/work/main/bench/pa_conversations.py")
pab = importlib.util.module_from_spec(spec); spec.loader.exec_module(pab)
from flowmem.integrations.pydantic_ai.dumps import message_dumps, _without_none, _read_back, _ADAPTER
from pydantic_core import to_json
msgs = pab.turn(30)
def t(label, fn, n=2000):
    best = min(timeit.repeat(fn, number=n, repeat=7)) / n * 1e6
    print(f"{label:40s} {best:8.2f} µs")
t("message_dumps x4", lambda: [message_dumps(m) for m in msgs])
dumped=[_ADAPTER.dump_python([m], mode="json")[0] for m in msgs]
t("dump_python x4", lambda: [_ADAPTER.dump_python([m], mode="json")[0] for m in msgs])
t("to_json full x4", lambda: [to_json(d) for d in dumped])
t("without_none x4", lambda: [_without_none(d) for d in dumped])
lean=[to_json(_without_none(d)) for d in dumped]; full=[to_json(d) for d in dumped]
print([l==f for l,f in zip(lean,full)])
t("validate_json x4", lambda: [_ADAPTER.validate_json(b"["+l+b"]") for l in lean])
again=[_ADAPTER.validate_json(b"["+l+b"]") for l in lean]
t("dump again + to_json x4", lambda: [to_json(_ADAPTER.dump_python(a, mode="json")[0]) for a in again])
t("dump_json again x4", lambda: [_ADAPTER.dump_json(a) for a in again])
print(all(_ADAPTER.dump_json(a)[1:-1]==f for a,f in zip(again,full)))
t("validate_json all4 joined", lambda: _ADAPTER.validate_json(b"["+b",".join(lean)+b"]"))
