import json, sys, statistics as st, random
OURS="flowmem service"; PEER="agents SQLiteSession"
random.seed(3)
def boot(o,p,B=400):
    k=len(o); bs=[]
    for _ in range(B):
        idx=[random.randrange(k) for _ in range(k)]
        bs.append(sum(p[i] for i in idx)/sum(o[i] for i in idx))
    return st.stdev(bs)
for path in sys.argv[1:]:
    d=json.load(open(path)); A=d['append_s']; F=d['plan'].get('files',1)
    print(path, "files", F)
    for n in sorted(A[OURS], key=int):
        for r,(o,p) in enumerate(zip(A[OURS][n],A[PEER][n])):
            per=[sum(p[f::F])/sum(o[f::F]) for f in range(F)]
            bse=st.fmean(boot(o[f::F],p[f::F]) for f in range(F))
            pooled_bse=boot(o,p)
            # halves in time within the run: first 100 rounds vs last 100
            h=len(o)//2
            print(f" n={n:>6} run{r+1} per-file {' '.join(f'{x:.2f}' for x in per)} sd {st.stdev(per) if F>1 else 0:.3f} | boot se one file {bse:.3f}, pooled {pooled_bse:.3f} | halves {sum(p[:h])/sum(o[:h]):.2f} {sum(p[h:])/sum(o[h:]):.2f}")

# each file index j across the runs is what a one-file bench would have given in this sitting
# (its 200 appends, interleaved with the others'): its minimum of the runs against the pooled one
for path in sys.argv[1:]:
    d=json.load(open(path)); A=d['append_s']; F=d['plan'].get('files',1)
    if F == 1: continue
    print(path, "min of the runs: pooled (files=%d) vs each file alone (files=1)" % F)
    for n in sorted(A[OURS], key=int):
        runs=list(zip(A[OURS][n],A[PEER][n]))
        pooled=min(sum(p)/sum(o) for o,p in runs)
        single=[min(sum(p[f::F])/sum(o[f::F]) for o,p in runs) for f in range(F)]
        pp50=min(st.median(p)/st.median(o) for o,p in runs)
        sp50=[min(st.median(p[f::F])/st.median(o[f::F]) for o,p in runs) for f in range(F)]
        print(f" n={n:>6} rate: pooled {pooled:.2f}, one file {' '.join(f'{x:.2f}' for x in single)} | p50: pooled {pp50:.2f}, one file {' '.join(f'{x:.2f}' for x in sp50)}")
