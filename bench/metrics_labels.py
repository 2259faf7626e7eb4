"""Can a client without a token grow ``/metrics``? A scrape before and after a flood (issue 38 §1).

Run with ``python bench/metrics_labels.py`` (not part of the tests). It starts a real
``flowmem serve`` (``--workers``, default 2; this checkout's ``src``) on a fresh
SQLite file with its metrics directory under a private ``TMPDIR``, scrapes
``/metrics`` with a ``metrics:read`` token, then sends ``--requests`` requests
**without a token** over raw sockets, each with a different ``--method-chars``-long
method, a different path, different header values (``User-Agent``,
``X-Forwarded-For``, a bad ``Authorization`` every third request) and, every tenth
request, a framing the gate refuses (``Transfer-Encoding`` with
``Content-Length``), and scrapes again.

Reported (JSON on stdout and to ``bench/results/metrics_labels.json``, ``--json
PATH``): the scrape's size in bytes and its number of samples before and after,
the seconds one scrape took, and the size on disk of the workers' multiprocess
files. ``--quick``: 300 requests of 40-character methods.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import string
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# Run as a script this folder is first on sys.path, where bench/http.py would shadow
# the standard library's ``http``. Drop it; the benches' shared modules are in bench/lib.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import httpx
import report_json

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raw(port: int, head: bytes) -> None:
    """Send one request head on its own connection and read the answer to its end."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        while sock.recv(65536):
            pass


def _head(n: int, method_chars: int, rng: random.Random) -> bytes:
    method = "".join(rng.choices(string.ascii_uppercase, k=method_chars))
    lines = [
        f"{method} /v1/buffers/user/k{n}/{rng.random()} HTTP/1.1",
        "Host: 127.0.0.1",
        f"User-Agent: agent-{n}-{rng.random()}",
        f"X-Forwarded-For: 10.{n % 250}.{n // 250 % 250}.{n % 7}",
        "Connection: close",
    ]
    if n % 3 == 0:
        lines.append(f"Authorization: Bearer fm_guess{n}")
    if n % 10 == 0:
        lines += ["Transfer-Encoding: chunked", "Content-Length: 5"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def _disk(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _scrape(url: str, token: str) -> tuple[int, int, float]:
    started = time.perf_counter()
    # from another loopback address: the flood's bad tokens lock 127.0.0.1 for guessing
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=600) as client:
        answer = client.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    seconds = time.perf_counter() - started
    answer.raise_for_status()
    samples = sum(1 for line in answer.text.splitlines() if line and not line.startswith("#"))
    return len(answer.content), samples, seconds


def run(requests: int, method_chars: int, workers: int) -> dict[str, Any]:
    """Start a server, flood it without a token, and return the scrape before and after."""
    from flowmem.auth import create_token
    from flowmem.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        private = root / "tmp"
        private.mkdir()
        db = root / "m.db"
        store = open_store(f"sqlite:///{db}")
        reader, _ = create_token(store, None, {"metrics:read"})
        store.close()
        port = _free_port()
        env = {**os.environ, "TMPDIR": str(private)}
        env.pop("FLOWMEM_DATABASE_URL", None)
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "flowmem"), "serve", "--port", str(port),
             "--database", f"sqlite:///{db}", "--workers", str(workers)],
            cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            before = _scrape(url, reader)
            disk_before = _disk(private)
            rng = random.Random(38)
            heads = [_head(n, method_chars, rng) for n in range(requests)]
            started = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda head: _raw(port, head), heads))
            flood = time.perf_counter() - started
            after = _scrape(url, reader)
            disk_after = _disk(private)
        finally:
            process.terminate()
            process.wait(timeout=60)
    return {
        "requests": requests, "method_chars": method_chars, "workers": workers,
        "flood_seconds": round(flood, 2),
        "scrape_bytes": [before[0], after[0]], "scrape_samples": [before[1], after[1]],
        "scrape_seconds": [round(before[2], 3), round(after[2], 3)],
        "multiprocess_bytes": [disk_before, disk_after],
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run once, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3_000)
    parser.add_argument("--method-chars", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=2)
    report_json.add_arguments(parser, "metrics_labels", "300 requests, 40-character methods")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    requests, chars = (300, 40) if args.quick else (args.requests, args.method_chars)
    meta = report_json.environment(("prometheus-client",))
    report_json.describe(meta, {})
    result = run(requests, chars, args.workers)
    print(json.dumps(result, indent=1))
    report_json.write(args.json, "metrics_labels", argv, meta, {}, [], result, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
