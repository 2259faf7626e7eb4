"""What a new app costs: ``create_app``, its start and its first requests, in CPU (decision 0149).

Run with ``python bench/app_start.py`` (not part of the tests). In one process it
builds ``--apps`` apps over a fresh ``MemoryStore`` each (after 3 not counted),
starts each in a ``TestClient`` and sends it the same requests twice: a read on the
first router (``GET /v1/memory/user/k``), one on a later one (``GET /v1/sessions``),
a path no route serves (matched against every route) and a method no route at a
path serves (405, every route's methods read). Reported per app, in ms of this
process's CPU (``time.process_time``: what another process's load does not
stretch): ``create`` (``create_app``), ``start`` (the lifespan), ``first`` (the
requests the first time), ``again`` (the same requests again), and the count of
pydantic ``TypeAdapter`` objects each phase built (a count load does not change).
``first_process``: the same for the first app of a fresh process, the import of
``flowmem.api`` included.

``--srcs NAME=DIR,NAME=DIR`` compares codes (``before=/tmp/old/src,after=src``):
each round runs the bench once per code, each in a fresh process on its code, the
order alternating. JSON to ``--json PATH`` (default
``bench/results/app_start.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script this folder is first on sys.path, where bench/http.py would shadow
# the standard library's ``http``. Drop it.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

HERE = Path(__file__).resolve().parent
PHASES = ("create", "start", "first", "again")


def _counting_type_adapters() -> list[int]:
    """Count every pydantic ``TypeAdapter`` built from now on (the count in a one-item list)."""
    import pydantic

    built = [0]
    original = pydantic.TypeAdapter.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        built[0] += 1
        original(self, *args, **kwargs)

    pydantic.TypeAdapter.__init__ = counted  # type: ignore[method-assign]
    return built


def measure(apps: int) -> dict[str, Any]:
    """Per-app CPU (ms) and TypeAdapter counts of each phase, over ``apps`` apps after 3 not counted."""
    started = time.process_time()
    built = _counting_type_adapters()
    from fastapi.testclient import TestClient

    from flowmem.api import create_app
    from flowmem.auth import create_token
    from flowmem.store import open_store

    imported = time.process_time()

    def one() -> dict[str, tuple[float, int]]:
        store = open_store("memory://")
        token, _ = create_token(store, "alice", {"sessions:create"}, label="bench")
        headers = {"Authorization": f"Bearer {token}"}
        requests = [("GET", "/v1/memory/user/k", 200), ("GET", "/v1/sessions", 200)]
        requests += [("GET", "/v1/nowhere", 404), ("DELETE", "/v1/sessions", 405)]
        marks = [(time.process_time(), built[0])]
        app = create_app(store, purge_interval=None)
        marks.append((time.process_time(), built[0]))
        with TestClient(app) as client:
            marks.append((time.process_time(), built[0]))
            for _ in range(2):
                for method, path, status in requests:
                    answer = client.request(method, path, headers=headers)
                    assert answer.status_code == status, (method, path, answer.text)
                marks.append((time.process_time(), built[0]))
        store.close()
        return {
            phase: ((marks[i + 1][0] - marks[i][0]) * 1000, marks[i + 1][1] - marks[i][1])
            for i, phase in enumerate(PHASES)
        }

    first = one()
    first_process = {
        "import_ms": (imported - started) * 1000,
        **{f"{phase}_ms": first[phase][0] for phase in PHASES},
        **{f"{phase}_type_adapters": first[phase][1] for phase in PHASES},
    }
    for _ in range(2):
        one()
    rows = [one() for _ in range(apps)]
    per_app: dict[str, Any] = {}
    for phase in PHASES:
        cpu = [row[phase][0] for row in rows]
        per_app[phase] = {
            "cpu_ms": {"min": min(cpu), "median": statistics.median(cpu), "max": max(cpu)},
            "type_adapters": statistics.median(row[phase][1] for row in rows),
        }
    total = [sum(row[phase][0] for phase in ("create", "start", "first")) for row in rows]
    per_app["create_start_first_ms"] = {"min": min(total), "median": statistics.median(total)}
    return {"apps": apps, "per_app": per_app, "first_process": first_process, "load": os.getloadavg()[0]}


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """``--srcs``: the bench once per code and round, each in a fresh process on its code, the order alternating."""
    codes = [(name, folder) for name, _, folder in (item.partition("=") for item in args.srcs.split(","))]
    found: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in codes}
    for round_ in range(args.rounds):
        for name, folder in codes if round_ % 2 == 0 else codes[::-1]:
            command = [sys.executable, os.path.abspath(__file__), "--apps", str(args.apps), "--json", "-"]
            env = {**os.environ, "PYTHONPATH": os.path.abspath(folder)}
            done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            found[name].append(json.loads(done.stdout))
            print(f"# round {round_ + 1}: {name} (load {found[name][-1]['load']:.1f})", file=sys.stderr, flush=True)
    for name, _ in codes:
        rounds = found[name]
        cells = []
        for phase in PHASES:
            medians = [r["per_app"][phase]["cpu_ms"]["median"] for r in rounds]
            adapters = rounds[0]["per_app"][phase]["type_adapters"]
            cells.append(f"{phase} {min(medians):.1f} ms ({adapters:g} TA)")
        fresh = min(r["first_process"]["first_ms"] for r in rounds)
        print(f"{name:>8}: per app, min of the rounds' medians: " + ", ".join(cells) + f"; first app's first requests {fresh:.1f} ms")
    return {"codes": {name: {"src": folder, "rounds": found[name]} for name, folder in codes}}


def main(argv: list[str]) -> int:
    """Run the bench, print the summary, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", type=int, default=20, help="apps measured per process (after 3 not counted)")
    parser.add_argument("--srcs", help="NAME=DIR,NAME=DIR: codes compared in one run, each in its own processes")
    parser.add_argument("--rounds", type=int, default=4, help="with --srcs: runs of each code, the order alternating")
    parser.add_argument("--json", default=str(HERE / "results" / "app_start.json"), help="where the JSON goes (-: stdout)")
    args = parser.parse_args(argv)
    results = compare(args) if args.srcs else measure(args.apps)
    results["argv"] = argv
    text = json.dumps(results, indent=2)
    if args.json == "-":
        print(text)
    else:
        Path(args.json).write_text(text + "\n")
        if not args.srcs:
            print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
