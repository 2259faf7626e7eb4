"""What every bench states beside its figures, and the JSON file it writes them to.

A bench's JSON (default ``bench/results/<bench>.json``, ``--json PATH``) holds its
own measurements and, written here for all alike: the command, the date, the git
commit, the machine, the versions, the durability of every database it used
(PostgreSQL: what ``SHOW`` reports; SQLite: the journal mode and ``synchronous``),
the targets and whether each was met. A later issue draws plots from these files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
RESULTS = BENCH / "results"
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
GROUP_COMMIT = "flowmem's group commit: the WAL is fsynced before a write returns or is answered"


def add_arguments(parser: argparse.ArgumentParser, bench: str, quick: str) -> None:
    """Add ``--json PATH`` (default ``bench/results/<bench>.json``) and ``--quick`` (``quick``: its sizes)."""
    parser.add_argument(
        "--quick", action="store_true", help=f"{quick}: a smoke run (its targets not judged)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=RESULTS / f"{bench}.json",
        help=f"where to write every measurement as JSON (default bench/results/{bench}.json)",
    )


def environment(packages: Iterable[str] = ()) -> dict[str, Any]:
    """The date, commit, machine and versions (flowmem's and ``packages``') of this run."""
    versions = {}
    for package in ("flowmem", *packages):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "machine": machine(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "versions": versions,
        "load": f"{os.getloadavg()[0]:.1f} at the start (1-minute)",
    }


def machine() -> str:
    """``2 cores (CPU model), 24 GiB, platform``."""
    memory = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({cpu}), {memory}, {platform.platform()}"


def commit() -> str:
    """The checkout's short commit, ``(src modified)`` after it when src/ differs from it."""
    found = "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        head = subprocess.run(
            ["git", "-C", str(BENCH), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(BENCH), "status", "--porcelain", "--", "../src"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        found = f"{head}{' (src modified)' if dirty else ''}" if head else found
    return found


def sqlite_durability(
    where: str | Path | sqlite3.Connection, synchronous: str | None = None, note: str = ""
) -> dict[str, Any]:
    """The durability entry of a SQLite database: its journal mode and ``synchronous``.

    ``where``: the connection the system writes with (both read from it), or the
    file (the journal mode is read from it; ``synchronous`` is per connection, so
    ``synchronous`` names the one the system sets on its own). Durable: ``FULL`` or
    ``EXTRA`` with a journal on disk.
    """
    conn = where if isinstance(where, sqlite3.Connection) else sqlite3.connect(str(where))
    try:
        row = conn.execute("PRAGMA journal_mode").fetchone()
        journal = str(row[0]).lower() if row else "unknown"
        source = "set by the system on its connections"
        if synchronous is None:
            row = conn.execute("PRAGMA synchronous").fetchone()
            synchronous = SYNCHRONOUS.get(int(row[0]), str(row[0])) if row else "unknown"
            source = "PRAGMA on the system's connection"
    finally:
        if conn is not where:
            conn.close()
    synchronous = synchronous.upper()
    durable = synchronous in ("FULL", "EXTRA") and journal not in ("off", "memory")
    text = f"journal_mode={journal}, synchronous={synchronous}"
    entry: dict[str, Any] = {
        "backend": "sqlite",
        "sqlite_version": sqlite3.sqlite_version,
        "journal_mode": journal,
        "synchronous": synchronous,
        "synchronous_source": source,
        "durable": durable,
        "label": f"SQLite: {text}" if durable else f"SQLite: NOT DURABLE on power loss: {text}",
    }
    if note:
        entry["note"] = note
        entry["label"] += f" ({note})"
    return entry


def flowmem_sqlite_durability(path: str | Path, synchronous: str) -> dict[str, Any]:
    """A flowmem SQLite file's entry: its journal mode, and the ``synchronous`` flowmem sets.

    At ``FULL`` (the default) flowmem commits at ``NORMAL`` and fsyncs the WAL for
    the whole group before the write returns (decisions 0027, 0029): a write is as
    durable as at ``FULL`` when it is acknowledged.
    """
    grouped = synchronous.upper() in ("FULL", "EXTRA")
    return sqlite_durability(path, synchronous, GROUP_COMMIT if grouped else "")


def no_database(label: str) -> dict[str, Any]:
    """The entry of a system that stores nothing on disk (``durable`` False)."""
    return {"backend": "none", "durable": False, "label": label}


def durability_lines(durability: dict[str, dict[str, Any]]) -> list[str]:
    """One printed line per database: ``durability: name: label``."""
    if not durability:
        return ["durability: no database (nothing is stored)"]
    return [f"durability: {name}: {entry['label']}" for name, entry in durability.items()]


def describe(meta: dict[str, Any], durability: dict[str, dict[str, Any]] | None = None) -> None:
    """Print the run's date, machine, versions, commit and (given) each database's durability."""
    print(f"{meta['date']}; {meta['machine']}; Python {meta['python']}, SQLite {meta['sqlite']}")
    print("; ".join(f"{k} {v}" for k, v in meta["versions"].items()))
    print(f"commit {meta['commit']}; load average {meta['load']}")
    for line in durability_lines(durability) if durability is not None else []:
        print(line)
    sys.stdout.flush()


class Targets:
    """The targets of a run as they are checked: printed, kept with their verdicts for the JSON."""

    def __init__(self, quick: bool = False) -> None:
        """``quick``: a smoke run, which measures too little to judge (printed so)."""
        self.items: list[dict[str, Any]] = []
        self.quick = quick

    def check(self, label: str, value: float, goal: float, at_most: bool = False) -> bool:
        """Record and print ``value`` against ``goal`` (``>=``, or ``<=`` with ``at_most``)."""
        met = value <= goal if at_most else value >= goal
        sign = "<=" if at_most else ">="
        verdict = ("PASS" if met else "FAIL") + (" (not judged: --quick)" if self.quick else "")
        print(f"  {verdict}  {label}: {value:.2f} (target {sign} {goal:g})")
        self.items.append(
            {"label": label, "value": value, "goal": f"{sign} {goal:g}", "met": bool(met)}
        )
        return bool(met)

    def record(self, label: str, met: bool, value: Any = None, goal: str = "") -> None:
        """Record a target checked by the caller (printed by it too)."""
        self.items.append({"label": label, "value": value, "goal": goal, "met": bool(met)})

    @property
    def failed(self) -> list[str]:
        """The labels of the targets missed."""
        return [t["label"] for t in self.items if t["met"] is False]


def write(
    path: Path,
    bench: str,
    argv: list[str],
    meta: dict[str, Any],
    durability: dict[str, dict[str, Any]],
    targets: list[dict[str, Any]],
    results: dict[str, Any],
    quick: bool = False,
) -> None:
    """Write the run's JSON: the shared fields, then ``results`` (the bench's measurements)."""
    judged = [t["met"] for t in targets if t.get("met") is not None]
    stored = [entry["durable"] for entry in durability.values() if entry["backend"] != "none"]
    out: dict[str, Any] = {
        "bench": bench,
        "command": f"python bench/{bench}.py " + " ".join(argv),
        **meta,
        "durability": durability,
        "all_durable": all(stored) if stored else None,
        "quick": quick,
        "targets": targets,
        "targets_met": (all(judged) if judged else None) if not quick else None,
        **results,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"\nJSON: {path}")
