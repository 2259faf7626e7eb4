"""``flowmem serve`` from a venv, to a ready ``/health``, and the routes a new user opens first."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.packaging.steps import StepFailed, clean_env

TOKEN = re.compile(r"fm_[A-Za-z0-9_\-]+")


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get(url: str, token: str | None = None) -> tuple[int, str]:
    """GET ``url``: its status and body (an HTTP error's too)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


@dataclass(frozen=True)
class Serve:
    """``flowmem serve`` on a fresh SQLite file, with a model configured (turns build the runtime).

    Ready when ``/health`` answers ok; then ``/health/store``, ``/ui``, ``/docs``,
    ``/metrics`` and ``/v1/sessions`` (the bootstrap admin token) must answer 200, and
    SIGINT must stop it with exit 0. The model is never called.
    """

    what: str = "flowmem serve (FLOWMEM_MODEL set) answers /health, /ui, /docs, /metrics and /v1/sessions"
    env: dict[str, str] = field(default_factory=lambda: {
        "FLOWMEM_MODEL": "packaging-check", "FLOWMEM_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
        "FLOWMEM_API_KEY": "unused",
    })  # fmt: skip
    startup: float = 60

    def run(self, venv: Path, workdir: Path) -> str:
        """Start, probe and stop the server; what it printed, or StepFailed."""
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        argv = [str(venv / "bin" / "flowmem"), "serve", "--port", str(port), "--database", "sqlite:///served.db"]
        log = workdir / "serve.log"
        with log.open("w") as out:
            server = subprocess.Popen(argv, cwd=workdir, env={**clean_env(venv), **self.env},
                                      stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        try:
            self._probe(base, server, workdir, log)
        finally:
            if server.poll() is None:
                server.send_signal(signal.SIGINT)
            try:
                code = server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                code = server.wait()
        output = log.read_text()
        if code != 0 or "Traceback (most recent call last)" in output:
            raise StepFailed(f"{self.what}: exit {code} after SIGINT\n{output[-3000:]}")
        return output

    def _probe(self, base: str, server: subprocess.Popen[bytes], workdir: Path, log: Path) -> None:
        """Wait for /health, then ask each route; StepFailed with the server's output otherwise."""
        deadline = time.monotonic() + self.startup
        while True:
            if server.poll() is not None:
                raise StepFailed(f"{self.what}: the server exited {server.returncode}\n{log.read_text()[-3000:]}")
            try:
                status, body = get(f"{base}/health")
                if status == 200 and json.loads(body)["status"] == "ok":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise StepFailed(f"{self.what}: no /health in {self.startup:.0f} s\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        found = TOKEN.search((workdir / "flowmem-admin-token").read_text())
        if found is None:
            raise StepFailed(f"{self.what}: no admin token in flowmem-admin-token")
        token = found.group(0)
        wrong = []
        for path, text, auth in [("/health/store", '"ok"', None), ("/ui", "<html", None),
                                 ("/docs", "swagger", None), ("/metrics", "flowmem_", token),
                                 ("/v1/sessions", "\"data\"", token)]:  # fmt: skip
            status, body = get(base + path, auth)
            if status != 200 or (text not in body.lower() and text not in body):
                wrong.append(f"GET {path}: {status} {body[:200]!r}")
        if wrong:
            raise StepFailed(f"{self.what}:\n    " + "\n    ".join(wrong) + f"\n{log.read_text()[-2000:]}")
