# Decision 0220 (PA8): per-run figures of a --srcs JSON: flowmem's and the peers' median turn CPU (ms), the per-run ratios.
import json, statistics, sys
d = json.load(open(sys.argv[1]))
for length in ("100", "1000"):
    for code, data in d["codes"].items():
        for i, rnd in enumerate(data["rounds"], 1):
            L = rnd["lengths"][length]
            cpu = [r["flowmem"]["turn_cpu"] * 1e3 for r in L["runs"]]
            fcpu = [r["json_file"]["turn_cpu"] * 1e3 for r in L["runs"]]
            lcpu = [r["flowmem"]["load_cpu"] * 1e3 for r in L["runs"]]
            rf = L["ratios"]["turn_vs_json_file"]["per_run"]
            rr = L["ratios"]["turn_vs_json_sqlite_row"]["per_run"]
            print(f"{length:>5} {code:6} round {i} load {rnd.get('load_at_start','?')}: flowmem turn CPU "
                  + " / ".join(f"{x:.2f}" for x in cpu) + " ms, load CPU " + " / ".join(f"{x:.2f}" for x in lcpu)
                  + "; file's turn CPU " + " / ".join(f"{x:.2f}" for x in fcpu)
                  + "; ÷file " + " / ".join(f"{x:.2f}" for x in rf) + ", ÷row " + " / ".join(f"{x:.2f}" for x in rr))
    for code, data in d["codes"].items():
        allcpu = [r["flowmem"]["turn_cpu"] for rnd in data["rounds"] for r in rnd["lengths"][length]["runs"]]
        print(f"{length:>5} {code}: min of the runs' median turn CPU {min(allcpu)*1e3:.3f} ms, median {statistics.median(allcpu)*1e3:.3f}")
