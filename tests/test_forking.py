"""tests/forking.py's children are what ``python -c CODE ARGS`` would be; its seam picks the plain path when they could not be."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests import forking
from tests.served import ServeExited, run_flowmem, serve_env, start_serve, stop_serve

PROBE = """
import json, logging, os, signal, sys, threading, atexit, __main__
facts = {
    "argv": sys.argv, "cwd": os.getcwd(), "seen": os.environ.get("FORKING_PROBE"),
    "path": sys.path, "main": sorted(vars(__main__)), "fds": sorted(os.listdir("/proc/self/fd")),
    "threads": threading.active_count(), "handlers": len(logging.getLogger().handlers),
    "group": os.getpgrp() == os.getpid(), "session": os.getsid(0) == os.getpid(),
    "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE)],
    "buffered": sys.stdout.line_buffering,
}
print(json.dumps(facts), flush=True)
atexit.register(lambda: print("atexit", flush=True))
threading.Thread(target=lambda: (__import__("time").sleep(0.2), print("thread joined", flush=True))).start()
ending = sys.argv[1]
if ending == "exit3":
    sys.exit(3)
if ending == "refused":
    sys.exit("refused")
if ending == "raises":
    raise ValueError("no")
if ending == "sleeps":
    print("sleeping", flush=True)
    __import__("time").sleep(60)
