"""A PostgreSQL append's server CPU by message kind (not a test; decision 0164).

The store's backends' CPU time (``perf stat -e task-clock``: this machine's VM counts
no instructions) per append of each kind: bench/pg_append_cpu.py gives the mean of
bench/store.py's conversation, and its statements' texts cut at 160 characters do not
tell a result's merged statement from a call's. Run trees in turns, take minimums. A throwaway
non-durable server; N buffers, each given bench/store.py's conversation a step at a time,
every buffer one step before the next step is counted (perf attached around the N
appends of one kind): a call, its result, the answer, a user turn healing an open call
(its placeholder, MEM-3), the late result replacing it, and a windowed buffer
(``max_messages=4``) evicting a message an append, its four kinds together. Runs the
flowmem importable (``PYTHONPATH`` a tree's ``src`` to count another); prints JSON.

    .venv/bin/python scripts/pg_call_ids_cpu.py [N]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))
import pgserver
import siblings


def main() -> None:
    """Count each kind's appends; print the backends' task-clock µs per append (JSON)."""
    import psycopg

    import flowmem
    from flowmem.core import prepare
    from flowmem.store import Address, open_store

    turn = siblings.load("store").turn
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    clock = iter(range(1_755_000_000, 1_756_000_000))
    found: dict[str, Any] = {"flowmem": os.path.dirname(flowmem.__file__), "appends": n}
    with (
        pgserver.throwaway_postgres(False) as (url, _),
        psycopg.connect(url, autocommit=True) as admin,
    ):
        store = open_store(url)

        def step(buffers: list[Address], message: dict[str, Any], window: int = 0) -> None:
            for address in buffers:
                store.append(address, prepare([message], next(clock)), max_messages=window)

        def counted(
            label: str, buffers: list[Address], messages: list[dict[str, Any]], window: int = 0
        ) -> None:
            pids = [
                str(r[0])
                for r in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                ).fetchall()
            ]
            with tempfile.NamedTemporaryFile("r", suffix=".csv") as out:
                perf = subprocess.Popen(
                    [
                        "perf",
                        "stat",
                        "-x,",
                        "-e",
                        "task-clock",
                        "-p",
                        ",".join(pids),
                        "-o",
                        out.name,
                    ]
                )
                time.sleep(0.5)
                for message in messages:
                    step(buffers, message, window)
                perf.send_signal(signal.SIGINT)
                perf.wait()
                values = {
                    line.split(",")[2]: float(line.split(",")[0])
                    for line in out.read().splitlines()
                    if line and not line.startswith("#") and line.split(",")[0][:1].isdigit()
                }
            appends = len(buffers) * len(messages)
            found[label] = values.get("task-clock", 0.0) * 1e3 / appends  # ms -> µs
            print(f"{label:28} {found[label]:8.1f} µs task-clock per append", file=sys.stderr)

        plain = [Address("session", f"p{i}", "chat") for i in range(n)]
        windowed = [Address("session", f"w{i}", "chat") for i in range(n)]
        for warm in range(8):  # prepared statements, known facts, every buffer's header
            step(plain[:1] + windowed[:1], turn(warm), 4)
        step(plain, turn(0))
        counted("call", plain, [turn(1)])
        counted("result", plain, [turn(2)])
        counted("answer", plain, [turn(3)])
        counted("user", plain, [turn(4)])
        step(plain, turn(5))  # a call left open
        counted("user healing (placeholder)", plain, [{"role": "user", "content": "next"}])
        counted("late result (replacing it)", plain, [turn(6)])
        for i in range(8):
            step(windowed, turn(i), 4)
        counted("windowed at 4, mean of 4", windowed, [turn(i) for i in range(8, 12)], 4)
        store.close()
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
