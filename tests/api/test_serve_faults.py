"""Storage faults under a real ``flowmem serve`` (issue 24 §4): an answer each, never a crash.

The files are made immutable for real with ``chattr +i`` (root on ext4 or another
file system with inode attributes; skipped elsewhere): SQLite maps ``-shm`` and
writes it through the mapping, so before docs/decisions/0046 the next append killed
the server with SIGBUS, or answered the generic ``store_error``. A database locked
by another process (``BEGIN EXCLUSIVE`` held) is refused ``store_locked`` within
the 5 s bound, where the append waited 65 s for ``store_busy``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.test_serve import admin_token
from tests.served import flowmem_serve, stop_serve
from tests.store.test_faults import can_seal, sealed  # noqa: F401 (can_seal: a fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def tmp_path(disk_tmp_path: Path) -> Path:
    """On a disk: ``chattr +i`` needs inode attributes, the tests' RAM tmpfs has none (conftest)."""
    return disk_tmp_path


NOTE = {"messages": {"role": "user", "content": "kept"}}
MORE = {"messages": {"role": "user", "content": "more"}}


def _error(answer: httpx.Response) -> tuple[int, str, str]:
    body = answer.json()["error"]
    return answer.status_code, body["code"], body["message"]


SEALED = {
    "every-file": ("", "-wal", "-shm", "-writers"),  # the SIGBUS of the finding
    "database-and-wal": ("", "-wal"),  # was 503 store_error, readiness too
    "shm-only": ("-shm",),  # the mapped file alone: SIGBUS too
}


@pytest.mark.usefixtures("can_seal")
@pytest.mark.parametrize("which", sorted(SEALED))
def test_an_immutable_database_answers_store_read_only_serves_reads_and_never_dies(
    tmp_path: Path, which: str
) -> None:
    db = tmp_path / "faults.db"
    files = [Path(f"{db}{suffix}") for suffix in SEALED[which]]
    with flowmem_serve(["--database", f"sqlite:///{db}"], tmp_path) as (base, out, process):
        headers = {"Authorization": f"Bearer {admin_token(out)}"}
        client = httpx.Client(base_url=base, headers=headers, timeout=30)
        assert client.post("/v1/buffers/user/notes", json=NOTE).status_code == 200
        with sealed(files):
            status, code, message = _error(client.post("/v1/buffers/user/notes", json=MORE))
            assert (status, code) == (503, "store_read_only") and "read-only" in message
            put = client.put("/v1/memory/user/topic", json={"value": 1})
            assert _error(put)[:2] == (503, "store_read_only")
            read = client.get("/v1/buffers/user/notes")
            assert read.status_code == 200 and [m["content"] for m in read.json()["messages"]] == [
                "kept"
            ]
            assert _error(client.get("/health/store"))[:2] == (503, "store_read_only")
            assert process.poll() is None  # alive
        # writable again: the store takes writes at once
        assert client.post("/v1/buffers/user/notes", json=MORE).status_code == 200
        assert client.get("/v1/buffers/user/notes").json()["count"] == 2
        # sealed again, and stopped while sealed: a clean exit, not SIGBUS at the last close
        with sealed(files):
            assert _error(client.post("/v1/buffers/user/notes", json=MORE))[1] == "store_read_only"
            stop_serve(process)
            assert process.returncode in (0, -signal.SIGTERM), process.returncode
        client.close()
    log = out.with_suffix(".err").read_text()
    assert "Traceback" not in log
    assert "request refused (store_read_only)" in log
    if "-shm" in SEALED[which]:  # the mapped file: the store took only reads until writable
        assert "takes only reads until it is writable again" in log


def _hold_exclusive(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    """Another process holding the database's write lock (``BEGIN EXCLUSIVE``) for ``seconds``."""
    script = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        "print('held', flush=True)\n"
        f"time.sleep({seconds})\n"
        "c.execute('COMMIT')\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


def test_a_database_locked_by_another_process_is_refused_store_locked_within_the_bound(
    tmp_path: Path,
) -> None:
    db = tmp_path / "locked.db"
    with flowmem_serve(["--database", f"sqlite:///{db}"], tmp_path) as (base, out, _):
        headers = {"Authorization": f"Bearer {admin_token(out)}"}
        client = httpx.Client(base_url=base, headers=headers, timeout=120)
        assert client.post("/v1/buffers/user/notes", json=NOTE).status_code == 200
        holder = _hold_exclusive(db, 30)
        try:
            started = time.monotonic()
            answer = client.post("/v1/buffers/user/notes", json=MORE)
            waited = time.monotonic() - started
            status, code, message = _error(answer)
            assert (status, code) == (503, "store_locked")
            assert "another process" in message and "nothing was written" in message
            assert 4.5 <= waited < 8.0, waited  # the 5 s lock_timeout, not 65 s
            # reads go on meanwhile (WAL)
            assert client.get("/v1/buffers/user/notes").json()["count"] == 1
        finally:
            holder.kill()
            holder.wait(30)
        assert client.post("/v1/buffers/user/notes", json=MORE).json()["count"] == 2
        client.close()
    log = out.with_suffix(".err").read_text()
    assert "store_locked" in log and "Traceback" not in log
