"""How long each SQLite commit's fdatasync takes with room made ahead in the WAL and without (not a test).

Decision 0154: three systems on fresh files, filled with ``--length`` messages, then
``--appends`` single appends interleaved one by one, the order rotated each round:
flowmem's default call (``MemoryService.append``, room made ahead in its WAL), the same
on a store that makes none (``wal_room.enabled = False``: flowmem before 0154), and the
Agents SDK's ``SQLiteSession`` (WAL + ``synchronous=FULL``, as ``bench/store.py`` sets
it). The script runs itself under ``strace -f -T`` and reads back the time of every
``fdatasync`` of each system's WAL, which the machine's CPU load moves far less than
an append's wall time. It prints, per system, the appends/s and p50 of the run, the
commits that changed the WAL file's size, and the fdatasyncs' p50, mean and p90.
``--disk-writer MIB``: another process rewrites a file of that size beside the
databases, 1 MiB per fsynced write (``bench/store.py``'s).

    .venv/bin/python scripts/wal_room_fsyncs.py --length 100 --appends 300 [--disk-writer 256]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
SYSTEMS = ("room made", "plain WAL", "agents SQLiteSession")


def _measure(length: int, appends: int, folder: Path, writer_mib: int) -> None:
    """The child under strace: fill, append interleaved, print each system's WAL path and figures."""
    sys.path.insert(0, str(BENCH / "lib"))
    import siblings

    store = siblings.load("store")
    systems = []
    for name in SYSTEMS:
        where = folder / name.replace(" ", "-")
        where.mkdir()
        if name == "agents SQLiteSession":
            system = store.AgentsSession(where / "agents.db", (length,))
        else:
            system = store.FlowmemService(
                "flowmem service", store.sqlite_at(where), (length,), asked=False
            )
            system.store.wal_room.enabled = name == "room made"
        system.fill("b", length)
        systems.append((name, system))
    writer = store.DiskWriter(folder, writer_mib) if writer_mib else None
    times: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    changed = dict.fromkeys(SYSTEMS, 0)
    sizes = {name: os.path.getsize(system.wal()) for name, system in systems}
    try:
        for i in range(appends):
            turn = i % len(systems)
            for name, system in systems[turn:] + systems[:turn]:
                started = time.perf_counter()
                system.append("b", length + i)
                times[name].append(time.perf_counter() - started)
                size = os.path.getsize(system.wal())
                changed[name] += size != sizes[name]
                sizes[name] = size
    finally:
        if writer is not None:
            print(f"disk writer: {writer.stop()['label']}")
    for name, system in systems:
        found = times[name]
        print(
            f"RESULT\t{name}\t{system.wal()}\t{len(found) / sum(found):.0f}\t"
            f"{statistics.median(found) * 1e3:.3f}\t{changed[name]}\t{len(found)}"
        )
        system.close()


def _fdatasyncs(trace: str, wals: dict[str, str]) -> dict[str, list[float]]:
    """Each system's fdatasync times (ms) from ``strace -f -T`` output, by the WAL each descriptor opened."""
    opened: dict[tuple[str, str], str] = {}
    found: dict[str, list[float]] = {name: [] for name in wals}
    by_path = {path: name for name, path in wals.items()}
    for line in Path(trace).read_text().splitlines():
        got = re.match(r'(\d+)\s+openat\(AT_FDCWD, "([^"]+)", O_RDWR.*\) = (\d+)', line)
        if got and got.group(2) in by_path:
            opened[(got.group(1), got.group(3))] = by_path[got.group(2)]
            continue
        got = re.match(r"(\d+)\s+fdatasync\((\d+)\)\s+= 0 <([\d.]+)>", line)
        if got and (got.group(1), got.group(2)) in opened:
            found[opened[(got.group(1), got.group(2))]].append(float(got.group(3)) * 1e3)
    return found


def main() -> int:
    """Run the measure under strace and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--length", type=int, default=100, help="messages filled before the appends"
    )
    parser.add_argument("--appends", type=int, default=300, help="single appends per system")
    parser.add_argument("--disk-writer", type=int, default=0, metavar="MIB")
    parser.add_argument(
        "--dir", default=None, help="where the fresh files are made (default: $TMPDIR)"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _measure(args.length, args.appends, Path(args.child), args.disk_writer)
        return 0
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed")
    folder = Path(tempfile.mkdtemp(prefix="flowmem-walroom-", dir=args.dir))
    trace = folder / "strace.txt"
    try:
        command = [
            sys.executable,
            __file__,
            "--length",
            str(args.length),
            "--appends",
            str(args.appends),
        ]
        command += ["--disk-writer", str(args.disk_writer), "--child", str(folder)]
        done = subprocess.run(
            ["strace", "-f", "-T", "-e", "trace=fdatasync,openat", "-o", str(trace), *command],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line.split("\t") for line in done.stdout.splitlines() if line.startswith("RESULT")]
        print(
            "".join(
                line + "\n" for line in done.stdout.splitlines() if line.startswith("disk writer")
            ),
            end="",
        )
        syncs = _fdatasyncs(str(trace), {row[1]: row[2] for row in rows})
        print(
            f"{args.length:,} rows, {args.appends} single appends each, interleaved (strace -f -T)"
        )
        print("| system | appends/s | p50 ms | WAL size changed | fdatasync p50 ms | mean | p90 |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for _, name, _, rate, p50, changed, count in rows:
            found = sorted(syncs[name])
            p90 = found[int(len(found) * 0.9)] if found else float("nan")
            print(
                f"| {name} | {rate} | {p50} | {changed} of {count} | {statistics.median(found):.3f} | "
                f"{statistics.mean(found):.3f} | {p90:.3f} |"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
