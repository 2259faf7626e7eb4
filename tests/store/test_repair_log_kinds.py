"""The repair log's other kinds on every backend (issue 37 §2): evictions, compactions, notes.

A window eviction and a compaction are logged in their own transaction with the rows
they removed (count, the indexes those rows had just before, a compaction's archive
numbers); a change that wrote no row (a drop on a read, a refusal) is noted in a write
of its own, once while the newest entry says it. Every backend passes the same tests.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from flowmem import compaction
from flowmem.core import Repair, prepare, result_id
from flowmem.errors import QuotaExceededError
from flowmem.service import MemoryService
from flowmem.store import Address, Store, open_store
from flowmem.store.base import Quotas, SessionRecord
from flowmem.store.repairs import RepairEntry, entry_text, parse_entry

CHAT = Address("user", "alice", "chat")


def _call(*cids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": c} for c in cids]}


def _result(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "ok"}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _log(store: Store, address: Address = CHAT) -> list[RepairEntry]:
    return store.repairs.page(address, limit=1000).entries  # type: ignore[attr-defined,no-any-return]


def _logged_bytes(store: Store) -> int:
    """The bytes the owner's usage counts besides the live rows and the archive."""
    live = sum(len(body.encode()) for _, body in store.load_bodies(CHAT))
    archived = sum(len(body.encode()) for body in compaction.archive_of(store).read(CHAT).archived)
    return store.usage("alice").bytes - live - archived


def _stored_bytes(entry: RepairEntry) -> int:
    stored = tuple(entry.positions) if entry.kind in ("evict", "compact") else ()
    repair = Repair(entry.rule, tuple(entry.call_ids), entry.count, stored, entry.archived, entry.kind)
    return len(entry_text(repair, entry.at).encode())


def test_a_window_eviction_is_logged_with_the_rows_indexes_before_it(store: Store) -> None:
    store.append(CHAT, prepare([_call("a"), _call("b"), _result("a"), _result("b")], 1))
    store.append(CHAT, prepare([_user("x")], 2), max_messages=3)
    (entry,) = _log(store)
    assert (entry.rule, entry.kind, entry.call_ids, entry.count) == ("window", "evict", ["a"], 2)
    assert entry.positions == [0, 2] and entry.archived is None
    assert [result_id(r) for r in store.load(CHAT)] == [None, "b", None]
    assert _logged_bytes(store) == _stored_bytes(entry)


def test_mem_3_a_heal_and_an_eviction_of_one_append_are_logged_together(store: Store) -> None:
    store.append(CHAT, prepare([_user("q"), _call("a")], 1))
    store.append(CHAT, prepare([_user("r")], 2), max_messages=2)
    assert [(e.kind, e.seq) for e in _log(store)] == [("evict", 2), ("heal", 1)]
    evicted = _log(store)[0]
    # the user turn, the turn that declared "a" and its placeholder: the window keeps one row
    assert (evicted.count, evicted.positions, evicted.call_ids) == (3, [0, 1, 2], ["a"])
    assert store.count(CHAT) == 1


def test_an_append_that_evicted_nothing_logs_nothing(store: Store) -> None:
    store.append(CHAT, prepare([_user("q"), _user("r")], 1), max_messages=2)
    assert _log(store) == [] and _logged_bytes(store) == 0


def test_an_eviction_the_quota_refuses_is_not_logged_and_changes_nothing(store: Store) -> None:
    store.append(CHAT, prepare([_user("q" * 50), _user("r")], 1))
    used = store.usage("alice")
    rows = store.load(CHAT)
    store.set_quotas(Quotas(bytes=used.bytes, buffers=0, records=0))
    # the new row is smaller than the one evicted: only the log's entry is over the quota
    with pytest.raises(QuotaExceededError):
        store.append(CHAT, prepare([_user("s")], 2), max_messages=2)
    assert store.load(CHAT) == rows and _log(store) == [] and store.usage("alice") == used


def test_a_compaction_is_logged_with_its_count_and_archive_numbers(store: Store) -> None:
    service = MemoryService(store)
    service.append_raw("user", "alice", "chat", [_user(f"turn {i} " * 20) for i in range(6)])
    done = service.compact_raw("user", "alice", "chat", keep_tokens=60, summarize=lambda rows: "sum")
    assert done.compacted
    (entry,) = _log(store)
    assert (entry.rule, entry.kind, entry.call_ids, entry.count) == ("compaction", "compact", [], done.archived)
    assert entry.positions == list(range(done.archived)) and entry.archived == (done.first, done.last)
    assert _logged_bytes(store) == _stored_bytes(entry)
    service.append_raw("user", "alice", "chat", [_user(f"more {i} " * 20) for i in range(4)])
    again = service.compact_raw("user", "alice", "chat", keep_tokens=60, summarize=lambda rows: "sum")
    newest = _log(store)[0]
    assert done.last is not None and again.first == done.last + 1
    assert newest.archived == (again.first, again.last) and newest.count == again.archived


def test_a_whole_history_replaced_is_one_compaction_entry(store: Store) -> None:
    store.append(CHAT, prepare([_user("a"), _user("b"), _user("c")], 1))
    done = compaction.replace_all(store, CHAT, prepare([_user("all of it")], 2), lambda row: None)
    assert done is not None
    (entry,) = _log(store)
    assert (entry.kind, entry.count, entry.positions, entry.archived) == ("compact", 3, [0, 1, 2], (1, 3))


def test_a_stale_compaction_logs_nothing(store: Store) -> None:
    store.append(CHAT, prepare([_user("a"), _user("b")], 1))
    archive = compaction.archive_of(store)
    assert archive.compact(CHAT, 1, "not the digest", lambda first, last: [_user("s")]) is None
    assert _log(store) == []


