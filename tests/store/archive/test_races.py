"""MEM-12 for compaction: concurrent compactions and appends of one buffer (issue 28 §2)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import pytest

from flowmem.core.compaction import SUMMARY_KEY
from flowmem.errors import CompactionStaleError
from flowmem.service import MemoryService
from flowmem.store import Store, open_store
from tests.store.archive.test_archive import KEY, history, turn

FORK = multiprocessing.get_context("fork")


def _slow_summary(rows: list[dict[str, Any]]) -> str:
    time.sleep(0.2)  # a model call: long enough for every compaction to plan the same rows
    return f"summary of {len(rows)} rows"


def _originals(service: MemoryService) -> list[dict[str, Any]]:
    """Every row ever appended, as the archive and the buffer hold them (summaries left out)."""
    rows = service.load_raw("user", "u1", KEY, include_archived=True).messages
    return [row for row in rows if SUMMARY_KEY not in row["metadata"]]


def _live_summaries(service: MemoryService) -> int:
    rows = service.load_raw("user", "u1", KEY).messages
    return sum(1 for row in rows if SUMMARY_KEY in row["metadata"])


def test_mem_12_concurrent_compactions_in_threads_archive_a_prefix_once(store: Store) -> None:
    service = MemoryService(store)
    service.append_raw("user", "u1", KEY, history(6))
    before = service.load_raw("user", "u1", KEY).messages
    results: list[Any] = []

    def work() -> None:
        results.append(
            service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=_slow_summary)
        )

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(result.compacted for result in results) == 1
    assert _originals(service) == before  # each original once, in order
    assert _live_summaries(service) == 1


def test_mem_12_appends_racing_compactions_are_neither_lost_nor_summarized_twice(
    store: Store,
) -> None:
    service = MemoryService(store)
    service.append_raw("user", "u1", KEY, history(4))
    stop = threading.Event()
    compacted = threading.Event()

    def append() -> None:
        for i in range(100, 130):
            service.append_raw("user", "u1", KEY, turn(i))
            if i == 115:  # half way, a compaction lands between two appends (the race)
                compacted.wait(30)
        stop.set()

    def compact() -> None:
        while not stop.is_set():
            try:
                done = service.compact_raw(
                    "user", "u1", KEY, keep_tokens=150, summarize=lambda rows: f"{len(rows)} rows"
                )
            except CompactionStaleError:  # the other compactor won three times: its answer
                continue
            if done.compacted:
                compacted.set()

    threads = [threading.Thread(target=append), threading.Thread(target=compact)]
    threads.append(threading.Thread(target=compact))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    expected = history(4) + [row for i in range(100, 130) for row in turn(i)]
    got = _originals(service)
    assert [(r["role"], r["content"]) for r in got] == [
        (r["role"], r["content"] or "") for r in expected
    ]
    assert _live_summaries(service) == 1


def _compact_in_child(url: str, done: Any) -> None:
    store = open_store(url)
    try:
        service = MemoryService(store)
        result = service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=_slow_summary)
        done.put(result.compacted)
    finally:
        store.close()


@pytest.mark.slow
def test_mem_12_two_processes_compacting_one_buffer_archive_a_prefix_once(
    sql_store_url: str,
) -> None:
    store = open_store(sql_store_url)
    try:
        service = MemoryService(store)
        service.append_raw("user", "u1", KEY, history(6))
        before = service.load_raw("user", "u1", KEY).messages
        done = FORK.Queue()
        children = [
            FORK.Process(target=_compact_in_child, args=(sql_store_url, done)) for _ in range(2)
        ]
        for child in children:
            child.start()
        for child in children:
            child.join(60)
        assert [child.exitcode for child in children] == [0, 0]
        assert sorted([done.get(timeout=5), done.get(timeout=5)]) == [False, True]
        assert _originals(service) == before
        assert _live_summaries(service) == 1
    finally:
        store.close()
