"""Readiness and storage failures over HTTP: a full disk, a read-only or damaged database.

``/health/store`` writes a small record and reads it back, so it answers 503/507
with the cause when writes fail, where a read-only probe answered 200. Each
condition has its own code and a message that names it. A failed group-commit
fsync (docs/decisions/0019) answers the committed write as done.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.api import create_app
from flowmem.api import errors as api_errors
from flowmem.api.app import HEALTH_PROBE
from flowmem.errors import StoreFullError
from flowmem.store import Address, MemoryStore, open_store
from flowmem.store.sqlite import SqliteStore
from tests.api.helpers import make_tokens
from tests.api.transport import OneHopClient
from tests.store.test_faults import KEY, capped_store, corrupt, page_count, read_only_store

NOTE = {"messages": {"role": "user", "content": "remember this"}}


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A closed SQLite file with the schema, the test tokens and alice's one note."""
    path = tmp_path / "api.db"
    store = open_store(f"sqlite:///{path}")
    tokens = make_tokens(store)
    with OneHopClient(create_app(store)) as client:
        headers = {"Authorization": f"Bearer {tokens['alice']}"}
        assert client.post("/v1/buffers/user/notes", headers=headers, json=NOTE).status_code == 200
    store.close()
    return path, headers


def error_of(response: Any) -> tuple[int, str, str]:
    """(status, code, message) of an error response."""
    body = response.json()["error"]
    return response.status_code, body["code"], body["message"]


def test_readiness_writes_a_record_and_reads_it_back() -> None:
    store = MemoryStore()
    with OneHopClient(create_app(store, clock=lambda: 1000.0)) as client:
        assert client.get("/health/store").json()["status"] == "ok"
    found, value = store.get_record(HEALTH_PROBE, 1000.0)
    assert found and value == {"checked_at": 1000.0}


