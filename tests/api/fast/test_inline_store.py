"""Short store calls on the event loop (SQLite, memory), and the thread they fall back to.

A buffer append whose SQLite file another writer holds must not fail or stall the
loop: the call refuses to wait on the loop (``WouldBlock``), runs again in a worker
thread, waits there for the lock (MEM-12) and is stored exactly once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flowmem.api import create_app
from flowmem.api.app import INLINE_ENV, app_from_env
from flowmem.store import Address, open_store
from tests.api.helpers import make_tokens
from tests.api.transport import OneHopClient


def _client(url: str, **options: object) -> tuple[TestClient, dict[str, str]]:
    store = open_store(url)
    tokens = make_tokens(store)
    return OneHopClient(create_app(store, **options), raise_server_exceptions=False), tokens  # type: ignore[arg-type]


def _with_another_writer(
    tmp_path: Path,
) -> tuple[TestClient, dict[str, str], sqlite3.Connection]:
    """An app on a SQLite file, alice's headers, and a second connection to that file."""
    path = tmp_path / "held.db"
    client, tokens = _client(f"sqlite:///{path}")
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return client, {"Authorization": f"Bearer {tokens['alice']}"}, other


@pytest.mark.parametrize(
    ("url", "options", "inline"),
    [
        ("memory://", {}, True),
        ("sqlite:///{tmp}/a.db", {}, True),
        ("sqlite:///{tmp}/b.db", {"inline_store": False}, False),
    ],
)
def test_the_pool_is_inline_for_local_stores_unless_turned_off(
    tmp_path: Path, url: str, options: dict[str, object], inline: bool
) -> None:
    client, _ = _client(url.format(tmp=tmp_path), **options)
    assert client.app.state.services.pool.inline is inline  # type: ignore[attr-defined]


def test_app_from_env_reads_the_inline_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_DATABASE_URL", f"sqlite:///{tmp_path}/env.db")
    monkeypatch.setenv(INLINE_ENV, "0")
    assert app_from_env().state.services.pool.inline is False
    monkeypatch.setenv(INLINE_ENV, "1")
    assert app_from_env().state.services.pool.inline is True


def test_mem_12_append_to_a_file_another_writer_holds_waits_in_a_thread_and_lands_once(
    tmp_path: Path,
) -> None:
    client, headers, other = _with_another_writer(tmp_path)
    with client:
        assert (
            client.post(
                "/v1/buffers/user/notes",
                headers=headers,
                json={"messages": {"role": "user", "content": "a"}},
            ).json()["appended"]
            == 1
        )
        other.execute("BEGIN IMMEDIATE")  # another process, say, is writing the file
        threading.Timer(0.5, lambda: (other.execute("COMMIT"), other.close())).start()
        results: dict[str, object] = {}

        def append() -> None:
            response = client.post(
                "/v1/buffers/user/notes",
                headers=headers,
                json={"messages": {"role": "user", "content": "b"}, "return_messages": False},
            )
            results["append"] = response
            results["append_done"] = time.monotonic()

        started = time.monotonic()
        appender = threading.Thread(target=append)
        appender.start()
        time.sleep(0.1)
        health = client.get("/health")  # served while the append waits in its thread
        health_done = time.monotonic()
        appender.join()
    response: Any = results["append"]
    assert response.status_code == 200, response.text
    assert response.json()["appended"] == 1 and response.json()["count"] == 2
    assert results["append_done"] - started >= 0.45  # type: ignore[operator]
    assert health.status_code == 200 and health_done < results["append_done"]  # type: ignore[operator]
    stored = open_store(f"sqlite:///{tmp_path / 'held.db'}").load(Address("user", "alice", "notes"))
    assert [m["content"] for m in stored] == ["a", "b"]


def test_freeze_gc_moves_startup_objects_out_of_the_collectors_reach() -> None:
    import gc

    gc.unfreeze()
    with OneHopClient(create_app(open_store("memory://"), freeze_gc=True)):
        frozen = gc.get_freeze_count()
    gc.unfreeze()
    with OneHopClient(create_app(open_store("memory://"))):
        assert gc.get_freeze_count() == 0
    assert frozen > 1000  # the modules, the app and its schemas


def test_an_append_is_acknowledged_only_after_the_wal_fsync_covering_it(tmp_path: Path) -> None:
    from flowmem.store.sqlite import SqliteStore

    release = threading.Event()
    synced: list[int] = []

    class HeldSync(SqliteStore):
        def sync(self) -> int:
            release.wait(5)
            done = super().sync()
            synced.append(done)
            return done

    store = HeldSync(f"sqlite:///{tmp_path}/held.db")
    tokens = make_tokens(store)
    headers = {"Authorization": f"Bearer {tokens['alice']}"}
    results: dict[str, Any] = {}
    with OneHopClient(create_app(store)) as client:

        def append() -> None:
            results["response"] = client.post(
                "/v1/buffers/user/notes",
                headers=headers,
                json={"messages": {"role": "user", "content": "a"}},
            )

        worker = threading.Thread(target=append)
        worker.start()
        deadline = time.monotonic() + 5  # a cold first request may take a while on a busy box
        while store.sync_barrier() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # time enough to answer, were the answer not waiting for the fsync
        assert "response" not in results  # committed, but not acknowledged before the fsync
        assert store.sync_barrier() == 1
        release.set()
        worker.join(5)
    assert results["response"].json()["appended"] == 1
    assert synced == [1] and store.sync_barrier() is None


def test_mem_12_a_record_write_to_a_file_another_writer_holds_waits_and_lands(
    tmp_path: Path,
) -> None:
    """The thread a record write falls back to waits for the file lock, whatever the
    pooled connection's previous borrower (a no-wait call) had set."""
    client, headers, other = _with_another_writer(tmp_path)
    with client:
        assert (
            client.put("/v1/memory/user/k", headers=headers, json={"value": 1}).status_code == 200
        )
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(0.3, lambda: (other.execute("COMMIT"), other.close())).start()
        response = client.put("/v1/memory/user/k", headers=headers, json={"value": 2})
        assert response.status_code == 200, response.text
        assert client.get("/v1/memory/user/k", headers=headers).json()["value"] == 2