"""
"""Prints what a process sees of itself, then ends the way ``argv[1]`` says."""


@pytest.fixture
def probe_env() -> dict[str, str]:
    """This environment and a variable of the probe's (no import reads it: the process's server serves it)."""
    env = dict(os.environ, FORKING_PROBE="yes")
    env.pop(forking.SWITCH, None)
    return env


def _run(
    tmp_path: Path, name: str, env: dict[str, str], ending: str, sig: int | None = None
) -> tuple[int, str, str, bool]:
    """The probe through ``forking.popen``: its exit code, stdout, stderr, and whether it was forked."""
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = forking.popen(
            PROBE, [ending, "x y"], cwd=tmp_path, env=env, stdout=stdout, stderr=stderr
        )
    if sig is not None:
        deadline = time.monotonic() + 60
        while "sleeping" not in out.read_text():
            assert time.monotonic() < deadline and process.poll() is None, err.read_text()
            time.sleep(0.05)
        os.killpg(process.pid, sig)  # as stop_serve/kill_serve signal a server's group
    code = process.wait(timeout=60)
    return code, out.read_text(), err.read_text(), isinstance(process, forking.Forked)


@pytest.mark.parametrize("ending", ["returns", "exit3", "refused", "raises"])
def test_a_forked_child_sees_and_ends_as_a_plain_interpreter(
    tmp_path: Path, probe_env: dict[str, str], ending: str
) -> None:
    forked = _run(tmp_path, "forked", probe_env, ending)
    plain = _run(tmp_path, "plain", {**probe_env, forking.SWITCH: "0"}, ending)
    assert forked[3] and not plain[3]
    assert forked[:3] == plain[:3]
    code, out, err, _ = forked
    facts = json.loads(out.splitlines()[0])
    assert facts["argv"] == ["-c", ending, "x y"] and facts["cwd"] == str(tmp_path)
    assert facts["seen"] == "yes" and facts["group"] and facts["session"]
    assert facts["fds"] == ["0", "1", "2", "3"]  # 3: the listing's own
    assert out.splitlines()[1:] == ["thread joined", "atexit"]  # threads joined before atexit
    assert code == {"returns": 0, "exit3": 3, "refused": 1, "raises": 1}[ending]
    assert {"refused": "refused\n", "raises": "ValueError: no\n"}.get(ending, "") in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_a_signal_ends_a_forked_child_as_a_plain_interpreter(
    tmp_path: Path, probe_env: dict[str, str], sig: int
) -> None:
    forked = _run(tmp_path, "forked", probe_env, "sleeps", sig)
    plain = _run(tmp_path, "plain", {**probe_env, forking.SWITCH: "0"}, "sleeps", sig)
    assert forked[3] and not plain[3]
    assert (
        forked[0] == plain[0] == -sig
    )  # KeyboardInterrupt uncaught: the interpreter dies of SIGINT
    assert forked[1] == plain[1]
    assert (
        ("KeyboardInterrupt" in forked[2])
        == ("KeyboardInterrupt" in plain[2])
        == (sig == signal.SIGINT)
    )


def test_flowmem_serve_forked_and_plain_serve_and_stop_alike(
    tmp_path: Path, probe_env: dict[str, str]
) -> None:
    seen = []
    for switch in ("1", "0"):
        where = tmp_path / switch
        where.mkdir()
        env = {**serve_env(), forking.SWITCH: switch}
        served = start_serve(["--database", "memory://", "--no-access-log"], where, env=env)
        try:
            health = httpx.get(f"{served.url}/health", timeout=10)
            docs = httpx.get(f"{served.url}/v1/sessions", timeout=10)
        finally:
            stop_serve(served.process)
        port = served.url.rsplit(":", 1)[1]
        seen.append(
            (
                isinstance(served.process, forking.Forked),
                served.process.returncode,
                health.status_code,
                health.json(),
                docs.status_code,
                served.err.read_text().replace(port, "PORT").splitlines()[0],
                sorted(p.name.replace(port, "PORT") for p in where.iterdir()),
            )
        )
    assert seen[0][0] and not seen[1][0]
    assert seen[0][1:] == seen[1][1:]


def test_a_serve_that_fails_to_start_says_so_alike_forked_and_plain(tmp_path: Path) -> None:
    errors = []
    for switch in ("1", "0"):
        with pytest.raises(ServeExited) as exited:
            start_serve(
                ["--database", "nosuch://x"], tmp_path, env={**serve_env(), forking.SWITCH: switch}
            )
        errors.append(str(exited.value))
    assert errors[0] == errors[1] and errors[0].startswith("serve exited 6")


def test_an_environment_an_import_read_differently_is_not_served_and_past_the_servers_runs_plain(
    probe_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = forking.server_for(probe_env)
    assert (
        first is not None and "WEBSOCKETS_MAX_LINE_LENGTH" in first.read
    )  # websockets reads it on import
    assert not any(
        forking._own(name) for name in first.read
    )  # no import read a variable serve sets
    assert forking.server_for({**probe_env, "FORKING_PROBE": "other"}) is first  # no import read it
    assert not first.serves({**probe_env, "WEBSOCKETS_MAX_LINE_LENGTH": "9999"})
    assert not first.serves({**probe_env, "PYTHONHASHSEED": "7"})  # read as the interpreter starts
    assert forking.server_for({**probe_env, forking.SWITCH: "0"}) is None
    monkeypatch.setattr(forking, "SERVERS", len(forking._servers))  # no room for another server
    assert forking.server_for({**probe_env, "WEBSOCKETS_MAX_LINE_LENGTH": "9999"}) is None


def test_the_server_imported_what_serve_needs_without_a_thread_and_its_children_end_when_it_stops(
    tmp_path: Path, probe_env: dict[str, str]
) -> None:
    assert forking.server_for(probe_env) is not None
    server = forking.ForkServer(probe_env)  # one of its own, to stop
    try:
        assert server.serves(probe_env) and not server.everything  # no thread, no running loop
        out = tmp_path / "out"
        code = "import sys, time; print(sorted(m for m in NAMES if m in sys.modules), flush=True); time.sleep(60)"
        names = "('flowmem.api.app', 'uvicorn', 'prometheus_client')"
        with out.open("wb") as stdout:
            child = server.start(
                code.replace("NAMES", names),
                [],
                cwd=tmp_path,
                env=probe_env,
                stdio=[0, stdout.fileno(), 2],
            )
        deadline = time.monotonic() + 30
        while not out.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (
            out.read_text() == "['flowmem.api.app', 'uvicorn']\n"
        )  # prometheus_client: the child's own import
    finally:
        server.close()
    assert child.wait(timeout=30) == -signal.SIGKILL
    sleeper = forking.popen(
        "import time; time.sleep(1)", [], cwd=tmp_path, env=probe_env, stdout=None, stderr=None
    )
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.1)
    sleeper.kill()
    assert sleeper.wait(timeout=30) == -signal.SIGKILL


@pytest.mark.parametrize(
    "args", [["--help"], ["serve", "--database", "memory://", "--workers", "2"]]
)
def test_run_flowmem_forked_and_plain_capture_alike(tmp_path: Path, args: list[str]) -> None:
    forked = run_flowmem(args, tmp_path, env={**os.environ, forking.SWITCH: "1"})
    plain = run_flowmem(args, tmp_path, env={**os.environ, forking.SWITCH: "0"})
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        plain.returncode,
        plain.stdout,
        plain.stderr,
    )
    assert forked.stdout or forked.stderr


def test_a_child_whose_exit_line_comes_with_its_pid_line_is_seen_ended() -> None:
    """A child that ends at once: the server's two lines in one read name its pid and its end."""
    mine, theirs = socket.socketpair()
    with theirs:
        theirs.sendall(b'{"pid": 4242}\n{"code": 3, "cpu": 0.25}\n')
    forked = forking.forked_on(mine, ["python", "-c", "pass"])
    assert (forked.pid, forked.poll(), forked.wait(0), forked.cpu) == (4242, 3, 3, 0.25)


def test_a_child_still_running_after_its_pid_line_is_waited_for() -> None:
    """The pid's line alone: the child runs until the server's next line says how it ended."""
    mine, theirs = socket.socketpair()
    with theirs:
        theirs.sendall(b'{"pid": 4243}\n')
        forked = forking.forked_on(mine, ["python", "-c", "pass"])
        assert forked.poll() is None
        theirs.sendall(b'{"code": 0, "cpu": 0.5}\n')
        assert forked.wait(5) == 0
