"""``python -c CODE ARGS`` processes forked from a server that imported their modules once.

A test that starts ``flowmem serve`` (tests/served.py) starts a new interpreter that
imports flowmem, FastAPI, uvicorn… before it serves (~0.9–1.2 s of CPU a start).
``ForkServer`` is one interpreter, started with the environment of the processes it
will fork, that imports ``PRELOAD`` once (with the collector off, then collected and
frozen with ``gc.freeze``: decision 0188) and forks a child per start. The child is
what ``python -c CODE ARGS`` would be: its own session and process group
(``os.setsid``, as ``start_new_session=True``), the caller's stdin, stdout and stderr
(file descriptors handed over a Unix socket), environment, directory and argv, the
interpreter's ``sys.path`` and a clean ``__main__``, SIGINT as ``KeyboardInterrupt`` and
every other signal at its default; it runs CODE and exits as the interpreter exits
(``sys.exit``'s code, 1 and the traceback on an uncaught exception, non-daemon threads
joined and ``atexit`` handlers run; a signal's death stays one, ``-N``). ``Forked`` is
the caller's handle, a ``subprocess.Popen`` for what the tests use of one (``pid``,
``poll``, ``wait``, ``returncode``, ``send_signal``, ``terminate``, ``kill``); the
server reaps each child and sends its exit status and CPU, and is reaped itself by
``stop`` (a session fixture, tests/conftest.py), so the children's CPU counts in the
test process.

The seam (decision 0208): a server forks only for an environment it could have been
started with: the same values as its own for every variable an import read while it
preloaded (recorded as the imports ran) and for those an interpreter reads when it
starts (``PYTHON*``, the locale's, ``HOME``, ``PATH``, ``TMPDIR``, ``TZ``). An import
that read a variable ``flowmem serve`` sets for itself (``FLOWMEM_*``, prometheus'
directory) would make every fork differ from a fresh start: such a server forks
nothing. Any other environment gets a server of its own (``SERVERS`` at most), else
the plain subprocess; ``FLOWMEM_TEST_SERVE_FORK=0`` always runs the plain subprocess.
"""

from __future__ import annotations

import array
import contextlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
SWITCH = "FLOWMEM_TEST_SERVE_FORK"
"""``0`` runs every ``flowmem`` process as a plain subprocess (the seam's plain path)."""
SERVERS = 3
"""Fork servers a test process keeps at most (one per distinct import environment)."""
PRELOAD = (
    "flowmem.cli",
    "flowmem.cli.serve",
    "flowmem.api.app",
    "flowmem.runtime",
    "flowmem.runtime.serving",
    "flowmem.mcp.caller",
    "flowmem.mcp.on_demand",
    "encodings.idna",
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
    "swagger_ui_bundle",
    "fastapi.telemetry._runtime",
    "anyio._backends._asyncio",
    "anyio._core._sockets",
    "anyio._core._streams",
)
"""What ``flowmem serve`` imports before it answers (``python -X importtime``), prometheus_client apart.

prometheus_client picks its value class from ``PROMETHEUS_MULTIPROC_DIR`` when it is
imported, a variable ``flowmem serve`` sets itself: its children import it themselves.
"""
STARTUP = ("HOME", "PATH", "TMPDIR", "TZ", "LANG", "LANGUAGE")
"""Variables an interpreter (or a cached lookup such as ``tempfile``'s) reads as it starts, beside ``PYTHON*``/``LC_*``."""
SERVER = """
import sys
base = list(sys.path)
sys.path.insert(0, {root!r})
from tests.forking import serve
serve(int(sys.argv[1]), base)
"""
"""The server: ``sys.path`` kept as an interpreter's, then the preloads and the request loop."""


def _startup(name: str) -> bool:
    return name in STARTUP or name.startswith(("PYTHON", "LC_"))


def _own(name: str) -> bool:
    """A variable ``flowmem serve`` (or its metrics directory) sets for itself."""
    return name.startswith("FLOWMEM_") or name.upper() == "PROMETHEUS_MULTIPROC_DIR"


def preload(names: Sequence[str], imported: set[str] | None = None) -> None:
    """Import ``names`` (those not yet in ``imported``) with the collector off, then collect and freeze what they made."""
    import gc
    import importlib

    fresh = [name for name in names if imported is None or name not in imported]
    if not fresh:
        return
    gc.disable()  # the imports' own collections would scan what they made (~15 % of their CPU)
    try:
        for name in fresh:
            if imported is not None:
                imported.add(name)
            # a module not installed or failing: the child finds out as a fresh interpreter would
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()


