"""LG6: the four flatness ratios and ÷ PostgresSaver at 100 of bench/langgraph.py JSON files, with per-run beside ratios."""
import json
import sys

for path in sys.argv[1:]:
    d = json.load(open(path))
    print(path.split("/")[-1], "|", d.get("load"), "|", d.get("date"), "|", d.get("commit"))
    for x in d["targets"]:
        name = x["label"]
        if "PostgreSQL" in name and x.get("number") is not None and ("flat" in name or "PostgresSaver per step at 100" in name):
            print(f"  {x['number']:.2f}  {name}")
    fp = d["savers"]["FlowmemSaver PostgreSQL"]["lengths"]
    beside = fp["1000"].get("calls_cpu_beside_ratio_per_run")
    print("  beside per run", [round(x, 2) for x in beside], "calls µs/step at 100", [round(x * 1e6) for x in fp["100"]["calls_cpu_s"]], "at 1000", [round(x * 1e6) for x in fp["1000"]["calls_cpu_s"]])
