"""Each test's CPU, in its pytest process and in the processes it reaped, per worker (decision 0162).

A pytest plugin: ``FLOWMEM_SUITE_CPU=PREFIX pytest -p tests.suite_cpu ...`` writes
``PREFIX.<worker>.json`` per process (``main`` without xdist): the process's CPU at the
start, after collection and at the end, and per test (node id, own CPU, reaped
children's CPU, wall, and when it started: seconds since the epoch). A child's CPU counts when it is reaped, so a server a
module-scoped fixture stops counts in the test that ends the module; processes that
are not the test process's children (PostgreSQL's daemonized servers) never count in a
test: tests/conftest.py notes each throwaway server's CPU (its postmaster and backends)
when it stops, under ``postgres``.
With ``FLOWMEM_SUITE_CPU_DESCENDANTS=1`` each row also holds the CPU every descendant of
the test process spent during the test, wherever it was reaped: a fork server's children
(tests/forking.py, tests/integrations/forkserver.py, …) are reaped by the server, whose
CPU reaches the test process only when the server itself is reaped, in whichever test
stops it. Read from ``/proc`` before and after each test (outside the test's own CPU).
``python -m tests.suite_cpu PREFIX`` prints the totals, per directory and per file, and
when each worker ran its last test (the run's tail: a worker done early leaves its core to
the others, or idle; decision 0179).
"""

from __future__ import annotations

import collections
import glob
import json
import os
import resource
import sys
import time
from collections.abc import Generator
from typing import Any

import pytest

ENV = "FLOWMEM_SUITE_CPU"
DESCENDANTS = "FLOWMEM_SUITE_CPU_DESCENDANTS"
_state: dict[str, Any] = {"rows": [], "postgres": {}}


def note_postgres(server: str, seconds: float) -> None:
    """Note the CPU of a throwaway PostgreSQL server this process started (tests/conftest.py)."""
    _state["postgres"][server] = seconds


def _cpu() -> tuple[float, float]:
    mine = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime, reaped.ru_utime + reaped.ru_stime


def _stat(pid: str) -> tuple[int, float] | None:
    """A process's parent and CPU: its own and its waited-for children's (``/proc``), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def descendants_cpu(root: int | None = None) -> float:
    """The CPU of the live descendants of ``root`` (this process), each with what it reaped."""
    root = os.getpid() if root is None else root
    found: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)) is not None:
            found[int(entry)] = stat
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, (parent, _) in found.items():
        children[parent].append(pid)
    total, todo = 0.0, list(children[root])
    while todo:
        pid = todo.pop()
        total += found[pid][1]
        todo += children[pid]
    return total


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note the process's CPU before collection."""
    _state["start"] = _cpu()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note the process's CPU after collection."""
    _state["collected"] = _cpu()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    """Note a test's CPU (setup, call and teardown), its reaped children's and its wall time."""
    traced = bool(os.environ.get(DESCENDANTS))
    alive = descendants_cpu() if traced else 0.0
    before, wall, started = _cpu(), time.monotonic(), time.time()
    yield
    after = _cpu()
    row: tuple[Any, ...] = (
        item.nodeid,
        after[0] - before[0],
        after[1] - before[1],
        time.monotonic() - wall,
        started,
    )
    if traced:  # what the reaped children took plus what the live descendants' totals grew by
        row += (after[1] - before[1] + descendants_cpu() - alive,)
    _state["rows"].append(row)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write ``$FLOWMEM_SUITE_CPU.<worker>.json`` when the variable is set."""
    prefix = os.environ.get(ENV)
    if not prefix:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{prefix}.{worker}.json", "w", encoding="utf-8") as out:
        json.dump({**_state, "end": _cpu()}, out)


def report(prefix: str, files: int = 30) -> str:
    """The totals of the JSON files of ``prefix``, per directory and for the costliest files."""
    rows: list[list[Any]] = []
    ends: dict[str, float] = {}  # each worker's last test's end (rows noting their start)
    collection = total = postgres = 0.0
    for name in sorted(glob.glob(f"{prefix}.*.json")):
        with open(name, encoding="utf-8") as found:
            one = json.load(found)
        if "rows" not in one:  # another tool's JSON beside (scripts/suite_demand.py's OUT.json)
            continue
        rows += one["rows"]
        timed = [row for row in one["rows"] if len(row) > 4]
        if timed:
            ends[name[len(prefix) + 1 : -len(".json")]] = max(row[4] + row[3] for row in timed)
        if name.endswith(
            ".main.json"
        ):  # the run's first process: its reaped children are the workers
            total = sum(one["end"])
        elif not os.path.exists(f"{prefix}.main.json"):
            total += sum(one["end"])
        if one.get("collected"):
            collection += sum(one["collected"]) - sum(one["start"])
        postgres += sum(one.get("postgres", {}).values())
    own, reaped = sum(r[1] for r in rows), sum(r[2] for r in rows)
    lines = [
        f"the run: {total:.1f} s of CPU (every reaped process), collection {collection:.1f} s in the workers,"
        f" {len(rows)} tests: {own:.1f} s their own, {reaped:.1f} s the processes they reaped;"
        f" PostgreSQL's throwaway servers {postgres:.1f} s besides"
    ]
    by_dir: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0, 0.0])
    for nodeid, mine, children, wall, *_ in rows:
        path = nodeid.split("::")[0]
        parts = path.split("/")
        for key, into in (
            (("/".join(parts[:2]) if len(parts) > 2 else path), by_dir),
            (path, by_file),
        ):
            into[key][0] += mine
            into[key][1] += children
            into[key][2] += 1
        by_file[path][3] += wall
    for key, (mine, children, n) in sorted(by_dir.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        lines.append(
            f"{key:45s} {mine + children:7.1f} s (own {mine:6.1f}, children {children:6.1f}) {n:5d} tests"
        )
    lines.append("")
    ranked = sorted(by_file.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    for key, (mine, children, n, wall) in ranked[:files]:
        lines.append(
            f"{key:62s} {mine + children:6.1f} s (own {mine:5.1f}, children {children:5.1f}) {n:4d} tests, wall {wall:.1f} s"
        )
    traced = [row for row in rows if len(row) > 5]
    if traced:  # FLOWMEM_SUITE_CPU_DESCENDANTS: each test's descendants wherever reaped
        spent: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
        for nodeid, mine, _, _, _, descendants in traced:
            for key in (nodeid.split("::")[0], "/".join(nodeid.split("/")[:2])):
                spent[key][0] += mine
                spent[key][1] += descendants
                spent[key][2] += 1
        lines += ["", "own + descendants (wherever they were reaped):"]
        for key, (mine, descendants, n) in sorted(
            spent.items(), key=lambda kv: -(kv[1][0] + kv[1][1])
        )[: files * 2]:
            lines.append(
                f"{key:62s} {mine + descendants:6.1f} s (own {mine:5.1f}, descendants {descendants:5.1f}) {n:4d} tests"
            )
    if ends:
        first = min(row[4] for row in rows if len(row) > 4)
        last = max(ends.values())
        lines += [
            "",
            f"the tests ran {last - first:.1f} s; each worker's last test ended, before the last one's end:",
        ]
        lines += [f"  {worker}: {last - end:.1f} s before" for worker, end in sorted(ends.items())]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    """``PREFIX [FILES]``: print the report of the run's JSON files."""
    print(report(argv[0], int(argv[1]) if len(argv) > 1 else 30))


if __name__ == "__main__":
    main(sys.argv[1:])