def exit_as_interpreter(run: Callable[[], object]) -> NoReturn:
    """Call ``run`` and end the process as the interpreter ends after its main module."""
    import atexit
    import threading
    import traceback

    code, interrupted = 1, False
    try:
        run()
        code = 0
    except SystemExit as exited:
        if exited.code is None:
            code = 0
        elif isinstance(exited.code, int):
            code = exited.code
        else:
            print(exited.code, file=sys.stderr)
    except BaseException as error:  # as the interpreter: the traceback, exit code 1
        frames = error.__traceback__  # without this module's frames
        while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
            frames = frames.tb_next
        traceback.print_exception(type(error), error, frames)
        interrupted = isinstance(error, KeyboardInterrupt)
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads joined, as at exit
        atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if interrupted:  # an uncaught KeyboardInterrupt ends an interpreter by SIGINT (-2)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code & 0xFF)


class _Reads:
    """The environment variables read while it is active (``get``, ``in`` and ``[]``; iterating: all of them)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.everything = False
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> _Reads:
        environ = type(os.environ)
        reads, getitem, iterate = self, environ.__getitem__, environ.__iter__

        def read(self: Any, key: str) -> Any:  # Mapping's get and __contains__ call it
            reads.names.add(key)
            return getitem(self, key)

        def read_all(self: Any) -> Any:
            reads.everything = True
            return iterate(self)

        self._saved = {"__getitem__": getitem, "__iter__": iterate}
        environ.__getitem__ = read  # type: ignore[method-assign]
        environ.__iter__ = read_all  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        environ = type(os.environ)
        for name, method in self._saved.items():
            setattr(environ, name, method)


def serve(control_fd: int, base: list[str]) -> None:
    """The server's loop: answer the preloads' environment reads, then fork a child for each request."""
    import asyncio
    import threading

    import __main__

    control = socket.socket(fileno=control_fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # nothing the preloads print reaches a child's files
    os.close(null)
    with _Reads() as reads:
        preload(PRELOAD)
    clean = threading.active_count() == 1 and asyncio.events._get_running_loop() is None
    control.sendall(
        json.dumps(
            {"read": sorted(reads.names), "everything": reads.everything or not clean}
        ).encode()
    )
    main_names = {k: v for k, v in vars(__main__).items() if k.startswith("__") and k != "__file__"}
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    open_ = True
    while open_ or children:
        watched = [control.fileno(), wake_r] if open_ else [wake_r]
        readable, _, _ = select.select(watched, [], [], 1.0)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        while children:  # reap the children that ended (their CPU then counts in this process)
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = children.pop(pid)
            done = {
                "code": os.waitstatus_to_exitcode(status),
                "cpu": usage.ru_utime + usage.ru_stime,
            }
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(done).encode() + b"\n")
            conn.close()
        if open_ and control.fileno() in readable:
            fds = array.array("i")
            data, ancillary, _, _ = control.recvmsg(1 << 20, socket.CMSG_LEN(4 * fds.itemsize))
            if not data:  # the test process stopped the server: end what is left, then go
                open_ = False
                for pid in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                continue
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            request = json.loads(data)
            conn = socket.socket(fileno=fds[0])
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                control.close()
                for other in children.values():
                    other.close()
                conn.close()
                signal.set_wakeup_fd(-1)
                os.close(wake_r)
                os.close(wake_w)
                _child(request, list(fds[1:]), base, main_names)
            for fd in fds[1:]:
                os.close(fd)
            children[pid] = conn
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _child(
    request: dict[str, Any], stdio: list[int], base: list[str], main_names: dict[str, Any]
) -> NoReturn:
    """In the forked child: a session of its own, the caller's stdio, environment, directory and argv; run the code."""
    import __main__

    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = ["-c", *request["argv"]]
    sys.path[:] = base
    if isinstance(
        sys.stdout, io.TextIOWrapper
    ):  # line-buffered on a terminal, as an interpreter sets it up
        sys.stdout.reconfigure(line_buffering=os.isatty(1))
    namespace = vars(__main__)
    namespace.clear()
    namespace.update(main_names)
    code = compile(request["code"], "<string>", "exec")
    exit_as_interpreter(lambda: exec(code, namespace))


