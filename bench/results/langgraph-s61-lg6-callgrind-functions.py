"""LG6: self instructions by function, replay L1 − M1 and L1 − N1, a step (÷ 100).

usage: for f in 65 69 67; do callgrind_annotate --inclusive=no --threshold=100 /tmp/lg6cg/cg.out.$f \
  | grep -E "^ *[0-9,]+ " | sed 's/([^)]*)//' | awk '{gsub(",","",$1); c=$1; $1=""; print c"\t"$0}' > /tmp/lg6cg/fn.$f.txt; done
       python langgraph-s61-lg6-callgrind-functions.py /tmp/lg6cg/fn.65.txt /tmp/lg6cg/fn.69.txt /tmp/lg6cg/fn.67.txt
(parts 65 / 69 / 67 are replay L1 / M1 / N1: the os_getppid dumps in order, langgraph-s61-lg6-callgrind-read.py)
"""
import sys


def load(path):
    found = {}
    for line in open(path):
        count, name = line.rstrip("\n").split("\t", 1)
        name = name.strip().split(" [")[0].split("/")[-1]
        found[name] = found.get(name, 0) + int(count)
    return found


L, M, N = (load(p) for p in sys.argv[1:4])
skip = ("TOTALS", "main", "pythonrun", "EvalCode", "???")
print("L-M a step   L-N a step   function")
for name in sorted(set(L) | set(M) | set(N), key=lambda k: -abs(L.get(k, 0) - M.get(k, 0)))[:45]:
    if any(s in name for s in skip):
        continue
    print(f"{(L.get(name, 0) - M.get(name, 0)) / 100:10.0f} {(L.get(name, 0) - N.get(name, 0)) / 100:12.0f}   {name[:90]}")
