"""``flowmem mcp`` processes forked from a server that imported flowmem's CLI and the MCP SDK once.

Each ``flowmem mcp`` a test starts as a new interpreter imports the MCP SDK first
(~0.85 s of CPU a process, most of its start), and one over PostgreSQL psycopg
(0.24 s). ``ForkServer`` imports them once (no connection opened); a
client's command is then a small launcher (``python -I -S``, no site, no imports but
the standard library's) that hands its stdin, stdout and stderr to the server over a
Unix socket: the server forks a child that takes them as its own, sets the environment
and argv the launcher was given and runs ``flowmem.cli.main`` as the console script
would. The child is its own process (its own memory, its own connections, opened after
the fork: the server opens no store); the SDK's client speaks to it over the launcher's
pipes exactly as to a ``flowmem mcp`` it started itself, and the launcher exits with the
child's exit code once the child ends (decision 0200). The server waits for every child
it forked, and ``close`` reaps the server, so their CPU counts in the test's process.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

LAUNCHER = """
import array, json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
spec = json.dumps({"argv": sys.argv[2:], "env": dict(os.environ), "cwd": os.getcwd()}).encode()
s.sendmsg([len(spec).to_bytes(8, "big") + spec], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
os.close(0); os.close(1)
code = s.recv(8)
sys.exit(int.from_bytes(code, "big", signed=True) if len(code) == 8 else 1)
"""
"""The command a client starts: its stdio to the server, then the forked child's exit code."""

SERVER = """
import os, signal, socket, sys
import flowmem.cli, flowmem.cli.mcp, flowmem.mcp.stdio, flowmem.mcp.bridge, mcp
try:  # what a child over PostgreSQL imports (0.24 s of CPU each): none opens a connection here
    import flowmem.store.postgres
except ImportError:  # no psycopg: the SQLite children need none
    pass
import gc
gc.collect()
gc.freeze()  # the children's collections skip what the imports left (as tests/forking.py, decision 0188)
sys.path.insert(0, {root!r})
from tests.mcp.forked import serve_forever
serve_forever(sys.argv[1])
"""
"""The server: flowmem's CLI, the MCP SDK and flowmem's PostgreSQL store imported, then forking on each launcher's request."""


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    """A launcher's request: its argv and environment, and its stdin, stdout and stderr."""
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    size = int.from_bytes(data[:8], "big")
    body = data[8:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise EOFError("the launcher closed its request")
        body += more
    return json.loads(body), list(fds)


def _child(conn: socket.socket, spec: dict[str, object], fds: list[int]) -> None:
    """In the forked child: take the launcher's stdio, argv, environment and directory, run the CLI, send the exit code."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    env = spec["env"]
    argv = spec["argv"]
    assert isinstance(env, dict) and isinstance(argv, list)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(str(spec["cwd"]))
    sys.argv = ["flowmem", *argv]
    code = 1
    try:
        from flowmem.cli import main

        main()
        code = 0
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else (0 if exited.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    try:
        conn.sendall(code.to_bytes(8, "big", signed=True))
    finally:
        os._exit(code)


def serve_forever(path: str) -> None:
    """Fork a child for each launcher connecting to ``path``; wait for every child; end when stdin closes."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(0.2)
    children: set[int] = set()
    print("ready", flush=True)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            conn = None
        while children:  # reap the children that ended (their CPU then counts in this process)
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
        if conn is None:
            if os.getppid() == 1 or _stdin_closed():
                break
            continue
        conn.settimeout(None)
        spec, fds = _receive(conn)
        pid = os.fork()
        if pid == 0:
            listener.close()
            _child(conn, spec, fds)
        children.add(pid)
        for fd in fds:
            os.close(fd)
        conn.close()
    for pid in children:
        os.waitpid(pid, 0)


def _stdin_closed() -> bool:
    """Whether the test closed the server's stdin (its signal to stop)."""
    import select

    readable, _, _ = select.select([0], [], [], 0)
    return bool(readable) and os.read(0, 1) == b""


class ForkServer:
    """A running fork server: ``command`` is what a client starts for ``flowmem ARGS``."""

    def __init__(self, root: Path) -> None:
        if len(str(root)) > 90:  # a Unix socket's path holds 107 bytes at most
            root = Path(tempfile.mkdtemp(prefix="fm-forks-", dir="/tmp"))
        self.path = str(root / "fork.sock")
        repo = str(Path(__file__).resolve().parents[2])
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER.format(root=repo), self.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if ready != b"ready\n":
            self.close()
            raise RuntimeError(f"the fork server did not start: {ready!r}")

    def command(self, *args: str) -> list[str]:
        """The command of one ``flowmem ARGS`` process forked from this server."""
        return [sys.executable, "-I", "-S", "-c", LAUNCHER, self.path, *args]

    def close(self) -> None:
        """Stop the server once its children ended, and reap it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a child that never ended: stop the server anyway
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
