"""Server memory under concurrent reads of one large buffer (issue 24 §3).

Run with ``python bench/read_memory.py`` (not part of the tests). It starts a real
``flowmem serve`` (one worker, this checkout's ``src``, or ``--src``) on a fresh
SQLite file (or ``--database URL``), fills one buffer of the user ``alice`` to
``--mib`` MiB with appends of 1,000 messages, then ``--readers`` clients read that
buffer whole at once (``GET /v1/buffers/user/big``), each on its own connection,
reading the answer as it arrives. A sampler reads the server's resident set
(``VmRSS`` of ``/proc/<pid>/status``) every 10 ms.

Reported (JSON on stdout, and to ``bench/results/read_memory.json``, ``--json PATH``,
with the date, machine and versions of ``bench/lib/report_json.py``; ``--quick``: a
2 MiB buffer and 4 readers, a smoke run): the resident set before the reads,
the peak during them, the growth per reader, the answer's size, and whether every
reader got the same bytes. ``--slow`` makes the readers take 64 KiB every 10 ms
(slow clients) instead of reading as fast as they can.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Run as ``python bench/read_memory.py``, this folder is first on sys.path, where a
# sibling (bench/http.py) would shadow the standard library's ``http``. Drop it.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import httpx
import report_json

HERE = Path(__file__).resolve().parent
MIB = 1024 * 1024


def _rss(pid: int) -> int:
    """The process's resident set in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _token(src: Path, url: str) -> str:
    code = (
        "import sys; from flowmem.store import open_store; from flowmem.auth import create_token;"
        "s = open_store(sys.argv[1]); print(create_token(s, 'alice')[0]); s.close()"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def _fill(client: httpx.Client, mib: int) -> int:
    """Append messages of about 1 KiB until the buffer holds ``mib`` MiB (or is full); return the count."""
    filler = "x" * 1000
    total = count = 0
    while total < mib * MIB:
        rows = [{"role": "user", "content": f"{count + n} {filler}"} for n in range(1000)]
        answer = client.post("/v1/buffers/user/big", json={"messages": rows})
        if answer.status_code == 409:  # buffer_full: the buffer limit (64 MiB) is reached
            break
        answer.raise_for_status()
        count += 1000
        total += sum(len(json.dumps(r, separators=(",", ":"))) for r in rows)
    return count


def _read(base: str, token: str, slow: bool, out: list[bytes], errors: list[str]) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with (
            httpx.Client(base_url=base, headers=headers, timeout=120) as client,
            client.stream("GET", "/v1/buffers/user/big") as answer,
        ):
            parts = []
            for part in answer.iter_bytes(64 * 1024):
                parts.append(part)
                if slow:
                    time.sleep(0.01)
            out.append(b"".join(parts))
    except Exception as exc:  # reported, not raised: the run goes on
        errors.append(repr(exc))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, fill the buffer, read it with ``args.readers`` clients at once."""
    src = Path(args.src).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database or f"sqlite:///{tmp}/read.db"
        token = _token(src, url)
        port = _free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("FLOWMEM_")},
            "PYTHONPATH": str(src),
        }
        command = [
            sys.executable, "-c", "from flowmem.cli import main; main()", "serve",
            "--database", url, "--port", str(port), "--no-access-log",
            "--rate-limit", "0", "--auth-failures", "0",
        ]  # fmt: skip
        server = subprocess.Popen(
            command, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"server did not start: {server.stderr.read().decode()}")
                time.sleep(0.1)
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
                messages = _fill(client, args.mib)
                single = client.get("/v1/buffers/user/big").content
            time.sleep(1.0)
            before = _rss(server.pid)
            peak = [before]
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], _rss(server.pid))
                    time.sleep(0.01)

            sampler = threading.Thread(target=sample)
            sampler.start()
            answers: list[bytes] = []
            errors: list[str] = []
            readers = [
                threading.Thread(target=_read, args=(base, token, args.slow, answers, errors))
                for _ in range(args.readers)
            ]
            started = time.monotonic()
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join()
            seconds = time.monotonic() - started
            done.set()
            sampler.join()
            after = _rss(server.pid)
            durability: dict[str, Any] = {}
            if url.startswith("sqlite:///") and args.database is None:  # flowmem's default
                durability["flowmem"] = report_json.flowmem_sqlite_durability(f"{tmp}/read.db", "FULL")
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
    return {
        "durability": durability,
        "src": str(src),
        "buffer_mib": args.mib,
        "messages": messages,
        "answer_bytes": len(single),
        "readers": args.readers,
        "slow": args.slow,
        "rss_before_mib": round(before / MIB, 1),
        "rss_peak_mib": round(peak[0] / MIB, 1),
        "rss_after_mib": round(after / MIB, 1),
        "growth_per_reader_mib": round((peak[0] - before) / MIB / args.readers, 2),
        "seconds": round(seconds, 2),
        "identical": all(a == single for a in answers) and len(answers) == args.readers,
        "errors": errors,
    }


def main() -> None:
    """Parse the options, run once, print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=16, help="buffer size in MiB (default 16)")
    parser.add_argument("--readers", type=int, default=16, help="concurrent readers (default 16)")
    parser.add_argument("--database", default=None, help="a database URL (default: a new SQLite file)")
    parser.add_argument("--src", default=str(HERE.parent / "src"), help="the flowmem source to run")
    parser.add_argument("--slow", action="store_true", help="readers take 64 KiB every 10 ms")
    report_json.add_arguments(parser, "read_memory", "a 2 MiB buffer, 4 readers")
    argv = sys.argv[1:]
    args = parser.parse_args()
    if args.quick:
        args.mib, args.readers = 2, 4
    meta = report_json.environment(("httpx",))
    result = run(args)
    print(json.dumps(result, indent=2))
    durability = result.pop("durability")
    report_json.write(args.json, "read_memory", argv, meta, durability, [], result, args.quick)


if __name__ == "__main__":
    main()
