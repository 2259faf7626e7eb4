"""End to end: a real ``flowmem serve`` on a free loopback port, started by the test."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from flowmem.api.app import DATABASE_ENV as APP_DATABASE_ENV
from flowmem.cli.database import DATABASE_ENV, redact
from flowmem.cli.errors import EXIT_CANNOT_LISTEN
from tests.served import flowmem_serve, run_flowmem

pytestmark = pytest.mark.slow

TOKEN_FILE_LINE = re.compile(r"admin token written to (\S+)")


def admin_token(out: Path) -> str:
    """The first start's admin token: stdout is a file here, so it went to a private file."""
    found = TOKEN_FILE_LINE.search(out.read_text())
    if found is None:
        raise AssertionError(f"no admin token file named: {out.read_text()!r}")
    return (out.parent / found.group(1)).read_text().strip()


def run_cli(args: list[str], cwd: Path) -> str:
    done = run_flowmem(args, cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_env_variable_is_shared() -> None:
    assert DATABASE_ENV == APP_DATABASE_ENV
    assert redact("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redact("sqlite:////x.db") == "sqlite:////x.db"


def test_serve_sqlite_end_to_end(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/flowmem.db"
    with flowmem_serve([], tmp_path) as (base, out, process):
        token = admin_token(out)
        assert (tmp_path / "flowmem.db").exists()  # the default database file
        admin = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"})
        assert httpx.get(f"{base}/v1/sessions").status_code == 401
        session = admin.post("/v1/sessions", json={"name": "smoke"}).json()
        turn = admin.post(f"/v1/sessions/{session['id']}/turns", json={"content": "hi"})
        assert turn.status_code == 202
        appended = admin.post(
            "/v1/buffers/user/notes", json={"messages": {"role": "user", "content": "remember"}}
        ).json()
        assert appended["appended"] == 1 and appended["resolved_scope_id"] == "admin"
        assert admin.get("/v1/buffers/user/notes").json()["count"] == 1

        bob_token = run_cli(["token", "create", "--user", "bob", "--database", db], tmp_path)
        bob = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {bob_token.strip()}"})
        assert bob.get(f"/v1/sessions/{session['id']}").status_code == 404
        assert bob.get("/v1/buffers/user/notes").json()["count"] == 0
        listed = run_cli(["token", "list", "--json", "--database", db], tmp_path)
        bob_id = next(line for line in listed.splitlines() if '"bob"' in line).split('"')[3]
        run_cli(["token", "revoke", bob_id, "--database", db], tmp_path)
        assert bob.get("/v1/sessions").status_code == 401

        process.send_signal(signal.SIGTERM)
        # uvicorn re-raises the signal after its graceful shutdown
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)
        assert "Finished server process" in (out.with_suffix(".err")).read_text()
    # a second start on the same database prints no new token and keeps the data
    with flowmem_serve([], tmp_path) as (base, out, _):
        assert "admin token" not in out.read_text()
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"})
        assert client.get("/v1/buffers/user/notes").json()["count"] == 1
        messages = client.get(f"/v1/sessions/{session['id']}/messages").json()["data"]
        assert [m["content"] for m in messages] == ["hi"]


def test_serve_no_inline_store_keeps_store_calls_in_threads_and_works(tmp_path: Path) -> None:
    args = ["--no-inline-store", "--store-concurrency", "2"]
    with flowmem_serve(args, tmp_path) as (base, out, _):
        client = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {admin_token(out)}"}
        )
        message = {"messages": {"role": "user", "content": "hi"}}
        assert client.post("/v1/buffers/user/notes", json=message).json()["appended"] == 1
        assert client.get("/v1/buffers/user/notes").json()["count"] == 1


def test_first_start_writes_the_admin_token_to_a_private_file_and_prints_only_its_path(
    tmp_path: Path,
) -> None:
    with flowmem_serve([], tmp_path) as (base, out, _):
        token = admin_token(out)
        token_file = tmp_path / "flowmem-admin-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert token not in out.read_text() and token not in out.with_suffix(".err").read_text()
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/v1/sessions", headers=headers).status_code == 200


def test_first_start_on_a_terminal_prints_the_token_exactly_once(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    seen = b""
    try:
        with flowmem_serve([], tmp_path, stdout=secondary):
            os.close(secondary)
            deadline = time.monotonic() + 60
            while b"try: curl" not in seen and time.monotonic() < deadline:
                if select.select([primary], [], [], 0.5)[0]:
                    seen += os.read(primary, 4096)
    finally:
        os.close(primary)
    text = seen.decode()
    token = re.search(r"admin token: (fm_\S+)", text)
    assert token is not None, text
    assert text.count(token.group(1)) == 1, text
    assert not (tmp_path / "flowmem-admin-token").exists()


def test_a_first_start_that_cannot_listen_creates_no_token(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_flowmem(
            ["serve", "--port", str(port)],
            tmp_path,
        )
    assert done.returncode == EXIT_CANNOT_LISTEN, done.stderr
    assert "cannot listen" in done.stderr and "flowmem token create --admin" in done.stderr
    assert "admin token" not in done.stdout
    assert not (tmp_path / "flowmem-admin-token").exists()
    listed = run_cli(["token", "list", "--database", f"sqlite:///{tmp_path}/flowmem.db"], tmp_path)
    assert listed == ""  # the next start still bootstraps


@pytest.mark.parametrize("workers", ["1", "2"])  # two: refused before any worker starts
def test_a_later_start_on_a_busy_port_exits_with_the_cannot_listen_code(
    tmp_path: Path, workers: str
) -> None:
    db = f"sqlite:///{tmp_path}/flowmem.db"
    run_cli(["token", "create", "--user", "ana", "--admin", "--database", db], tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_flowmem(
            ["serve", "--port", str(port), "--workers", workers, "--database", db],
            tmp_path,
        )
    assert done.returncode == EXIT_CANNOT_LISTEN, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize("workers", ["1", "2"])  # uvicorn binds one; flowmem binds for two
def test_a_port_taken_between_the_check_and_the_bind_exits_with_the_cannot_listen_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    from click.testing import CliRunner

    from flowmem.cli import cli
    from flowmem.cli import serve as serve_module

    db = f"sqlite:///{tmp_path}/flowmem.db"
    run_cli(["token", "create", "--user", "ana", "--admin", "--database", db], tmp_path)
    real_check = serve_module.check_listenable
    checks: list[int] = []

    def free_at_first(host: str, port: int) -> None:
        checks.append(port)  # the first check sees the port free: another process takes it after
        if len(checks) > 1:
            real_check(host, port)

    monkeypatch.setattr(serve_module, "check_listenable", free_at_first)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            cli, ["serve", "--port", str(port), "--workers", workers, "--database", db]
        )
    assert result.exit_code == EXIT_CANNOT_LISTEN, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert len(checks) == (2 if workers == "1" else 1)  # flowmem's own bind needs no re-check


def test_a_start_without_an_admin_token_says_how_to_create_one(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/flowmem.db"
    run_cli(["token", "create", "--user", "bob", "--database", db], tmp_path)
    with flowmem_serve([], tmp_path) as (_, out, _):
        err = out.with_suffix(".err").read_text()
        assert "no admin token exists: create one with `flowmem token create --admin`" in err
        assert "admin token written" not in out.read_text()


def test_serve_refuses_workers_on_memory(tmp_path: Path) -> None:
    done = run_flowmem(
        ["serve", "--database", "memory://", "--workers", "2"],
        tmp_path,
    )
    assert done.returncode != 0
    assert "--workers" in done.stderr


@pytest.mark.postgres
def test_mem_12_serve_two_workers_on_postgres(tmp_path: Path, postgres_db_url: str) -> None:
    with flowmem_serve(
        ["--workers", "2", "--database", postgres_db_url, "--no-access-log"], tmp_path
    ) as (
        base,
        out,
        _,
    ):
        token = admin_token(out)
        headers = {"Authorization": f"Bearer {token}"}

        def append(n: int) -> int:
            with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
                for i in range(20):
                    response = client.post(
                        "/v1/buffers/global/shared",
                        json={
                            "messages": {"role": "user", "content": f"{n}-{i}"},
                            "return_messages": False,
                        },
                    )
                    assert response.status_code == 200, response.text
            return n

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(append, range(8)))
        loaded = httpx.get(f"{base}/v1/buffers/global/shared", headers=headers).json()
        contents = [m["content"] for m in loaded["messages"]]
        assert loaded["count"] == 160
        assert sorted(contents) == sorted(f"{n}-{i}" for n in range(8) for i in range(20))


def test_graceful_shutdown_keeps_every_acknowledged_append(tmp_path: Path) -> None:
    acked: list[str] = []
    with flowmem_serve(["--no-access-log"], tmp_path) as (base, out, process):
        token = admin_token(out)
        headers = {"Authorization": f"Bearer {token}"}
        stop = time.monotonic() + 1.0

        def hammer(n: int) -> None:
            with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
                i = 0
                while True:
                    content = f"{n}-{i}"
                    try:
                        response = client.post(
                            "/v1/buffers/user/log",
                            json={
                                "messages": {"role": "user", "content": content},
                                "return_messages": False,
                            },
                        )
                    except httpx.HTTPError:
                        return  # the server stopped accepting: fine
                    assert response.status_code < 500, response.text
                    if response.status_code == 200:
                        acked.append(content)
                    i += 1
                    if time.monotonic() > stop + 5:
                        return

        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(hammer, n) for n in range(4)]
            while time.monotonic() < stop:
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            for future in futures:
                future.result()
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)
    assert acked
    with flowmem_serve([], tmp_path) as (base, _, _):
        loaded = httpx.get(
            f"{base}/v1/buffers/user/log", headers={"Authorization": f"Bearer {token}"}
        ).json()
    stored = [m["content"] for m in loaded["messages"]]
    assert len(stored) == len(set(stored))
    assert set(acked) <= set(stored)
