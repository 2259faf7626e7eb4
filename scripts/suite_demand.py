"""How many cores a command's process tree wants over time: its runnable threads, sampled (decision 0162).

    python scripts/suite_demand.py OUT.json -- COMMAND...

Runs COMMAND and every ``--period`` seconds (0.2) counts the threads in state ``R``
(running, or runnable and waiting for a CPU) of its process tree and of the
PostgreSQL servers it starts (a ``postmaster.pid`` under ``$TMPDIR/flowmem-pg-*``
whose postmaster carries this run's mark in its environment: ``pg_ctl`` daemonizes
them out of the tree). A thread wanting a core is runnable on a loaded machine as on
an idle one, so the count says what the run would use of an idle machine; the cores
it would leave idle are, per sample, the cores less the runnable threads (none when
more want one). Writes the histogram, the per-sample series and the idle
core-seconds for 2 and 3 cores to OUT.json; prints a summary line to stderr; exits
with COMMAND's status.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

MARK = "FLOWMEM_SUITE_DEMAND"


def _tree_states() -> dict[int, tuple[int, str]]:
    """Every process's (parent, state), read from /proc."""
    found: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                text = stat.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        found[int(entry)] = (int(fields[1]), fields[0])
    return found


def _runnable_threads(pid: int) -> int:
    count = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat", encoding="utf-8", errors="replace") as stat:
                text = stat.read()
            count += text[text.rfind(")") + 2] == "R"
    except OSError:  # the process ended meanwhile
        pass
    return count


def _postmasters(roots: list[str], before: set[str], mark: str) -> set[int]:
    found: set[int] = set()
    for root in roots:
        for directory in glob.glob(os.path.join(root, "flowmem-pg-*")):
            if directory in before:
                continue
            try:
                with open(os.path.join(directory, "data", "postmaster.pid"), encoding="utf-8") as pidfile:
                    pid = int(pidfile.readline())
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    if mark.encode() in environ.read():
                        found.add(pid)
            except (OSError, ValueError):
                continue
    return found


def idle_core_seconds(histogram: dict[int, int], cores: int, seconds_per_sample: float) -> float:
    """The core-seconds left idle on ``cores`` cores by samples of ``k`` runnable threads."""
    return sum(max(0, cores - k) * n for k, n in histogram.items()) * seconds_per_sample


def main(argv: list[str] | None = None) -> int:
    """Run the command, sample its demand, write the JSON; the command's exit status."""
    parser = argparse.ArgumentParser(
        usage="%(prog)s OUT.json [--period S] -- COMMAND...",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out", help="the JSON file to write")
    parser.add_argument("--period", type=float, default=0.2, help="seconds between samples")
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no command after --")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    roots = sorted({tempfile.gettempdir(), "/dev/shm/flowmem-tests", "/tmp"})
    before = {d for root in roots for d in glob.glob(os.path.join(root, "flowmem-pg-*"))}
    mark = f"{MARK}={os.getpid()}"
    process = subprocess.Popen(command, env={**os.environ, MARK: str(os.getpid())})
    histogram: collections.Counter[int] = collections.Counter()
    series: list[tuple[float, int]] = []
    servers: set[int] = set()
    start = time.monotonic()
    while process.poll() is None:
        time.sleep(args.period)
        if len(series) % 10 == 0:
            servers |= _postmasters(roots, before, mark)
        states = _tree_states()
        children: dict[int, list[int]] = collections.defaultdict(list)
        for pid, (parent, _) in states.items():
            children[parent].append(pid)
        stack = [pid for pid in {process.pid, *servers} if pid in states]
        runnable = 0
        while stack:
            pid = stack.pop()
            runnable += _runnable_threads(pid)
            stack.extend(children.get(pid, ()))
        histogram[runnable] += 1
        series.append((round(time.monotonic() - start, 2), runnable))
    wall = time.monotonic() - start
    per_sample = wall / max(1, len(series))
    result = {
        "command": command,
        "wall_s": wall,
        "period_s": args.period,
        "samples": len(series),
        "histogram": dict(sorted(histogram.items())),
        "idle_core_s": {str(c): idle_core_seconds(histogram, c, per_sample) for c in (2, 3)},
        "series": series,
        "exit": process.returncode,
    }
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(result, out)
    mean = sum(k * n for k, n in histogram.items()) / max(1, len(series))
    print(
        f"demand: {wall:.0f} s, {len(series)} samples, mean runnable {mean:.2f},"
        f" idle core-seconds on 2 cores {result['idle_core_s']['2']:.0f}, on 3 {result['idle_core_s']['3']:.0f}",
        file=sys.stderr,
    )
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
