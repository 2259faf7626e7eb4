import re, json, sys, bisect, statistics as st
trace, writer, out = sys.argv[1:4]
d = json.load(open(out))
fdmap = {}
for fd, p in d["fds_after"].items():
    for sysname in ("flowmem", "agents"):
        if f"/{sysname}/" in p: fdmap[fd] = (sysname, p.rsplit("/",1)[-1])
# writer intervals
W = []
for line in open(writer):
    m = re.match(r"([\d.]+) fsync\(\d+\)\s+= 0 <([\d.]+)>", line)
    if m: W.append((float(m.group(1)), float(m.group(1)) + float(m.group(2))))
W.sort(); ws = [a for a, _ in W]
print("writer fsyncs", len(W), "span", W[-1][1]-W[0][0], "per s", len(W)/(W[-1][1]-W[0][0]), "mean fsync ms", 1e3*st.fmean(b-a for a,b in W))
# our calls, merging unfinished/resumed
pending = {}; calls = []
for line in open(trace):
    m = re.match(r"(\d+)\s+([\d.]+) (\w+)\((\d+)(.*)", line)
    if not m: 
        m2 = re.match(r"(\d+)\s+([\d.]+) <\.\.\. (\w+) resumed>.*<([\d.]+)>", line)
        if m2 and (m2.group(1), m2.group(3)) in pending:
            ts, fd = pending.pop((m2.group(1), m2.group(3)))
            calls.append((m2.group(3), fd, ts, float(m2.group(4))))
        continue
    pid, ts, call, fd, rest = m.groups()
    if "<unfinished" in rest: pending[(pid, call)] = (float(ts), fd); continue
    t = re.search(r"<([\d.]+)>\s*$", rest)
    if t: calls.append((call, fd, float(ts), float(t.group(1))))
mark0 = d["marks"][0][1]; mark1 = d["marks"][-1][1] + d["marks"][-1][2]
from collections import defaultdict
agg = defaultdict(list)
for call, fd, ts, dur in calls:
    if ts < mark0 or ts > mark1 or fd not in fdmap: continue
    s, f = fdmap[fd]; f = "wal" if f.endswith("-wal") else "shm" if f.endswith("-shm") else "db" if f.endswith(".db") else f
    # overlap with writer fsyncs
    i = bisect.bisect_left(ws, ts + dur)
    ov = sum(1 for a, b in W[max(0, i-50):i] if b > ts)
    agg[(s, f, call)].append((dur, ov))
n = len(d["times"]["flowmem"])
for k in sorted(agg):
    v = agg[k]; durs = sorted(x for x, _ in v)
    print(k, f"per append {len(v)/n:.2f}", f"p50 ms {1e3*st.median(durs):.3f} mean {1e3*st.fmean(durs):.3f} p90 {1e3*durs[int(len(durs)*.9)]:.3f}",
          f"ms/append {1e3*sum(durs)/n:.3f}", f"writer fsyncs overlapped mean {st.fmean(o for _, o in v):.2f} none {sum(o==0 for _,o in v)/len(v):.2f}")
for s, t in d["times"].items():
    print(s, "mean ms", 1e3*st.fmean(t), "p50", 1e3*st.median(t))
print("rate ratio", sum(d["times"]["agents"])/sum(d["times"]["flowmem"]))
