import json, sys, statistics as st
for path in sys.argv[1:]:
    d=json.load(open(path)); A=d['append_s']; S=d['append_sched_ns']
    print(path)
    for name in ("flowmem service","agents SQLiteSession"):
        for n in sorted(A[name], key=int):
            out=[]
            for r,(t,s) in enumerate(zip(A[name][n],S[name][n])):
                cpu=sum(x[0] for x in s)/len(s)/1e6; wt=sum(x[1] for x in s)/len(s)/1e6; tot=sum(t)/len(t)*1e3
                out.append(f"{tot:.2f}={cpu:.2f}cpu+{wt:.2f}wait+{tot-cpu-wt:.2f}rest")
            print(f" {name[:8]} n={n:>6} "+"  ".join(out))
