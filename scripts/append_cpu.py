"""Thread CPU of one SQLite append, layer by layer (not a test).

On a file at ``synchronous=NORMAL`` (no flush: the CPU an append costs, not its
disk), filled with 100 of ``bench/store.py``'s messages: ``MemoryService.append``
as a user calls it (session scope), ``SqliteStore.append`` of a prepared row, the
append's rules and statements inside one ``BEGIN IMMEDIATE`` … ``COMMIT`` on a
pooled connection (``_append_in``), and the locks and loan around a write with an
empty transaction. Each is timed with ``time.thread_time`` over blocks of appends,
in turns; the minimum block is printed (other processes' load moves it least).

    .venv/bin/python scripts/append_cpu.py [APPENDS]
"""

# ruff: noqa: SLF001 (it times the store's layers one by one)
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))
import siblings

from flowmem.core import prepare
from flowmem.store.sqlbase import AppendAsk


def main() -> None:
    """Print the thread CPU per append of each layer."""
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1200
    store = siblings.load("store")
    length, blocks = 100, 6
    folder = Path(tempfile.mkdtemp(prefix="flowmem-cpu-"))
    (folder / "service").mkdir()
    (folder / "store").mkdir()
    service = store.FlowmemService(
        "flowmem service",
        f"sqlite:///{folder}/service/x.db?synchronous=NORMAL",
        (length,),
        asked=False,
    )
    tuned = store.Flowmem(
        "flowmem SqliteStore", f"sqlite:///{folder}/store/x.db?synchronous=NORMAL", (length,)
    )
    service.fill("b", length)
    tuned.fill("b", length)
    address = tuned.address("b")
    rows = [prepare(store.turn(i), 1)[0] for i in range(length, length + 4 * total)]
    sqlite = tuned.store

    def inside(i: int) -> None:
        with sqlite._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            sqlite._append_in(
                conn, AppendAsk(address, [rows[i - length]], 0, 5.0, False, None, 0, None)
            )
            conn.execute("COMMIT")

    def empty(_: int) -> None:
        with (
            sqlite._locks.hold(address, 5.0),
            sqlite._commits.commit(),
            sqlite._queue.hold(5.0),
            sqlite._connection() as conn,
        ):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("COMMIT")

    calls: dict[str, Callable[[int], object]] = {
        "MemoryService.append": lambda i: service.append("b", i),
        "SqliteStore.append": lambda i: sqlite.append(address, [rows[i - length]]),
        "inside the transaction (_append_in)": inside,
        "locks and loan, empty transaction": empty,
    }
    found: dict[str, list[float]] = {name: [] for name in calls}
    i = length
    for _ in range(blocks):
        for name, call in calls.items():
            started = time.thread_time()
            for k in range(total // blocks):
                call(i + k)
            found[name].append((time.thread_time() - started) / (total // blocks))
        i += total // blocks
    for name, times in found.items():
        print(
            f"{name:38s} min {min(times) * 1e6:6.1f} µs, median {statistics.median(times) * 1e6:6.1f} µs"
        )
    service.close()
    tuned.close()


if __name__ == "__main__":
    main()
