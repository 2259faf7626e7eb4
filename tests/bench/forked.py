"""Bench scripts run as ``python bench/NAME.py ...`` would, forked from a server that imported their frameworks.

Each smoke test runs its bench in a process of its own, as a user runs it; a new
interpreter then imports flowmem and the bench's peers (the Agents SDK, LangChain,
LangGraph, pydantic-ai, the MCP SDK: 1-4 s of CPU a run, most of a quick run's cost).
``BenchServer`` is one interpreter per test process that imports, before each fork,
the modules the request names (``preload``: each once per server, then frozen with
``gc.freeze`` so the children's collections skip them, decision 0188) and forks a child
per run. The child takes the test's environment, directory, argv and a ``sys.path``
whose first entry is the script's folder (as ``python SCRIPT`` sets it), its stdin from
``/dev/null`` and its stdout and stderr to files, and runs the script with ``runpy`` as
``__main__``; its exit code is the interpreter's (``sys.exit``'s code, 1 on an uncaught
exception with its traceback on stderr), after non-daemon threads are joined and the
``atexit`` handlers run, as at an interpreter's exit. The server waits for each child,
so the children's CPU counts in the test process when the server is reaped
(``close``: tests/bench/conftest.py at the session's end). ``run_script`` is the seam:
``FLOWMEM_TEST_BENCH_FORK=0``, or an environment that differs from the server's in
anything but pytest's per-test variable, runs a plain ``python SCRIPT`` instead
(decision 0203; tests/bench/test_forked.py proves both give the same).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from tests.forking import exit_as_interpreter, preload

ROOT = Path(__file__).resolve().parents[2]
SWITCH = "FLOWMEM_TEST_BENCH_FORK"
"""``0`` runs every bench as a plain subprocess (the seam's plain path)."""
VOLATILE = ("PYTEST_CURRENT_TEST",)
"""Environment variables that may differ between the server and a request (pytest sets it per test)."""

SERVER = """
import sys
base = sys.path[1:]
sys.path.insert(0, {root!r})
from tests.bench.forked import serve
serve(base)
"""
"""The server: ``sys.path`` as a script's would be without its folder, then the request loop."""


def serve(base: list[str]) -> None:
    """Read one JSON request a line on stdin; fork a child for each; answer its pid, then its exit code."""
    replies = os.fdopen(os.dup(1), "w")
    requests = os.fdopen(os.dup(0), "r")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # nothing the preloads print can reach the replies
    os.close(null)
    imported: set[str] = set()
    for line in requests:
        request = json.loads(line)
        preload(request["preload"], imported)  # each once, collected and frozen (tests/forking.py)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _child(request, base)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        replies.write(json.dumps({"code": code, "cpu": cpu}) + "\n")
        replies.flush()


def _child(request: dict[str, Any], base: list[str]) -> NoReturn:
    """In the forked child: the script's stdio, environment, directory, argv and path; run it; exit as Python exits."""
    import runpy

    signal.signal(signal.SIGINT, signal.default_int_handler)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for target, path in ((1, request["out"]), (2, request["err"])):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    script = request["script"]
    sys.argv = [script, *request["argv"]]
    sys.path[:] = [os.path.dirname(script), *base]
    exit_as_interpreter(lambda: runpy.run_path(script, run_name="__main__"))


class BenchServer:
    """A running server (``sys.executable``, this process's environment) forking one child per script run."""

    def __init__(self) -> None:
        self.env = dict(os.environ)
        self.cpu = 0.0  # the children's CPU, as the server reaped them
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER.format(root=str(ROOT))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a child of this server can take ``env`` (the same as the server's but pytest's per-test variable)."""

        def plain(values: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in values.items() if k not in VOLATILE}

        return self.process.poll() is None and plain(env) == plain(self.env)

    def run(
        self,
        script: Path,
        argv: Sequence[str],
        preload: Sequence[str],
        timeout: float,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``script argv`` in a forked child (the server imports ``preload`` first); killed after ``timeout`` s."""
        assert self.process.stdin is not None and self.process.stdout is not None
        with tempfile.TemporaryDirectory(prefix="bench-fork-") as where:
            out, err = Path(where, "stdout"), Path(where, "stderr")
            request = {
                "script": str(script),
                "argv": list(argv),
                "env": dict(os.environ),
                "cwd": os.getcwd(),
                "out": str(out),
                "err": str(err),
                "preload": list(preload),
            }
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            deadline = time.monotonic() + timeout
            pid = self._reply(deadline, None)["pid"]
            done = self._reply(deadline, pid)
            self.cpu += done["cpu"]
            return subprocess.CompletedProcess(
                [sys.executable, str(script), *argv],
                done["code"],
                out.read_text(errors="replace"),
                err.read_text(errors="replace"),
            )

    def _reply(self, deadline: float, pid: int | None) -> dict[str, Any]:
        """The server's next line; past the deadline the child is killed (its code then says so)."""
        assert self.process.stdout is not None
        stdout = self.process.stdout
        killed = False
        while True:
            left = deadline - time.monotonic()
            readable, _, _ = select.select([stdout], [], [], max(0.0, left) if not killed else None)
            if readable:
                line = stdout.readline()
                if not line:
                    raise RuntimeError("the bench fork server ended")
                found: dict[str, Any] = json.loads(line)
                if killed:
                    raise subprocess.TimeoutExpired([str(pid)], 0)
                return found
            if pid is None:
                raise RuntimeError("the bench fork server did not fork in time")
            os.kill(pid, signal.SIGKILL)
            killed = True

    def close(self) -> None:
        """Stop the server and reap it (the children's CPU then counts in this process)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


_server: dict[str, BenchServer] = {}


def run_script(
    script: Path, argv: Sequence[str], preload: Sequence[str] = (), timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """``python script argv`` with its output captured: forked from this process's server, or plain (see module doc)."""
    if os.environ.get(SWITCH) != "0":
        server = _server.get("running")
        if server is None or server.process.poll() is not None:
            server = _server["running"] = BenchServer()
        if server.serves(os.environ):
            return server.run(script, argv, preload, timeout)
    command = [sys.executable, str(script), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def stop() -> None:
    """Stop this process's server if one was started (tests/bench/conftest.py, at the session's end)."""
    server = _server.pop("running", None)
    if server is not None:
        server.close()
