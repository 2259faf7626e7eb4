"""The default call with room made in the WAL against the plain WAL, the two alone (not a test).

docs/performance.md, 2026-12-07 (morning): ``bench/store.py --big`` puts the plain WAL's
p50 at 1.4–1.8× the room-made one's at 10,000 and 100,000 rows though neither log
changes size there. This fills two fresh files (``bench/store.py``'s ``FlowmemService``,
room made and ``plain_wal``) with LENGTH messages, prints the WAL files' extents
(``filefrag``) and sizes in frames, then appends APPENDS rounds, the two in turns (the
order swapped each round), sleeping GAP seconds between rounds (a slow round of the
bench's other systems), and prints each one's p50 and mean.

    .venv/bin/python scripts/wal_plain_alone.py LENGTH GAP [APPENDS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))
import siblings


def main() -> None:
    """Fill, show the logs' extents, append in turns, print the p50s."""
    store = siblings.load("store")
    length, gap = int(sys.argv[1]), float(sys.argv[2])
    appends = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    folder = Path(tempfile.mkdtemp(prefix="flowmem-plain-alone-"))
    systems = {}
    for name, plain in (("room made", False), ("plain WAL", True)):
        (folder / name).mkdir()
        url = f"sqlite:///{folder / name / 'x.db'}"
        systems[name] = store.FlowmemService(name, url, (length,), asked=False, plain_wal=plain)
        systems[name].fill("b", length)

    def extents(name: str) -> str:
        wal = folder / name / "x.db-wal"
        found = subprocess.run(["filefrag", str(wal)], capture_output=True, text=True, check=False).stdout
        return f"{found.strip().split(': ')[-1]}, {wal.stat().st_size // 4120} frames"

    print({name: extents(name) for name in systems})
    times: dict[str, list[float]] = {name: [] for name in systems}
    for i in range(length, length + appends):
        order = list(systems) if i % 2 == 0 else list(reversed(list(systems)))
        for name in order:
            started = time.perf_counter()
            systems[name].append("b", i)
            times[name].append(time.perf_counter() - started)
        if gap:
            time.sleep(gap)
    for name, found in times.items():
        print(f"{name}: p50 {statistics.median(found) * 1e3:.3f} ms, mean {statistics.fmean(found) * 1e3:.3f} ms")
    for system in systems.values():
        system.close()


if __name__ == "__main__":
    main()
