"""What a compaction costs (issue 28 §2; decision 0083).

Run with ``PYTHONPATH=src python bench/compaction.py [--database URL] [--rows N]``
(not part of the tests). Each run fills one buffer of a fresh SQLite file (or
clears the buffer of ``--database``) with ``--rows`` rows of tool turns, then
times, in one process: the plan (read, parse, count: outside any lock), the
compaction to 8,000 tokens with a summarizer that returns at once (plan and
apply), the median of 30 appends after it, and reads with and without the
archive. Three runs; JSON on stdout with each run and the median and min of each
measure, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flowmem.service import MemoryService
from flowmem.store import Address, open_store

ADDRESS = Address("user", "bench", "chat")


def _turn(i: int) -> list[dict[str, Any]]:
    cid = f"c{i}"
    call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"question {i} " * 8},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": "result " * 6},
        {"role": "assistant", "content": f"answer {i} " * 5},
    ]


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def run(url: str, rows: int) -> dict[str, Any]:
    """One run: fill, plan, compact, append, read."""
    store = open_store(url)
    try:
        store.clear(ADDRESS)
        service = MemoryService(store)
        history = [row for i in range(rows // 4) for row in _turn(i)]
        for at in range(0, len(history), 500):
            service.append_raw(*ADDRESS, history[at : at + 500])
        start = time.perf_counter()
        service.compaction_plan_raw(*ADDRESS, 8000)
        found: dict[str, Any] = {"plan_ms": _ms(start)}
        start = time.perf_counter()
        done = service.compact_raw(*ADDRESS, keep_tokens=8000, summarize=lambda r: "summary")
        found.update(compact_ms=_ms(start), archived=done.archived)
        appends = []
        for i in range(30):
            start = time.perf_counter()
            service.append_raw(*ADDRESS, _turn(rows + i))
            appends.append(time.perf_counter() - start)
        found["append_after_ms"] = round(statistics.median(appends) * 1000, 2)
        start = time.perf_counter()
        service.load_raw(*ADDRESS, include_archived=True)
        found["load_archived_ms"] = _ms(start)
        start = time.perf_counter()
        service.load_raw(*ADDRESS)
        found["load_live_ms"] = _ms(start)
        return found
    finally:
        store.close()


def main(argv: list[str]) -> None:
    """Parse the options, run three times, print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="a database URL (default: a fresh SQLite file per run)")
    parser.add_argument("--rows", type=int, default=10_000)
    options = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for n in range(3):
            url = options.database or f"sqlite:///{Path(folder) / f'bench{n}.db'}"
            runs.append(run(url, options.rows))
    keys = [k for k in runs[0] if k.endswith("_ms")]
    summary = {k: {"median": statistics.median(r[k] for r in runs), "min": min(r[k] for r in runs)} for k in keys}
    print(json.dumps({"runs": runs, "summary": summary}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
