import json, sys, random, statistics as st
OURS="flowmem service"; PEER="agents SQLiteSession"
random.seed(1)
for path in sys.argv[1:]:
    d=json.load(open(path)); A=d['append_s']
    print(path, d.get('load'), d.get('disk_writer',{}) and d['disk_writer'].get('label'))
    for n in sorted(A[OURS], key=int):
        for r,(o,p) in enumerate(zip(A[OURS][n],A[PEER][n])):
            k=len(o)
            ratio=sum(p)/sum(o)
            med=st.median(p)/st.median(o)
            # tail share: top 5% of appends' share of total time
            def share(x,f=0.05):
                s=sorted(x,reverse=True); m=max(1,int(len(x)*f)); return sum(s[:m])/sum(x)
            # bootstrap paired by round index
            bs=[]
            for _ in range(2000):
                idx=[random.randrange(k) for _ in range(k)]
                bs.append(sum(p[i] for i in idx)/sum(o[i] for i in idx))
            bs.sort()
            lo,hi=bs[50],bs[1949]
            pbelow=sum(b<1.3 for b in bs)/len(bs)
            # trimmed: drop each system's top 5 appends
            tr=(sum(sorted(p)[:-5])/(k-5))/(sum(sorted(o)[:-5])/(k-5))
            print(f" n={n:>6} run{r+1} rate {ratio:.2f} p50 {med:.2f} mean ms {1000*sum(o)/k:.2f}/{1000*sum(p)/k:.2f}"
                  f" top5%share {share(o):.2f}/{share(p):.2f} boot95 [{lo:.2f},{hi:.2f}] P(<1.3) {pbelow:.2f} trim5 {tr:.2f}")

