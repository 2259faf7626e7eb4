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

``--syscalls`` (decision 0169) also traces every write, read, lock and stat of each
system's files during the counted appends (not the fill) and prints, per system and
file (the database, ``-wal``, ``-shm``, flowmem's ``-writers``), the calls and bytes
per append and the time in each: the WAL's frames apart from the room's zeros, the
checkpoints' copies into the database and their fsyncs. Counts, which the load does
not move; the times under strace are only relative.

``--flush-sizes N`` measures the disk alone, no database: ``N`` rounds of one
``fdatasync`` after rewriting 1, 2, 3, 4 and 8 frames' bytes in place in a file
already on disk (the sizes interleaved, the order rotated), beside the writer when
``--disk-writer`` is given: whether a commit of fewer pages flushes sooner.

    .venv/bin/python scripts/wal_room_fsyncs.py --length 100 --appends 300 [--disk-writer 256] [--syscalls]
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
from collections import Counter, defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
SYSTEMS = ("room made", "plain WAL", "agents SQLiteSession")
TRACED = "fdatasync,openat"
ALL_CALLS = "fdatasync,fsync,openat,pwrite64,pread64,ftruncate,fcntl,newfstatat,statx,getppid"


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
    os.getppid()  # the counted appends start here (``--syscalls`` reads the trace from it)
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


def _flush_sizes(rounds: int, folder: Path, writer_mib: int) -> None:
    """Print the fdatasync times after rewriting k frames in place, k interleaved (``--flush-sizes``)."""
    sys.path.insert(0, str(BENCH / "lib"))
    import siblings

    store = siblings.load("store")
    frames = (1, 2, 3, 4, 8)
    path = folder / "frames.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.pwrite(fd, bytes(4 << 20), 0)
    os.fsync(fd)
    writer = store.DiskWriter(folder, writer_mib) if writer_mib else None
    times: dict[int, list[float]] = {k: [] for k in frames}
    offset = 0
    try:
        for i in range(rounds):
            for k in frames[i % len(frames) :] + frames[: i % len(frames)]:
                data = os.urandom(4120 * k)  # a frame: 24 bytes of header and a 4 KiB page
                os.pwrite(fd, data, offset % (3 << 20))
                offset += len(data)
                started = time.perf_counter()
                os.fdatasync(fd)
                times[k].append(time.perf_counter() - started)
    finally:
        os.close(fd)
        if writer is not None:
            print(f"disk writer: {writer.stop()['label']}")
    print(f"fdatasync after rewriting k frames in place, {rounds} rounds interleaved")
    print("| frames | bytes | p50 ms | mean | p90 |")
    print("|---:|---:|---:|---:|---:|")
    for k, found in times.items():
        found.sort()
        print(
            f"| {k} | {4120 * k:,} | {statistics.median(found) * 1e3:.3f} | "
            f"{statistics.fmean(found) * 1e3:.3f} | {found[int(len(found) * 0.9)] * 1e3:.3f} |"
        )


_CALL = re.compile(r"(\d+)\s+(\w+)\((.*)\)\s+= (-?\d+)(?: \w+ \(.*?\))? <([\d.]+)>")


def _file_of(path: str, folders: dict[str, str]) -> tuple[str, str] | None:
    """(system, file) of a path inside a system's folder: ``db``, ``-wal``, ``-shm``, ``-writers``."""
    for name, folder in folders.items():
        if path.startswith(folder + "/"):
            base = path.rsplit("/", 1)[-1]
            return name, ("db" if "-" not in base else "-" + base.rsplit("-", 1)[-1])
    return None


def _syscalls(trace: str, folders: dict[str, str]) -> dict[tuple[str, str, str], list[float]]:
    """Per (system, file, call): [calls, bytes, seconds] after the child's ``getppid`` mark.

    A write of more than a frame to ``-wal`` is the room's zeros (SQLite writes a frame's
    header and its page apart), counted as ``pwrite64 (room)``.
    """
    fds: dict[tuple[str, str], tuple[str, str]] = {}
    found: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0])
    started = False
    for line in Path(trace).read_text().splitlines():
        got = _CALL.match(line)
        if not got:
            continue
        pid, call, args, ret, took = got.groups()
        if call == "getppid":
            started = True
            continue
        if call == "openat":
            path = re.search(r'"([^"]+)"', args)
            owner = _file_of(path.group(1), folders) if path else None
            if owner is not None and int(ret) >= 0:
                fds[(pid, ret)] = owner
            continue
        if not started:
            continue
        if call in ("newfstatat", "statx"):
            path = re.search(r'"([^"]+)"', args)
            owner = _file_of(path.group(1), folders) if path else None
        else:
            owner = fds.get((pid, args.split(",", 1)[0]))
        if owner is None:
            continue
        size = max(int(ret), 0) if call in ("pwrite64", "pread64") else 0
        if call == "pwrite64" and owner[1] == "-wal" and size > 65536 + 24:
            call = "pwrite64 (room)"
        entry = found[(owner[0], owner[1], call)]
        entry[0] += 1
        entry[1] += size
        entry[2] += float(took)
    return found


def _print_syscalls(found: dict[tuple[str, str, str], list[float]], appends: int) -> None:
    """The table of ``--syscalls``: per system, file and call, per counted append."""
    print("\nsystem calls per append, by file (strace -f -T; the fill not counted)\n")
    print("| system | file | call | per append | KiB per append | ms per append |")
    print("|---|---|---|---:|---:|---:|")
    totals: Counter[str] = Counter()
    for (name, file, call), (count, size, took) in sorted(found.items()):
        totals[name] += count
        print(
            f"| {name} | {file} | {call} | {count / appends:.2f} | "
            f"{size / appends / 1024:.2f} | {took * 1e3 / appends:.3f} |"
        )
    for name, count in totals.items():
        print(f"- {name}: {count / appends:.1f} calls on its files per append")
    print("(one newfstatat of each -wal per append is this script's own size check)")


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
    parser.add_argument(
        "--syscalls", action="store_true", help="also every call on each system's files"
    )
    parser.add_argument(
        "--flush-sizes", type=int, default=0, metavar="N", help="the disk alone: N rounds"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flush_sizes:
        folder = Path(tempfile.mkdtemp(prefix="flowmem-flush-", dir=args.dir))
        try:
            _flush_sizes(args.flush_sizes, folder, args.disk_writer)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return 0
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
            [
                "strace",
                "-f",
                "-T",
                "-e",
                f"trace={ALL_CALLS if args.syscalls else TRACED}",
                "-o",
                str(trace),
                *command,
            ],
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
        if args.syscalls:
            folders = {row[1]: row[2].rsplit("/", 1)[0] for row in rows}
            _print_syscalls(_syscalls(str(trace), folders), args.appends)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
