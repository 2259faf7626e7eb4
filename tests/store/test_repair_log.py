"""The buffers' repair log on every backend (issue 37 §2): what it holds, in which transaction, for how long.

An append's repairs (MEM-3 placeholders, MEM-10 replacements, MEM-1 / MEM-2 refused
duplicates) are logged in its own transaction, bounded per buffer, counted against the
owner's quota, and deleted with the buffer, its session and its user.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import Repair, call_ids, prepare, result_id
from flowmem.errors import InvalidInputError, QuotaExceededError
from flowmem.store import Address, Idempotency, SessionRecord, Store, open_store
from flowmem.store.base import Quotas
from flowmem.store.repairs import KEPT, RepairEntry, entry_text
from tests.store.killed import kill_a_writer

CHAT = Address("user", "alice", "chat")


def _call(cid: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": cid}]}


def _result(cid: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _log(store: Store, address: Address = CHAT) -> list[RepairEntry]:
    return store.repairs.page(address, limit=1000).entries  # type: ignore[attr-defined,no-any-return]


def _entry_bytes(entry: RepairEntry) -> int:
    """The stored size of an entry: its JSON text as the log writes it (a heal's positions are read, not stored)."""
    stored = tuple(entry.positions) if entry.kind in ("evict", "compact") else ()
    repair = Repair(entry.rule, tuple(entry.call_ids), entry.count, stored, entry.archived, entry.kind)
    return len(entry_text(repair, entry.at).encode())


def _heal(store: Store, cid: str, address: Address = CHAT) -> None:
    store.append(address, prepare([_call(cid), _user(f"after {cid}")], 1))


def test_mem_3_a_heal_is_logged_with_its_call_ids_and_the_placeholders_indexes(store: Store) -> None:
    store.append(CHAT, prepare([_user("hi"), _call("c1"), _call("c2")], 1))
    before = time.time()
    store.append(CHAT, prepare(_user("next"), 2))
    (entry,) = _log(store)
    rows = store.load(CHAT)
    assert (entry.seq, entry.rule, entry.call_ids, entry.count) == (1, "MEM-3", ["c1", "c2"], 2)
    assert [result_id(rows[i]) for i in entry.positions] == ["c1", "c2"]
    assert all(rows[i]["metadata"].get("healed") for i in entry.positions)
    assert before - 1 <= entry.at <= time.time() + 1


def test_mem_10_mem_1_mem_2_a_replacement_and_refused_duplicates_are_logged_newest_first(
    store: Store,
) -> None:
    _heal(store, "c1")
    store.append(CHAT, prepare([_result("c1", "real"), _result("c1", "again"), _call("c1")], 3))
    newest = _log(store)
    assert [(e.rule, e.call_ids, e.count) for e in newest] == [
        ("MEM-2", ["c1"], 1),
        ("MEM-1", ["c1"], 1),
        ("MEM-10", ["c1"], 1),
        ("MEM-3", ["c1"], 1),
    ]
    assert [e.seq for e in newest] == [4, 3, 2, 1]
    rows = store.load(CHAT)
    (where,) = newest[2].positions
    assert result_id(rows[where]) == "c1" and rows[where]["content"] == "real"
    assert newest[0].positions == [] and newest[1].positions == []


def test_mem_1_a_repeated_result_batch_is_one_entry_with_its_count(store: Store) -> None:
    store.append(CHAT, prepare([_call("a"), _result("a"), _call("b"), _result("b")], 1))
    store.append(CHAT, prepare([_result("a"), _result("b"), _result("a"), _user("new")], 2))
    (entry,) = _log(store)
    assert (entry.rule, entry.call_ids, entry.count) == ("MEM-1", ["a", "b", "a"], 3)


def test_mem_1_mem_2_an_append_of_duplicates_only_writes_nothing_to_the_log(store: Store) -> None:
    """It changed no row: it commits nothing, as before the log (decision 0071); its answer says it."""
    store.append(CHAT, prepare([_call("a"), _result("a")], 1))
    used = store.usage("alice")
    again = store.append(CHAT, prepare([_call("a"), _result("a")], 2))
    assert (again.appended, again.deduplicated, len(again.repairs)) == (0, 2, 2)
    assert _log(store) == [] and store.usage("alice") == used


def test_an_append_that_repaired_nothing_writes_nothing_to_the_log(store: Store) -> None:
    store.append(CHAT, prepare([_user("hi"), _call("a"), _result("a"), _user("bye")], 1))
    assert _log(store) == []
    used = store.usage("alice")
    store.append(CHAT, prepare(_user("more"), 2))
    assert _log(store) == []
    assert store.usage("alice").bytes - used.bytes == len(store.load_bodies(CHAT)[-1][1])


def test_the_log_is_paged_newest_first_with_a_cursor(store: Store) -> None:
    for i in range(5):
        _heal(store, f"c{i}")
    first = store.repairs.page(CHAT, limit=2)  # type: ignore[attr-defined]
    assert [e.call_ids for e in first.entries] == [["c4"], ["c3"]] and first.more
    second = store.repairs.page(CHAT, before=first.entries[-1].seq, limit=2)  # type: ignore[attr-defined]
    assert [e.call_ids for e in second.entries] == [["c2"], ["c1"]] and second.more
    last = store.repairs.page(CHAT, before=second.entries[-1].seq, limit=2)  # type: ignore[attr-defined]
    assert [e.call_ids for e in last.entries] == [["c0"]] and not last.more
    assert store.repairs.page(Address("user", "alice", "none")).entries == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [{"limit": -1}, {"limit": 1001}, {"before": -2}])