class Forked:
    """A child of a ``ForkServer``: what the tests use of a ``subprocess.Popen``."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.cpu = 0.0
        """The child's CPU (user + system), as the server reaped it."""
        self._conn = conn
        self._buffer = b""

    def _read(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` s for the server's word that the child ended; whether it came."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                return False
            more = self._conn.recv(4096)
            if not more:
                raise RuntimeError(f"the fork server ended before its child {self.pid}")
            self.take(more)
        return True

    def take(self, data: bytes) -> None:
        """Add what the server sent; its line saying how the child ended sets ``returncode``."""
        self._buffer += data
        if self.returncode is None and b"\n" in self._buffer:
            done = json.loads(self._buffer.split(b"\n", 1)[0])
            self.cpu = float(done["cpu"])
            self.returncode = int(done["code"])
            self._conn.close()

    def poll(self) -> int | None:
        """The exit code if the child ended, else None."""
        self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end (``subprocess.TimeoutExpired`` after ``timeout`` s); its exit code."""
        if not self._read(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child if it has not ended."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM the child."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the child."""
        self.send_signal(signal.SIGKILL)


def forked_on(conn: socket.socket, args: list[str]) -> Forked:
    """The child the server names on ``conn`` (its pid's line), as a ``Forked`` of ``args``."""
    conn.settimeout(60)
    received = b""
    while b"\n" not in received:
        more = conn.recv(4096)
        if not more:
            raise RuntimeError("the fork server ended before it forked")
        received += more
    conn.settimeout(None)
    # a child that ends at once has its exit line in the same read as its pid's
    line, rest = received.split(b"\n", 1)
    forked = Forked(args, conn, json.loads(line)["pid"])
    forked.take(rest)
    return forked


class ForkServer:
    """A running server started with ``env``, forking ``python -c CODE ARGS`` children."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER.format(root=str(ROOT)), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=self.env,
        )
        theirs.close()
        self.control.settimeout(120)
        try:
            ready = json.loads(self.control.recv(1 << 20))
        except (OSError, ValueError):
            self.close()
            raise RuntimeError("the fork server did not start") from None
        finally:
            self.control.settimeout(None)
        self.read: set[str] = set(ready["read"])
        self.everything: bool = ready["everything"]

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a child of this server is what a fresh interpreter with ``env`` would be (module doc)."""
        if self.process.poll() is not None:
            return False
        if any(_own(name) for name in self.read):
            return False
        if self.everything:
            return dict(env) == self.env
        names = self.read | {n for n in (*env, *self.env) if _startup(n)}
        return all(env.get(n) == self.env.get(n) for n in names)

    def start(
        self,
        code: str,
        argv: Sequence[str],
        *,
        cwd: str | Path,
        env: Mapping[str, str],
        stdio: Sequence[int],
    ) -> Forked:
        """Fork ``python -c CODE ARGV`` in ``cwd`` with ``env`` and the descriptors ``stdio`` (stdin, stdout, stderr)."""
        mine, theirs = socket.socketpair()
        request = {"code": code, "argv": list(argv), "env": dict(env), "cwd": str(cwd)}
        fds = array.array("i", [theirs.fileno(), *stdio])
        try:
            self.control.sendmsg(
                [json.dumps(request).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
            )
        finally:
            theirs.close()
        return forked_on(mine, [sys.executable, "-c", code, *argv])

    def close(self) -> None:
        """Stop the server (it kills what is left of its children) and reap it."""
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_RDWR)
        self.control.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_servers: list[ForkServer] = []


def server_for(env: Mapping[str, str]) -> ForkServer | None:
    """This process's server for ``env``: a running one that serves it, a new one, or None (the plain path)."""
    if os.environ.get(SWITCH) == "0" or env.get(SWITCH) == "0":
        return None
    _servers[:] = [server for server in _servers if server.process.poll() is None]
    for server in _servers:
        if server.serves(env):
            return server
    if len(_servers) >= SERVERS:
        return None
    server = ForkServer(env)
    _servers.append(server)
    return server if server.serves(env) else None


def popen(
    code: str,
    argv: Sequence[str],
    *,
    cwd: str | Path,
    env: Mapping[str, str],
    stdout: int | IO[Any] | None,
    stderr: int | IO[Any] | None,
) -> Forked | subprocess.Popen[bytes]:
    """``python -c CODE ARGV`` in a session of its own: forked from a server for ``env``, or a plain subprocess."""
    server = server_for(env)
    if server is None:
        return subprocess.Popen(
            [sys.executable, "-c", code, *argv],
            cwd=cwd,
            stdout=stdout,
            stderr=stderr,
            env=dict(env),
            start_new_session=True,
        )
    with contextlib.ExitStack() as stack:
        null = os.open(os.devnull, os.O_RDONLY)
        stack.callback(os.close, null)

        def fd(stream: int | IO[Any] | None, default: int) -> int:
            if stream is None:
                return default
            return stream if isinstance(stream, int) else stream.fileno()

        return server.start(
            code, argv, cwd=cwd, env=env, stdio=[null, fd(stdout, 1), fd(stderr, 2)]
        )


def stop() -> None:
    """Stop and reap this process's servers (tests/conftest.py, at the session's end)."""
    while _servers:
        _servers.pop().close()
