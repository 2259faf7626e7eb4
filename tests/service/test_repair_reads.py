"""What the service notes in a buffer's repair log besides its writes (issue 37 §2, decision 0121).

A write refused whole that names an existing buffer (``buffer_full``) and a whole
read's normalization drops (MEM-5) are noted once while the newest entry says it; a
refused scope, a missing buffer and a page's drops note nothing; the rows never change.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.errors import BufferFullError
from flowmem.limits import Limits
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, Store
from flowmem.store.repairs import RepairEntry
from tests.store.conftest import BACKENDS, open_backend

ALICE = ExecutionContext(user_id="alice")
CHAT = Address("user", "alice", "chat")


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = open_backend(request.param, request, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def _log(store: Store) -> list[RepairEntry]:
    return store.repairs.page(CHAT).entries  # type: ignore[attr-defined,no-any-return]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_a_buffer_full_refusal_is_noted_once_and_changes_no_row(store: Store) -> None:
    service = MemoryService(store, limits=Limits(buffer_bytes=400))
    service.append("user", "chat", [_user("a" * 100)], ALICE)
    rows, version = store.load(CHAT), store.page_bodies(CHAT).version
    for _ in range(2):  # a client retrying the same refused write
        with pytest.raises(BufferFullError):
            service.append("user", "chat", [_user("b" * 200), _user("c" * 200)], ALICE)
    (entry,) = _log(store)
    assert (entry.rule, entry.kind, entry.count, entry.call_ids, entry.positions) == (
        "buffer_full", "refuse", 2, [], [],
    )
    assert store.load(CHAT) == rows and store.page_bodies(CHAT).version == version


def test_a_buffer_full_refusal_of_a_new_buffer_notes_nothing(store: Store) -> None:
    service = MemoryService(store, limits=Limits(buffer_bytes=100))
    with pytest.raises(BufferFullError):
        service.append("user", "chat", [_user("x" * 200)], ALICE)
    assert _log(store) == [] and store.count(CHAT) == 0


def test_mem_5_a_whole_reads_drops_are_noted_once_while_the_newest_entry_says_it(store: Store) -> None:
    service = MemoryService(store)
    orphan = {"role": "tool", "tool_call_id": "nobody", "content": "x"}
    service.append("user", "chat", [_user("q"), orphan], ALICE)
    assert service.note_dropped("user", "chat", ALICE, 1)
    assert not service.note_dropped("user", "chat", ALICE, 1)  # a poll of the same buffer
    assert not service.note_dropped("user", "chat", ALICE, 0)
    (entry,) = _log(store)
    assert (entry.rule, entry.kind, entry.count) == ("MEM-5", "normalize", 1)


def test_mem_7_a_refused_scope_notes_nothing(store: Store) -> None:
    service = MemoryService(store)
    service.append("user", "chat", [_user("q")], ALICE)
    assert not service.note_dropped("user", "chat", ExecutionContext(), 1)  # no user (MEM-6)
    assert _log(store) == []