def test_a_bad_page_of_the_log_is_refused(store: Store, bad: dict[str, int]) -> None:
    with pytest.raises(InvalidInputError):
        store.repairs.page(CHAT, **bad)  # type: ignore[attr-defined]


def test_mem_3_the_log_keeps_the_newest_entries_of_a_buffer_and_uncounts_the_rest(
    store: Store,
) -> None:
    store.repairs.kept = 3  # type: ignore[attr-defined]
    for i in range(4):
        _heal(store, f"c{i}")
    assert [e.call_ids for e in _log(store)] == [["c3"], ["c2"], ["c1"]]
    assert [e.seq for e in _log(store)] == [4, 3, 2]  # numbers are never reused
    rows = sum(len(b.encode()) for _, b in store.load_bodies(CHAT))
    # what is counted: the rows and the three entries kept, not the one trimmed
    assert store.usage("alice").bytes - rows == sum(map(_entry_bytes, _log(store)))
    assert KEPT == 1000


def test_mem_3_the_log_keeps_its_newest_kept_entries_in_the_write_that_passes_the_bound(
    store: Store,
) -> None:
    """At the shipped bound the store trims in the entry's own statement (decision 0124: SQLite's trigger)."""
    store.append(CHAT, prepare([_user("start")], 1))
    for i in range(KEPT + 2):
        store.append(CHAT, prepare([_call(f"c{i}"), _user(f"after c{i}")], 1))  # one heal, one entry
    logged = _log(store)
    assert len(logged) == KEPT and [e.seq for e in logged] == list(range(KEPT + 2, 2, -1))
    assert logged[-1].call_ids == ["c2"]
    rows = sum(len(b.encode()) for _, b in store.load_bodies(CHAT))
    assert store.usage("alice").bytes - rows == sum(map(_entry_bytes, logged))


def test_mem_3_the_log_counts_against_the_owners_bytes_quota(store: Store) -> None:
    store.append(CHAT, prepare([_call("c1")], 1))
    rows = store.usage("alice").bytes
    _heal(store, "c2")
    with_log = store.usage("alice").bytes
    body = sum(len(b.encode()) for _, b in store.load_bodies(CHAT))
    logged = with_log - body
    assert logged > 0 and rows == len(store.load_bodies(CHAT)[0][1].encode())
    # a quota the rows fit in but not their log: the append is refused whole
    store.set_quotas(Quotas(bytes=with_log + 160, buffers=0, records=0))
    count = store.count(CHAT)
    with pytest.raises(QuotaExceededError):
        store.append(CHAT, prepare([_call("c3"), _user("x" * 10)], 3))
    assert store.count(CHAT) == count and len(_log(store)) == 1
    assert store.usage("alice").bytes == with_log


