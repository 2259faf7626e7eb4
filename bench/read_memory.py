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
2 MiB buffer and 4 readers, measured on the server that filled it, a smoke run), for each read path of ``--paths`` (``all``:
plain rows, ``?max_tokens=10^9``, ``/compact/plan?keep_tokens=600000``,
``?archived=true``, ``?format=anthropic``, ``?format=openai``, ``?max_tokens=10^9&format=anthropic``,
and ``?format=anthropic`` / ``openai`` of a second buffer, ``repair``, the same rows
after an orphan result normalization drops; issue 38 §2), each on
a fresh server over the same database: the resident set before the reads, the peak
during them, the growth per reader, the answer's size, whether every reader got the
same bytes, and the wait of ``/health`` (asked every 20 ms meanwhile: p50, p99,
max), by a process of its own: a prober thread beside the eight readers' threads
waited for their interpreter lock too, and counted its own waits as the server's.
``--slow`` makes the readers take 64 KiB every 10 ms (slow clients) instead of
reading as fast as they can; ``--row-bytes`` sets each message's size (100: the
issue's 48,000-row loop case at ``--mib 5``). ``--nice N`` runs the server and the
prober at nice ``N`` (negative: root), so other jobs on a shared machine preempt
them less; the readers keep the default.
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


def _fill(client: httpx.Client, mib: int, row_bytes: int = 1000, key: str = "big") -> int:
    """Append messages of about ``row_bytes`` until the buffer holds ``mib`` MiB (or is full); return the count.

    Buffer ``repair`` starts with a result no call declared (an orphan, stored as
    given): a provider read's normalization must repair it (it drops the orphan).
    """
    filler = "x" * row_bytes
    total = count = 0
    while total < mib * MIB:
        rows: list[dict[str, Any]] = [{"role": "user", "content": f"{count + n} {filler}"} for n in range(1000)]
        if key == "repair" and count == 0:
            rows[0] = {"role": "tool", "tool_call_id": "nobody", "content": "an orphan result"}
        answer = client.post(f"/v1/buffers/user/{key}", json={"messages": rows})
        if answer.status_code == 409:  # buffer_full: the buffer limit (64 MiB) is reached
            break
        answer.raise_for_status()
        count += 1000
        total += sum(len(json.dumps(r, separators=(",", ":"))) for r in rows)
    return count


# every read path of one buffer: (path, query); ``--paths`` names them (issue 38 §2)
PATHS: dict[str, tuple[str, dict[str, Any]]] = {
    "rows": ("/v1/buffers/user/big", {}),
    "window": ("/v1/buffers/user/big", {"max_tokens": 10**9}),
    "plan": ("/v1/buffers/user/big/compact/plan", {"keep_tokens": 600_000}),
    "archived": ("/v1/buffers/user/big", {"archived": "true"}),
    "anthropic": ("/v1/buffers/user/big", {"format": "anthropic"}),
    "openai": ("/v1/buffers/user/big", {"format": "openai"}),
    "window_anthropic": ("/v1/buffers/user/big", {"max_tokens": 10**9, "format": "anthropic"}),
    "repaired_anthropic": ("/v1/buffers/user/repair", {"format": "anthropic"}),
    "repaired_openai": ("/v1/buffers/user/repair", {"format": "openai"}),
}


