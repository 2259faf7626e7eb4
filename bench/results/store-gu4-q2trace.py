"""Interleaved single appends of flowmem's default call and SQLiteSession on fresh files; fd map + per-append marks."""
import os, sys, time, json
from pathlib import Path
sys.path.insert(0, "/work/main/bench/lib")
import siblings
store = siblings.load("store")
length, appends, folder = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
systems = []
for name in ("flowmem", "agents"):
    where = folder / name; where.mkdir(parents=True)
    s = store.AgentsSession(where / "agents.db", (length,)) if name == "agents" else store.FlowmemService("flowmem service", store.sqlite_at(where), (length,), asked=False)
    s.fill("b", length); systems.append((name, s))
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try: fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError: pass
times = {n: [] for n, _ in systems}
marks = []
for i in range(appends):
    turn = i % 2
    for name, s in systems[turn:] + systems[:turn]:
        t0 = time.time(); p0 = time.perf_counter()
        s.append("b", length + i)
        d = time.perf_counter() - p0
        times[name].append(d); marks.append((name, t0, d))
fds2 = {}
for fd in os.listdir("/proc/self/fd"):
    try: fds2[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError: pass
json.dump({"fds": fds, "fds_after": fds2, "times": times, "marks": marks}, open(folder / "out.json", "w"))
for n, s in systems: s.close()