def test_a_full_database_is_507_store_full_and_nothing_is_written(
    db: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, headers = db
    store = capped_store(path, page_count(path))
    big = {"messages": {"role": "user", "content": "x" * 200_000}}
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        status, code, message = error_of(
            client.post("/v1/buffers/user/notes", headers=headers, json=big)
        )
        assert (status, code) == (507, "store_full") and "full" in message
        assert client.get("/v1/buffers/user/notes", headers=headers).json()["count"] == 1
        # a write refused as full fails readiness for a while, though the probe's small
        # write still fits; then the probe decides again
        assert error_of(client.get("/health/store"))[:2] == (507, "store_full")
        monkeypatch.setattr(api_errors, "STORE_FAULT_WINDOW", 0.0)
        client.post("/v1/buffers/user/notes", headers=headers, json=big)
        assert client.get("/health/store").status_code == 200
    store.close()


def test_a_read_only_database_fails_readiness_with_its_own_code(
    db: tuple[Path, dict[str, str]],
) -> None:
    path, headers = db
    store = read_only_store(path)
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        status, code, message = error_of(client.get("/health/store"))
        assert (status, code) == (503, "store_read_only") and "read-only" in message
        put = client.put("/v1/memory/user/k", headers=headers, json={"value": 1})
        assert error_of(put)[:2] == (503, "store_read_only")
        assert client.get("/v1/buffers/user/notes", headers=headers).json()["count"] == 1
    store.close()


def test_a_corrupted_database_fails_readiness_with_store_corrupt(
    db: tuple[Path, dict[str, str]],
) -> None:
    path, _ = db
    corrupt(path)
    store = open_store(f"sqlite:///{path}")
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        status, code, message = error_of(client.get("/health/store"))
        assert (status, code) == (503, "store_corrupt") and "damaged" in message
    store.close()


def test_damage_met_by_any_request_keeps_readiness_failing(
    db: tuple[Path, dict[str, str]],
) -> None:
    path, headers = db
    corrupt(path, tables=("buffers", "buffer_rows", "buffer_calls", "buffer_answers"))
    store = open_store(f"sqlite:///{path}")
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        assert client.get("/health/store").status_code == 200  # the probe's table is intact
        append = client.post("/v1/buffers/user/notes", headers=headers, json=NOTE)
        assert error_of(append)[:2] == (503, "store_corrupt")
        assert error_of(client.get("/health/store"))[:2] == (503, "store_corrupt")
    store.close()


def test_readiness_reports_a_full_store_as_507() -> None:
    class Full(MemoryStore):
        def put_record(self, address: Address, value: Any, expires_at: float | None) -> None:
            raise StoreFullError("no space left on device")

    with OneHopClient(create_app(Full()), raise_server_exceptions=False) as client:
        assert error_of(client.get("/health/store"))[:2] == (507, "store_full")


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (needs the right to mount: root in the test container; skipped otherwise)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if os.geteuid() != 0 or done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_507_and_readiness_says_so(tiny_disk: Path) -> None:
    store = open_store(f"sqlite:///{tiny_disk / 'full.db'}")
    tokens = make_tokens(store)
    headers = {"Authorization": f"Bearer {tokens['alice']}"}
    chunk = {"messages": {"role": "user", "content": "y" * 100_000}}
    try:
        with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
            assert client.get("/health/store").status_code == 200
            for _ in range(100):
                response = client.post("/v1/buffers/user/notes", headers=headers, json=chunk)
                if response.status_code != 200:
                    break
            status, code, message = error_of(response)
            assert (status, code) == (507, "store_full") and "full" in message
            count = client.get("/v1/buffers/user/notes", headers=headers).json()["count"]
            assert error_of(client.get("/health/store"))[:2] == (507, "store_full")
            # the refused append changed nothing; every acknowledged one is there
            assert client.get("/v1/buffers/user/notes", headers=headers).json()["count"] == count
    finally:
        store.close()


def test_a_failed_group_commit_fsync_answers_the_committed_write_as_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/decisions/0019: the write is visible, so its request is not refused; the next
    write is not deferred again but synced by SQLite's own commit."""
    store = SqliteStore(f"sqlite:///{tmp_path / 'sync.db'}")
    tokens = make_tokens(store)
    headers = {"Authorization": f"Bearer {tokens['alice']}"}
    failures: list[int] = []

    def failing_fdatasync(fd: int) -> None:
        failures.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
        with caplog.at_level(logging.ERROR, logger="flowmem"):
            first = client.post("/v1/buffers/user/notes", headers=headers, json=NOTE)
        assert failures, "the append was not deferred to the group-commit fsync"
        assert first.status_code == 200 and first.json()["appended"] == 1
        assert any("fsync of committed writes failed" in r.getMessage() for r in caplog.records)
        assert store.group_commit.failed and store.sync_barrier() is None
        # the next write is not deferred (it would be answered before a failing fsync):
        # it runs in a thread and commits with SQLite's own fsync, which works
        second = client.post("/v1/buffers/user/notes", headers=headers, json=NOTE)
        assert second.status_code == 200 and len(failures) == 1
        assert not store.group_commit.failed and store.sync_barrier() is None
        assert client.get("/v1/buffers/user/notes", headers=headers).json()["count"] == 2
    store.close()


@pytest.mark.postgres
def test_postgres_disk_full_is_507_and_fails_readiness(postgres_db_url: str) -> None:
    import psycopg

    store = open_store(postgres_db_url)
    tokens = make_tokens(store)
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'could not extend file' USING ERRCODE = '53100'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON records "
            "FOR EACH ROW EXECUTE FUNCTION full_disk()"
        )
    headers = {"Authorization": f"Bearer {tokens['alice']}"}
    try:
        with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
            assert error_of(client.get("/health/store"))[:2] == (507, "store_full")
            put = client.put("/v1/memory/user/k", headers=headers, json={"value": 1})
            assert error_of(put)[:2] == (507, "store_full")
            assert store.get_record(KEY, 0) == (False, None)
    finally:
        store.close()
