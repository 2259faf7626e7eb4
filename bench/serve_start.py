"""What a ``flowmem serve`` costs to start: CPU from launch to ``/health`` answered and stopped (decision 0157).

Run with ``python bench/serve_start.py`` (not part of the tests). Each run starts
``flowmem serve`` (``--workers N``) on a fresh SQLite file in a temporary directory,
polls ``/health`` until it answers, sends SIGTERM to the server's process group and
reaps it: the CPU (user + sys) of the server and every worker it reaped
(``os.wait4``: what another process's load does not stretch, unlike the wall time,
also reported) and the largest resident set of one of its processes. The test
suite starts such servers by the dozen (``tests/served.py``).

``--srcs NAME=DIR,NAME=DIR`` compares codes (``before=/tmp/old/src,after=src``):
each round starts one server per code, each on its code (``PYTHONPATH``), the order
alternating. Reported per code: the minimum and the median of the rounds. JSON to
``--json PATH`` (default ``bench/results/serve_start.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script this folder is first on sys.path, where bench/http.py would shadow
# the standard library's ``http``. Drop it.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import httpx

HERE = Path(__file__).resolve().parent
READY_SECONDS = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_once(src: str, workers: int) -> dict[str, float]:
    """One server on ``src``: its CPU, its wall time to /health, its largest process in MB."""
    with tempfile.TemporaryDirectory(prefix="flowmem-serve-start-") as cwd:
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "FLOWMEM_DATABASE_URL" and not k.startswith("FLOWMEM_MODEL")}
        env["PYTHONPATH"] = src
        command = [sys.executable, "-c", "from flowmem.cli import main; main()", "serve", "--port", str(port)]
        if workers > 1:
            command += ["--workers", str(workers)]
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"flowmem serve on {src} exited {process.returncode}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() - started > READY_SECONDS:
                    raise SystemExit(f"flowmem serve on {src} did not answer in {READY_SECONDS:.0f} s")
                time.sleep(0.05)
            ready = time.monotonic() - started
        finally:
            os.killpg(process.pid, signal.SIGTERM)
        _, _, usage = os.wait4(process.pid, 0)
        process.returncode = 0  # reaped here: Popen must not wait for it again
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "ready_s": ready, "max_rss_mb": usage.ru_maxrss / 1024}


def main() -> None:
    """Start servers on each code in alternation; print and write the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--srcs", default=f"src={HERE.parent / 'src'}", help="NAME=DIR,NAME=DIR")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", default=str(HERE / "results" / "serve_start.json"))
    args = parser.parse_args()
    srcs = dict(pair.split("=", 1) for pair in args.srcs.split(","))
    names = list(srcs)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    load = [os.getloadavg()[0]]
    for n in range(args.rounds):
        for name in names if n % 2 == 0 else names[::-1]:
            runs[name].append(start_once(srcs[name], args.workers))
    load.append(os.getloadavg()[0])
    summary: dict[str, Any] = {
        name: {
            f"{field}_{how}": round(pick([run[field] for run in found]), 3)
            for field in ("cpu_s", "ready_s", "max_rss_mb")
            for how, pick in (("min", min), ("median", statistics.median))
        }
        for name, found in runs.items()
    }
    print(json.dumps(summary, indent=1))
    result = {"workers": args.workers, "rounds": args.rounds, "load_1min": load, "summary": summary, "runs": runs}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