def _read(
    base: str, token: str, target: tuple[str, dict[str, Any]], slow: bool, out: list[bytes], errors: list[str]
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    path, params = target
    try:
        with (
            httpx.Client(base_url=base, headers=headers, timeout=600) as client,
            client.stream("GET", path, params=params) as answer,
        ):
            parts = []
            for part in answer.iter_bytes(64 * 1024):
                parts.append(part)
                if slow:
                    time.sleep(0.01)
            if answer.status_code != 200:
                errors.append(f"{answer.status_code}: {b''.join(parts)[:200]!r}")
            out.append(b"".join(parts))
    except Exception as exc:  # reported, not raised: the run goes on
        errors.append(repr(exc))


# the /health prober, run in a process of its own until its standard input closes:
# prints "ready" once it was answered (not counted), then each answer's wait in ms,
# as a JSON list
PROBE = """
import json, sys, threading, time
import httpx
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
waits = []
with httpx.Client(base_url=sys.argv[1], timeout=60) as client:
    client.get("/health")
    print("ready", flush=True)
    while not done.is_set():
        started = time.perf_counter()
        client.get("/health")
        waits.append((time.perf_counter() - started) * 1000)
        time.sleep(0.02)
print(json.dumps(waits))
"""


def _niced(nice: int) -> Any:
    """A ``preexec_fn`` that sets the child's nice value (None for 0)."""
    return (lambda: os.nice(nice)) if nice else None


def _health(base: str, nice: int) -> subprocess.Popen[str]:
    """Ask ``/health`` every 20 ms from a process of its own, once it is ready (close its stdin to stop)."""
    prober = subprocess.Popen(
        [sys.executable, "-c", PROBE, base],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=_niced(nice),
    )  # fmt: skip
    assert prober.stdout is not None
    if prober.stdout.readline().strip() != "ready":
        raise SystemExit("the /health prober did not start")
    return prober


def _waits(prober: subprocess.Popen[str]) -> list[float]:
    """Stop the prober; its waits in ms."""
    out, _ = prober.communicate(input="", timeout=120)
    waits: list[float] = json.loads(out)
    return waits


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else 0.0


def _start(src: Path, url: str, cwd: str, nice: int = 0) -> tuple[subprocess.Popen[bytes], str]:
    """``flowmem serve`` of ``src`` on ``url`` (one worker); return once /health answers."""
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
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_niced(nice)
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return server, base
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            stop = server.stderr.read().decode() if server.stderr else ""
            raise SystemExit(f"server did not start: {stop}")
        time.sleep(0.1)


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()


def _measure(args: argparse.Namespace, server: subprocess.Popen[bytes], base: str, token: str, name: str) -> dict[str, Any]:
    """``args.readers`` concurrent reads of path ``name``: the server's memory and /health's waits."""
    target = PATHS[name]
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
        single = client.get(target[0], params=target[1]).content
    time.sleep(1.0)
    before = _rss(server.pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss(server.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    prober = _health(base, args.nice)
    sampler.start()
    answers: list[bytes] = []
    errors: list[str] = []
    readers = [
        threading.Thread(target=_read, args=(base, token, target, args.slow, answers, errors))
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
    waits = _waits(prober)
    return {
        "path": name,
        "request": f"GET {target[0]}?" + "&".join(f"{k}={v}" for k, v in target[1].items()),
        "answer_bytes": len(single),
        "rss_before_mib": round(before / MIB, 1),
        "rss_peak_mib": round(peak[0] / MIB, 1),
        "growth_per_reader_mib": round((peak[0] - before) / MIB / args.readers, 2),
        "seconds": round(seconds, 2),
        "health_ms": {"p50": _percentile(waits, 0.5), "p99": _percentile(waits, 0.99),
                      "max": _percentile(waits, 1.0), "n": len(waits)},
        "identical": all(a == single for a in answers) and len(answers) == args.readers,
        "errors": errors[:3],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Fill the buffer once; for each path a fresh server, read by ``args.readers`` clients at once."""
    src = Path(args.src).resolve()
    names = list(PATHS) if args.paths == "all" else args.paths.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database or f"sqlite:///{tmp}/read.db"
        token = _token(src, url)
        # a quick run measures on the server that filled the buffer: one ``flowmem serve``
        # started, not two (decision 0203); a full run starts one afresh for each path
        reuse = bool(args.quick)
        server, base = _start(src, url, tmp, args.nice if reuse else 0)
        try:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
                messages = _fill(client, args.mib, args.row_bytes)
                if any(PATHS[name][0].endswith("/repair") for name in names):
                    _fill(client, args.mib, args.row_bytes, "repair")
        except BaseException:
            _stop(server)
            raise
        if not reuse:
            _stop(server)
        results = []
        for index, name in enumerate(names):  # a fresh server per path: a peak is not hidden by the last one's
            if index or not reuse:
                server, base = _start(src, url, tmp, args.nice)
            try:
                results.append(_measure(args, server, base, token, name))
            finally:
                _stop(server)
            print(json.dumps(results[-1]), flush=True)
        durability: dict[str, Any] = {}
        if url.startswith("sqlite:///") and args.database is None:  # flowmem's default
            durability["flowmem"] = report_json.flowmem_sqlite_durability(f"{tmp}/read.db", "FULL")
    return {
        "durability": durability,
        "src": str(src),
        "buffer_mib": args.mib,
        "row_bytes": args.row_bytes,
        "messages": messages,
        "readers": args.readers,
        "slow": args.slow,
        "nice": args.nice,
        "paths": results,
        "identical": all(r["identical"] for r in results),
    }


def main() -> None:
    """Parse the options, run once, print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=16, help="buffer size in MiB (default 16)")
    parser.add_argument("--readers", type=int, default=16, help="concurrent readers (default 16)")
    parser.add_argument("--database", default=None, help="a database URL (default: a new SQLite file)")
    parser.add_argument("--src", default=str(HERE.parent / "src"), help="the flowmem source to run")
    parser.add_argument("--slow", action="store_true", help="readers take 64 KiB every 10 ms")
    parser.add_argument(
        "--paths", default="rows",
        help=f"read paths, comma-separated, or all: {', '.join(PATHS)} (default rows)",
    )
    parser.add_argument("--row-bytes", type=int, default=1000, help="each message's text (default 1000)")
    parser.add_argument(
        "--nice", type=int, default=0, help="the server's and the /health prober's nice value (default 0)"
    )
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
