"""A real ``flowmem serve`` for a test: a free loopback port, ready when /health answers, always stopped.

The one way the tests start the server as a user does (``flowmem serve`` in a
child process): ``flowmem_serve`` for a server that lives as long as a ``with``
block, ``start_serve`` / ``stop_serve`` / ``kill_serve`` for one that a test
kills and starts again. The server runs in its own process group, so stopping it
also ends the workers of ``--workers N``, even when the test failed first. It is
forked from a server that imported what ``flowmem serve`` imports (tests/forking.py,
decision 0208) where its environment allows, else started as a plain subprocess.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from tests import forking

CLI = "from flowmem.cli import main; main()"
FLOWMEM = [sys.executable, "-c", CLI]
"""``flowmem`` run by this interpreter, so it imports the checkout under test."""

READY_SECONDS = 60.0
STOP_SECONDS = 30.0


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_env() -> dict[str, str]:
    """This environment without an ambient database or model (a turn only records the user message)."""
    return {
        k: v
        for k, v in os.environ.items()
        if k != "FLOWMEM_DATABASE_URL" and not k.startswith("FLOWMEM_MODEL")
    }


class Served(NamedTuple):
    """A running server: its base URL, the file of its stdout, its process (stderr: ``err``)."""

    url: str
    out: Path
    process: subprocess.Popen[bytes] | forking.Forked

    @property
    def err(self) -> Path:
        """The file of the server's stderr."""
        return self.out.with_suffix(".err")


class ServeExited(Exception):
    """The server ended before it answered /health (its stderr is the message)."""


def _files(cwd: Path, port: int) -> Path:
    stem, n = f"serve-{port}", 1
    while (cwd / f"{stem}.err").exists():  # a restart on the same port keeps the earlier logs
        n += 1
        stem = f"serve-{port}-{n}"
    return cwd / f"{stem}.out"


def start_serve(
    args: Sequence[str],
    cwd: Path,
    *,
    port: int | None = None,
    env: dict[str, str] | None = None,
    stdout: int | None = None,
) -> Served:
    """Run ``flowmem serve --port PORT ARGS`` in ``cwd``; return once /health answers.

    ``port`` defaults to a free one, ``env`` to ``serve_env()``; stdout goes to a file
    (``Served.out``) unless ``stdout`` is a file descriptor. A server that exits first
    raises ``ServeExited``; one not ready within 60 s is killed and fails the test.
    """
    port = free_port() if port is None else port
    out = _files(cwd, port)
    with out.with_suffix(".err").open("wb") as stderr, contextlib.ExitStack() as files:
        sink = files.enter_context(out.open("wb")) if stdout is None else stdout
        process = forking.popen(  # its own process group: its workers end with it
            CLI,
            ["serve", "--port", str(port), *args],
            cwd=cwd,
            stdout=sink,
            stderr=stderr,
            env=serve_env() if env is None else env,
        )
    served = Served(f"http://127.0.0.1:{port}", out, process)
    deadline = time.monotonic() + READY_SECONDS
    try:
        while True:
            if process.poll() is not None:
                raise ServeExited(f"serve exited {process.returncode}: {served.err.read_text()}")
            try:
                if httpx.get(f"{served.url}/health", timeout=1).status_code == 200:
                    return served
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"serve did not start in {READY_SECONDS:.0f} s: {served.err.read_text()}"
                )
            time.sleep(0.1)
    except BaseException:
        kill_serve(process)
        raise


def run_flowmem(
    args: Sequence[str], cwd: Path, *, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``flowmem ARGS`` in ``cwd`` to its end, its output captured: ``subprocess.run([*FLOWMEM, *ARGS])``, forked where it can be.

    ``env`` defaults to this process's environment; past ``timeout`` s the process is
    killed and ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` does.
    """
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        process = forking.popen(
            CLI,
            args,
            cwd=cwd,
            env=dict(os.environ) if env is None else env,
            stdout=stdout,
            stderr=stderr,
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_serve(process)
            raise
        stdout.seek(0)
        stderr.seek(0)
        return subprocess.CompletedProcess(
            [*FLOWMEM, *args], code, stdout.read().decode(), stderr.read().decode()
        )


def kill_serve(process: subprocess.Popen[bytes] | forking.Forked) -> None:
    """SIGKILL the server's whole process group (no graceful shutdown) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=STOP_SECONDS)


def stop_serve(process: subprocess.Popen[bytes] | forking.Forked) -> None:
    """Stop the server with SIGTERM (graceful), then kill whatever is left of its group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_SECONDS)
    kill_serve(process)


@contextmanager
def flowmem_serve(
    args: Sequence[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    stdout: int | None = None,
) -> Iterator[Served]:
    """Run ``flowmem serve ARGS`` (see ``start_serve``) for the block; stop it however the block ends."""
    try:
        served = start_serve(args, cwd, env=env, stdout=stdout)
    except ServeExited as exited:
        pytest.fail(str(exited))
    try:
        yield served
    finally:
        stop_serve(served.process)
