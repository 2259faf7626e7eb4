"""``flowmem.service.local_reads``: an adapter's read on its event loop for a local store, else in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.service import MemoryService
from flowmem.service.local_reads import local_read
from flowmem.store import open_store
from flowmem.store.locks import WouldBlock, waiting_allowed


@pytest.fixture
def sqlite_memory(tmp_path: Path) -> Iterator[MemoryService]:
    store = open_store(f"sqlite:///{tmp_path}/reads.db")
    try:
        yield MemoryService(store)
    finally:
        store.close()


def _where() -> tuple[int, bool]:
    """The thread a read ran on, and whether it was allowed to wait for a lock there."""
    return threading.get_ident(), waiting_allowed()


def test_a_read_of_a_local_store_runs_on_the_callers_thread_without_waiting(
    sqlite_memory: MemoryService,
) -> None:
    async def read() -> tuple[int, tuple[int, bool]]:
        return threading.get_ident(), await local_read(sqlite_memory, _where)

    caller, (ran_on, could_wait) = asyncio.run(read())
    assert ran_on == caller
    assert could_wait is False  # inside the store's deferred(): a lock raises WouldBlock


def test_a_read_that_would_wait_runs_again_in_a_worker_thread(sqlite_memory: MemoryService) -> None:
    calls: list[tuple[int, bool]] = []

    def read_finding_a_lock() -> str:
        calls.append(_where())
        if not waiting_allowed():
            raise WouldBlock("a writer holds the file")
        return "answered"

    async def read() -> tuple[int, str]:
        return threading.get_ident(), await local_read(sqlite_memory, read_finding_a_lock)

    caller, answer = asyncio.run(read())
    assert answer == "answered"
    assert [ran_on == caller for ran_on, _ in calls] == [True, False]
    assert [could_wait for _, could_wait in calls] == [False, True]


@pytest.mark.postgres
def test_a_read_of_postgresql_runs_in_a_worker_thread(postgres_db_url: str) -> None:
    store = open_store(postgres_db_url)
    try:
        memory = MemoryService(store)

        async def read() -> tuple[int, tuple[int, bool]]:
            return threading.get_ident(), await local_read(memory, _where)

        caller, (ran_on, could_wait) = asyncio.run(read())
    finally:
        store.close()
    assert ran_on != caller
    assert could_wait is True