def test_a_compaction_the_quota_refuses_for_its_entry_changes_nothing(store: Store) -> None:
    service = MemoryService(store)
    service.append_raw("user", "alice", "chat", [_user(f"turn {i} " * 20) for i in range(6)])
    rows = store.load(CHAT)
    used = store.usage("alice")
    # room for the archived rows' summary, not for the entry besides
    store.set_quotas(Quotas(bytes=used.bytes + 150, buffers=0, records=0))
    with pytest.raises(QuotaExceededError):
        service.compact_raw("user", "alice", "chat", keep_tokens=60, summarize=lambda rows: "sum")
    assert store.load(CHAT) == rows and _log(store) == [] and store.usage("alice") == used


def test_mem_5_a_note_is_logged_once_while_the_newest_entry_says_it(store: Store) -> None:
    store.append(CHAT, prepare([_user("q")], 1))
    version = store.page_bodies(CHAT).version
    dropped = Repair("MEM-5", (), 2)
    assert store.repairs.note(CHAT, dropped)  # type: ignore[attr-defined]
    assert not store.repairs.note(CHAT, dropped)  # type: ignore[attr-defined]
    assert store.repairs.note(CHAT, Repair("MEM-5", (), 3))  # type: ignore[attr-defined]
    assert [(e.kind, e.count) for e in _log(store)] == [("normalize", 3), ("normalize", 2)]
    assert _logged_bytes(store) == sum(map(_stored_bytes, _log(store)))
    # no row changed: the buffer's version (a paged read's snapshot) is the same
    assert store.count(CHAT) == 1 and store.page_bodies(CHAT).version == version


def test_a_note_on_a_buffer_that_does_not_exist_writes_nothing(store: Store) -> None:
    assert not store.repairs.note(Address("user", "alice", "none"), Repair("MEM-5", (), 1))  # type: ignore[attr-defined]
    assert store.usage("alice").bytes == 0 and _log(store, Address("user", "alice", "none")) == []


def test_a_note_the_quota_refuses_is_left_out_and_changes_nothing(store: Store) -> None:
    store.append(CHAT, prepare([_user("q")], 1))
    used = store.usage("alice")
    store.set_quotas(Quotas(bytes=used.bytes + 10, buffers=0, records=0))
    assert not store.repairs.note(CHAT, Repair("buffer_full", (), 1))  # type: ignore[attr-defined]
    assert _log(store) == [] and store.usage("alice") == used


def test_an_entry_stored_before_kinds_is_read_with_its_kind_derived() -> None:
    old = parse_entry(3, json.dumps({"at": 1.0, "rule": "MEM-10", "call_ids": ["c"], "count": 1}))
    assert (old.kind, old.positions, old.archived) == ("replace", [], None)
    assert old.to_dict() == {
        "seq": 3, "at": 1.0, "rule": "MEM-10", "kind": "replace",
        "call_ids": ["c"], "count": 1, "positions": [], "archived": None,
    }


def test_an_old_entry_in_a_sqlite_log_is_read_with_its_kind_and_positions(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = open_store(f"sqlite:///{path}")
    try:
        store.append(CHAT, prepare([_call("c1"), _user("heal")], 1))
        (entry,) = _log(store)
        with sqlite3.connect(path) as conn:  # as migration 17's first writer stored it
            conn.execute(
                "UPDATE buffer_repairs SET entry = ?",
                (json.dumps({"at": entry.at, "rule": "MEM-3", "call_ids": ["c1"], "count": 1}),),
            )
        (old,) = _log(store)
        rows = store.load(CHAT)
        assert old.kind == "heal" and [result_id(rows[i]) for i in old.positions] == ["c1"]
    finally:
        store.close()


def test_a_shrinking_eviction_over_a_lowered_quota_is_logged_and_the_quota_holds_after(store: Store) -> None:
    """A write that frees more than its entry takes is never refused; the next growing one is."""
    store.append(CHAT, prepare([_user("x" * 100) for _ in range(5)], 1))
    store.set_quotas(Quotas(bytes=10, buffers=0, records=0))  # lowered below what is stored
    store.append(CHAT, prepare([_user("z")], 2), max_messages=1)
    (entry,) = _log(store)
    assert (entry.kind, entry.count) == ("evict", 5)
    assert _logged_bytes(store) == _stored_bytes(entry)
    with pytest.raises(QuotaExceededError):
        store.append(CHAT, prepare([_user("grows")], 3))
    assert store.count(CHAT) == 1 and len(_log(store)) == 1


def test_every_kind_goes_with_a_deleted_session_and_an_erased_user_and_its_bytes_with_it(
    store: Store,
) -> None:
    store.create_session(SessionRecord("s1", "", "alice", created_at=1.0, updated_at=1.0))
    for address in (Address("session", "s1", "chat_history"), CHAT):
        store.append(address, prepare([_user(f"turn {i} " * 20) for i in range(6)], 1), max_messages=5)
        compaction.replace_all(store, address, prepare([_user("all of it")], 2), lambda row: None)
        assert store.repairs.note(address, Repair("MEM-5", (), 1))  # type: ignore[attr-defined]
        assert [e.kind for e in _log(store, address)] == ["normalize", "compact", "evict"]
    store.delete_session("s1")
    assert _log(store, Address("session", "s1", "chat_history")) == [] and len(_log(store)) == 3
    assert _logged_bytes(store) == sum(map(_stored_bytes, _log(store)))
    store.erase_user("alice")
    assert _log(store) == [] and store.usage("alice").bytes == 0
