"""bench/lib/private_sqlite.py: SQLite as ``memory://`` would run it, private and in RAM."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from flowmem.core import prepare
from flowmem.store import Address
from flowmem.store.sqlite.private import TMPFS
from tests.bench.smoke import bench_lib

private_sqlite = bench_lib("private_sqlite")
ENGINES = sorted(private_sqlite.ENGINES)
ADDRESS = Address("session", "s1", "chat")

pytestmark = pytest.mark.skipif(not os.path.isdir(TMPFS), reason="no /dev/shm")


@pytest.mark.parametrize("kind", ENGINES)
def test_each_store_has_a_database_of_its_own(kind: str) -> None:
    first, second = private_sqlite.ENGINES[kind](), private_sqlite.ENGINES[kind]()
    try:
        first.append(ADDRESS, prepare([{"role": "user", "content": "hi"}], 1))

        assert [m["content"] for m in first.load(ADDRESS)] == ["hi"]
        assert second.load(ADDRESS) == []
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("kind", ENGINES)
def test_closing_a_store_leaves_no_file_behind(kind: str) -> None:
    store = private_sqlite.ENGINES[kind]()
    store.append(ADDRESS, prepare([{"role": "user", "content": "hi"}], 1))
    directory = Path(store.directory)
    assert directory.is_dir()

    store.close()

    assert not directory.exists()


def test_memdb_keeps_no_database_on_a_file_system() -> None:
    store = private_sqlite.MemdbSqliteStore()
    try:
        store.append(ADDRESS, prepare([{"role": "user", "content": "hi"}], 1))

        assert not Path(store.path).exists()  # the guard's path names no database
        with store._connection() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
    finally:
        store.close()


def test_memdb_pool_connections_share_one_database() -> None:
    store = private_sqlite.MemdbSqliteStore()
    seen: list[int] = []
    try:
        store.append(ADDRESS, prepare([{"role": "user", "content": "hi"}], 1))
        with store._connection():  # one loaned: the thread below opens a second connection
            reader = threading.Thread(target=lambda: seen.append(store.count(ADDRESS)))
            reader.start()
            reader.join(10)
    finally:
        store.close()

    assert seen == [1]


def test_as_a_pytest_plugin_memory_opens_the_chosen_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    import flowmem.store

    monkeypatch.setattr(flowmem.store, "MemoryStore", flowmem.store.MemoryStore)
    monkeypatch.setenv("FLOWMEM_MEMORY_AS", "memdb")

    private_sqlite.pytest_configure(None)
    store = flowmem.store.open_store("memory://")
    try:
        assert isinstance(store, private_sqlite.MemdbSqliteStore)
    finally:
        store.close()


@pytest.mark.parametrize("kind", ENGINES)
def test_a_new_store_starts_from_the_migrated_template_at_the_current_schema(kind: str) -> None:
    from flowmem.store.sqlite.schema import MIGRATIONS

    store = private_sqlite.ENGINES[kind]()
    try:
        assert store.schema_version() == len(MIGRATIONS)
        assert store.load(ADDRESS) == [] and store.count(ADDRESS) == 0
    finally:
        store.close()
