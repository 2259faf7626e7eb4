"""LG6: instructions per segment from the callgrind dumps of langgraph-s61-lg6-parts.py run with LG6_MARK=1.

usage: python langgraph-s61-lg6-callgrind-read.py DUMP_DIR RESULT.json
A dump holds what ran since the dump before. ``--dump-before=*getppid*`` dumps twice at each mark,
entering ``os_getppid`` (the segment) and libc's ``getppid`` (nothing): the k-th ``os_getppid``
dump, in part order, is marks[k-1].
"""
import json
import os
import re
import sys

folder, result = sys.argv[1], sys.argv[2]
marks = json.load(open(result))["marks"]
found = {}
for name in os.listdir(folder):
    m = re.fullmatch(r"cg\.out\.(\d+)", name)
    if not m:
        continue
    text = open(os.path.join(folder, name)).read()
    if "Trigger: --dump-before=os_getppid" not in text:
        continue
    total = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    found[int(m.group(1))] = int(total.group(1)) if total else None
found = {k: found[part] for k, part in enumerate(sorted(found), start=1)}
rows = {}
for k, label in enumerate(marks, start=1):
    if label.startswith("before") or label.endswith("None0") or label.endswith("None1"):
        continue
    rows[label] = found.get(k)
for label, ir in rows.items():
    print(f"{label:22s} {ir / 100 if ir else float('nan'):14,.0f} instructions a step (whole process)")
def ratio(a, b):
    if rows.get(a) and rows.get(b):
        print(f"{a} ÷ {b}: {rows[a] / rows[b]:.4f} (+{(rows[a] - rows[b]) / 100:,.0f} a step)")
for prefix, n in (("graph", 0), ("replay", 0), ("replay", 1), ("replay+pass", 0), ("replay+pass", 1)):
    ratio(f"{prefix} L{n}", f"{prefix} N{n}")
    ratio(f"{prefix} L{n}", f"{prefix} M{n}")
    ratio(f"{prefix} P{n}", f"{prefix} N{n}")