def test_mem_3_positions_are_the_rows_indexes_now_after_a_window_evicted_older_rows(
    store: Store,
) -> None:
    store.append(CHAT, prepare([_user("a"), _user("b"), _call("c1")], 1))
    store.append(CHAT, prepare(_user("c"), 2))  # heals c1 at index 3
    assert _log(store)[0].positions == [3]
    store.append(CHAT, prepare([_user("d")], 3), max_messages=5)  # "a" evicted
    rows = store.load(CHAT)
    (where,) = _log(store)[-1].positions
    assert where == 2 and result_id(rows[where]) == "c1"
    store.append(CHAT, prepare([_user("e"), _user("f"), _user("g")], 4), max_messages=3)
    assert _log(store)[-1].positions == []  # the placeholder left with its turn


def test_mem_3_the_log_goes_with_a_cleared_buffer_and_its_bytes_with_it(store: Store) -> None:
    _heal(store, "c1")
    assert store.usage("alice").bytes > 0 and _log(store)
    store.clear(CHAT)
    assert _log(store) == [] and store.usage("alice").bytes == 0
    _heal(store, "c2")  # a new buffer's log starts again
    assert [(e.seq, e.call_ids) for e in _log(store)] == [(1, ["c2"])]


def test_mem_3_the_log_goes_with_a_deleted_session_and_an_erased_user(store: Store) -> None:
    store.create_session(SessionRecord("s1", "", "alice", created_at=1.0, updated_at=1.0))
    in_session = Address("session", "s1", "chat_history")
    _heal(store, "c1", in_session)
    _heal(store, "c2")
    assert _log(store, in_session) and _log(store)
    store.delete_session("s1")
    assert _log(store, in_session) == [] and _log(store)
    store.erase_user("alice")
    assert _log(store) == [] and store.usage("alice").bytes == 0


def _failing(outcome: Any) -> tuple[int, str]:
    raise RuntimeError("injected after the log's write, before the commit")


def test_mem_3_a_repair_whose_transaction_fails_is_not_in_the_log(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    try:
        store.append(CHAT, prepare([_user("hi"), _call("c1")], 1))
        rows = store.load(CHAT)
        used = store.usage("alice")
        # the key's answer is asked after every write of the append, the log's included
        broken = Idempotency("user:alice", "k1", "fp", None, _failing)
        with pytest.raises(Exception, match="injected"):
            store.append(CHAT, prepare(_user("next"), 2), idempotency=broken)
        assert store.load(CHAT) == rows and _log(store) == []
        assert store.usage("alice") == used
        store.append(CHAT, prepare(_user("next"), 2))  # committed: logged
        assert [e.call_ids for e in _log(store)] == [["c1"]]
    finally:
        store.close()


def test_mem_3_the_log_survives_reopening_the_store(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    _heal(store, "c1")
    store.append(CHAT, prepare([_result("c1", "late")], 2))
    logged = _log(store)
    store.close()
    again = open_store(sql_store_url)
    try:
        assert _log(again) == logged and [e.rule for e in logged] == ["MEM-10", "MEM-3"]
    finally:
        again.close()


def _heal_until_killed(path: str, round_no: int, pipe: Any) -> None:
    store = open_store(f"sqlite:///{path}")
    i = 0
    while i < 200:  # 4 rounds stay under the log's bound
        cid = f"r{round_no}-c{i}"
        store.append(CHAT, prepare([_call(cid)], 1))
        store.append(CHAT, prepare([_user(f"u-{cid}")], 1))  # heals cid (MEM-3)
        pipe.send(cid)
        i += 1
    time.sleep(60)  # killed here when the kill came late


@pytest.mark.slow
def test_mem_3_a_sigkilled_writer_leaves_exactly_the_committed_repairs(tmp_path: Path) -> None:
    path = str(tmp_path / "crash.db")
    open_store(f"sqlite:///{path}").close()
    rng = random.Random(37)
    committed: list[str] = []
    for round_no in range(4):
        committed += kill_a_writer(_heal_until_killed, (path, round_no), rng, 0.2)
    store = open_store(f"sqlite:///{path}")
    try:
        logged = [cid for e in _log(store) for cid in e.call_ids]
        assert len(logged) < KEPT
        rows = store.load(CHAT)
        placeholders = [result_id(r) for r in rows if r["metadata"].get("healed")]
        # every committed heal is logged, once; every logged heal is in the buffer
        assert set(committed) <= set(logged) and len(logged) == len(set(logged))
        assert sorted(logged) == sorted(placeholders)
        assert set(placeholders) <= {cid for r in rows for cid in call_ids(r)}
        assert len(committed) >= 4
    finally:
        store.close()
