"""Scatter of per-run ratios: 1x9 vs 5x9, per sitting; and within 5x9 runs, each conversation's 9 turns alone."""
import json, statistics, sys, glob, re
med = statistics.median
def sp(v): return f"{min(v):.2f}/{med(v):.2f}/{max(v):.2f}"
files = sorted(glob.glob("/tmp/pa6/s*_c*.json"))
by = {}
for f in files:
    s, c = map(int, re.findall(r"s(\d+)_c(\d+)", f)[0])
    by[(s, c)] = json.load(open(f))
labels = ("turn_vs_json_file", "turn_vs_json_sqlite_row", "load_vs_validate_json", "turn_cpu_vs_json_file")
for length in ("100", "1000"):
    print(f"== {length} messages: per-run ratios min/median/max, sitting by sitting")
    for c in (1, 5):
        for label in labels:
            cells = [sp(by[(s, c)]["lengths"][length]["ratios"][label]["per_run"]) for s in sorted({s for s, cc in by if cc == c}) if length in by[(s, c)]["lengths"]]
            allr = [x for s in sorted({s for s, cc in by if cc == c}) for x in by[(s, c)]["lengths"][length]["ratios"][label]["per_run"]]
            mins = [min(by[(s, c)]["lengths"][length]["ratios"][label]["per_run"]) for s in sorted({s for s, cc in by if cc == c})]
            print(f"  {c}x9 {label:26} " + "; ".join(cells) + f"   | all runs {sp(allr)} sd {statistics.pstdev(allr):.3f} | sittings' min-of-3 {sp(mins)}")
    # within 5x9 runs: each conversation's 9 turns alone (what a 1x9 run would have given on these turns)
    print(f"  within 5x9 runs: ratio of each conversation's 9-turn medians (turn vs file, vs row) against the run's 45-turn ratio")
    sub_f, sub_r, full_f, full_r = [], [], [], []
    for (s, c), d in sorted(by.items()):
        if c != 5: continue
        for samples in d["lengths"][length]["samples"]:
            fm, jf, jr = (samples[n]["turn"] for n in ("flowmem", "json_file", "json_sqlite_row"))
            full_f.append(med(jf) / med(fm)); full_r.append(med(jr) / med(fm))
            for k in range(5):
                sub_f.append(med(jf[k::5]) / med(fm[k::5])); sub_r.append(med(jr[k::5]) / med(fm[k::5]))
    print(f"    9-turn (one conversation) vs file {sp(sub_f)} sd {statistics.pstdev(sub_f):.3f} (n={len(sub_f)}); 45-turn {sp(full_f)} sd {statistics.pstdev(full_f):.3f} (n={len(full_f)})")
    print(f"    9-turn (one conversation) vs row  {sp(sub_r)} sd {statistics.pstdev(sub_r):.3f}; 45-turn {sp(full_r)} sd {statistics.pstdev(full_r):.3f}")
    # hiccups: turns over 2x their run's median, per system
    for c in (1, 5):
        slow = {}
        for (s, cc), d in by.items():
            if cc != c: continue
            for samples in d["lengths"][length].get("samples") or []:
                for n, k in samples.items():
                    t = k["turn"]; mid = med(t)
                    a = slow.setdefault(n, [0, 0]); a[0] += sum(x > 2 * mid for x in t); a[1] += len(t)
        if slow: print(f"  {c}x9 turns over 2x their run's median: " + ", ".join(f"{n} {a[0]}/{a[1]}" for n, a in slow.items()))
