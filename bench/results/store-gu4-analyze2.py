import json, sys, statistics as st
OURS="flowmem service"; PEER="agents SQLiteSession"
for path in sys.argv[1:]:
    d=json.load(open(path)); A=d['append_s']; G=d['wal_size_changed_at']
    print(path)
    for n in sorted(A[OURS], key=int):
        for r,(o,p) in enumerate(zip(A[OURS][n],A[PEER][n])):
            go=G.get(OURS,{}).get(n,[[]]*3)[r]; gp=G.get(PEER,{}).get(n,[[]]*3)[r]
            so=sum(o[i] for i in go)/sum(o); sp=sum(p[i] for i in gp)/sum(p)
            blocks=[sum(p[i:i+50])/sum(o[i:i+50]) for i in range(0,200,50)]
            first20=sum(p[20:])/sum(o[20:])
            c=st.correlation(o,p)
            # without grew appends of both
            ex=set(go)
            rx=sum(p[i] for i in range(200) if i not in ex)/sum(o[i] for i in range(200) if i not in ex)
            print(f" n={n:>6} run{r+1} rate {sum(p)/sum(o):.2f} grew {len(go)}/{len(gp)} share {so:.3f}/{sp:.3f} w/o grew {rx:.2f} w/o first20 {first20:.2f} blocks {' '.join(f'{b:.2f}' for b in blocks)} corr {c:.2f}")
