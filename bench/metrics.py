"""What counting costs a request: the metrics seam's work per append request, on and off.

Run with ``python bench/metrics.py`` (not part of the tests). It times, with the
process's CPU clock, the seam calls one append request makes when ``flowmem serve``
counts it (``flowmem.metrics``: the request with its latency, the append with what
its rules did, the lock wait), ``--calls`` times, three ways in one run, taking
turns: no sink (the library's default), the Prometheus sink in one process, and the
sink writing to ``PROMETHEUS_MULTIPROC_DIR`` (what ``serve`` does for its workers).
Reported: µs per request, median and min over ``--repeats``, to set against the
server's CPU per append request (``bench/http.py``'s table), and written to
``bench/results/metrics.json`` (``--json PATH``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

# Run as a script this folder is first on sys.path, where bench/http.py would shadow
# the standard library's ``http``. Drop it; the benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import report_json

from flowmem import metrics


def one_request() -> None:
    """The seam calls of one append request that healed a call (what a worker counts)."""
    metrics.lock_waited(0.00002, "process")
    metrics.appended(1, 1, 0, 0, 42)
    metrics.request("POST", "/v1/buffers/{scope}/{key}", 200, 0.0031)


def per_request_us(calls: int) -> float:
    """CPU µs per ``one_request`` over ``calls`` calls."""
    started = time.process_time()
    for _ in range(calls):
        one_request()
    return (time.process_time() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    """Measure each way ``--repeats`` times, taking turns; print and write the figures."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    report_json.add_arguments(parser, "metrics", "2,000 calls, one repeat")
    args = parser.parse_args(argv)
    calls, repeats = (2_000, 1) if args.quick else (args.calls, args.repeats)
    meta = report_json.environment(("prometheus-client",))
    report_json.describe(meta, {})
    from flowmem.api.metrics import PrometheusSink

    with tempfile.TemporaryDirectory(prefix="flowmem-metrics-bench-") as directory:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        memory = PrometheusSink()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        files = PrometheusSink()
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        ways: dict[str, Any] = {"off (no sink)": None, "one process": memory, "workers (files)": files}
        found: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(repeats):
            for name, sink in ways.items():
                metrics.install(sink)
                found[name].append(per_request_us(calls))
        metrics.install(None)
        files.close()
    print(f"\nseam CPU per append request, µs ({calls:,} calls, {repeats} repeats): median (min)")
    print("| sink | µs per request |\n|---|---:|")
    for name, values in found.items():
        print(f"| {name} | {statistics.median(values):.1f} ({min(values):.1f}) |")
    results = {"calls": calls, "repeats": repeats, "us_per_request": found}
    report_json.write(args.json, "metrics", argv, meta, {}, [], results, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
