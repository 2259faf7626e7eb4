"""One conformance suite for every backend: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from flowmem.core import (
    EVICTED_CALLS_KEPT,
    HEALED_CONTENT,
    append,
    call_ids,
    check_sendable,
    is_healed,
    prepare,
    result_id,
)
from flowmem.errors import (
    AccessDeniedError,
    AuthenticationError,
    BufferFullError,
    ConflictError,
    InvalidInputError,
    InvalidTextError,
    NotFoundError,
    NotSerializableError,
    TooManySessionsError,
)
from flowmem.store import (
    Address,
    Erasure,
    SessionClaim,
    SessionRecord,
    Store,
    TokenRecord,
    WriteGuard,
)
from flowmem.store.base import SupportsPopLast
from flowmem.store.rows import dump_json

A = Address("session", "s1", "chat")
B = Address("session", "s2", "chat")


def call(cid: str, name: str = "search") -> dict[str, Any]:
    """An assistant turn declaring one call (normalized id spelling)."""
    return {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": cid, "name": name}]}


def result(cid: str, content: str = "ok") -> dict[str, Any]:
    """A tool result answering ``cid``."""
    return {"role": "tool", "content": content, "tool_call_id": cid}


def user(text: str) -> dict[str, Any]:
    """A user turn."""
    return {"role": "user", "content": text}


def call_both(first: str, second: str) -> dict[str, Any]:
    """An assistant turn declaring two calls."""
    calls = [{"tool_call_id": cid, "name": "search"} for cid in (first, second)]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def stored_append(store: Store, address: Address, incoming: Any, max_messages: int = 0) -> Any:
    """Append through the store exactly as the service does (prepare, then store.append)."""
    return store.append(address, prepare(incoming, None), max_messages)


def shape(rows: list[dict[str, Any]]) -> list[tuple[str, str, Any, bool]]:
    """A compact view of rows: role, content, the ids they declare or answer, healed."""
    return [
        (row["role"], row["content"], result_id(row) or call_ids(row), is_healed(row))
        for row in rows
    ]


# --- memory records ------------------------------------------------------------------------


def test_record_round_trip_of_json_values(store: Store) -> None:
    values: list[Any] = [None, True, 0, -7, 2.5, "", "héllo \u0000 nul", [1, [2]], {"a": {"b": []}}]
    for index, value in enumerate(values):
        address = Address("global", "", f"k{index}")
        store.put_record(address, value, None)
        assert store.get_record(address, now=0) == (True, value)


def test_record_overwrite_delete_and_missing(store: Store) -> None:
    assert store.get_record(A, now=0) == (False, None)
    store.put_record(A, {"v": 1}, None)
    store.put_record(A, {"v": 2}, None)
    assert store.get_record(A, now=0) == (True, {"v": 2})
    assert store.get_record(B, now=0) == (False, None)
    assert store.delete_record(A) is True
    assert store.delete_record(A) is False
    assert store.get_record(A, now=0) == (False, None)


def test_record_ttl_expired_reads_as_not_found(store: Store) -> None:
    store.put_record(A, "soon", expires_at=100.0)
    assert store.get_record(A, now=99.9) == (True, "soon")
    assert store.get_record(A, now=100.0) == (False, None)
    assert store.get_record(A, now=1e12) == (False, None)
    store.put_record(A, "forever", expires_at=None)
    assert store.get_record(A, now=1e12) == (True, "forever")


@pytest.mark.parametrize("bad", [object(), {1, 2}, math.nan, {"x": math.inf}, b"bytes"])
def test_record_not_serializable_writes_nothing(store: Store, bad: Any) -> None:
    store.put_record(A, "before", None)
    with pytest.raises(NotSerializableError):
        store.put_record(A, bad, None)
    assert store.get_record(A, now=0) == (True, "before")
    with pytest.raises(NotSerializableError):
        store.put_record(B, bad, None)
    assert store.get_record(B, now=0) == (False, None)


def test_addresses_are_distinct_in_every_part(store: Store) -> None:
    addresses = [
        Address("user", "1", "k"),
        Address("user", "1", "k2"),
        Address("user", "2", "k"),
        Address("session", "1", "k"),
        Address("global", "", "k"),
    ]
    for index, address in enumerate(addresses):
        store.put_record(address, index, None)
        stored_append(store, address, user(f"m{index}"))
    for index, address in enumerate(addresses):
        assert store.get_record(address, now=0) == (True, index)
        assert [r["content"] for r in store.load(address)] == [f"m{index}"]


# --- buffers ---------------------------------------------------------------------------------


def test_buffer_round_trip_order_count_and_last(store: Store) -> None:
    for index in range(12):
        outcome = stored_append(store, A, user(f"m{index}"))
        assert outcome.appended == 1
        assert outcome.count == index + 1
    rows = store.load(A)
    assert [r["content"] for r in rows] == [f"m{i}" for i in range(12)]
    assert rows[0] == {"role": "user", "content": "m0", "metadata": {}}
    assert [r["content"] for r in store.load(A, last=3)] == ["m9", "m10", "m11"]
    assert len(store.load(A, last=100)) == 12
    assert store.load(A, last=0) == []
    assert store.count(A) == 12
    assert store.load(B) == [] and store.count(B) == 0


def test_buffer_keeps_timestamps_and_extra_metadata(store: Store) -> None:
    rows = prepare([{"role": "user", "content": "hi", "lang": "pt", "timestamp": 1755000000}], 5)
    store.append(A, rows)
    assert store.load(A) == [
        {"role": "user", "content": "hi", "metadata": {"lang": "pt"}, "timestamp": 1755000000}
    ]


def test_append_snapshot_is_the_buffer_the_transaction_left(store: Store) -> None:
    stored_append(store, A, [call("c1"), user("first")])
    outcome = store.append(A, prepare(user("second"), None), 3, snapshot=True)
    assert outcome.rows == store.load(A)
    assert outcome.count == len(outcome.rows) == 2  # the call went with its healed result
    assert store.append(A, prepare(user("third"), None)).rows is None


def test_buffer_load_last_rejects_negative(store: Store) -> None:
    stored_append(store, A, user("x"))
    with pytest.raises(InvalidInputError):
        store.load(A, last=-1)


def test_buffer_clear(store: Store) -> None:
    stored_append(store, A, [call("c1"), user("x")])
    stored_append(store, B, user("y"))
    assert store.clear(A) == 3
    assert store.load(A) == [] and store.count(A) == 0
    assert store.clear(A) == 0
    assert store.count(B) == 1
    # a cleared buffer starts over: the old ids are forgotten
    assert stored_append(store, A, call("c1")).appended == 1


def test_clear_guarded_by_a_running_session_refuses_and_keeps_the_buffer(store: Store) -> None:
    sid = "3f1c0d2e-0000-4000-8000-00000000c1ea"
    address = Address("session", sid, "chat_history")
    store.create_session(SessionRecord(sid, "s", "alice", "idle", None, {}, 1.0, 1.0))
    stored_append(store, address, [user("a"), user("b")])
    assert store.set_session_status(sid, "running", frozenset({"idle"}))
    with pytest.raises(ConflictError):
        store.clear(address, guard_session=sid)
    assert store.count(address) == 2  # nothing deleted
    assert store.clear(address) == 2  # unguarded (the runtime's own calls) it clears
    stored_append(store, address, user("c"))
    assert store.set_session_status(sid, "completed", frozenset({"running"}))
    assert store.clear(address, guard_session=sid) == 1
    assert store.clear(address, guard_session="no-such-session") == 0


def test_mem_3_insert_after_orders_placeholders_mid_buffer(store: Store) -> None:
    """Healing inserts after each declaring turn's result run, repeatedly, in order."""
    stored_append(
        store,
        A,
        [
            user("q"),
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "a1"}, {"id": "a2"}, {"tool_call_id": "a3"}],
            },
            result("a2", "two"),
            {"role": "assistant", "content": "thinking"},
            call("b1"),
        ],
    )
    stored_append(store, A, user("next"))
    # c1 dangles in the middle of later turns, then gets healed after its turn
    stored_append(store, A, [call("c1"), {"role": "assistant", "content": "more"}])
    stored_append(store, A, [call("d1"), result("d1")])
    stored_append(store, A, user("again"))
    # a real result replaces a placeholder in place (MEM-10), then a duplicate is dropped
    stored_append(store, A, result("a3", "three"))
    stored_append(store, A, result("a3", "dup"))
    # a late real result for a healed call, then more healing after the same turn
    stored_append(store, A, [call("e1"), result("e1"), call("e2")])
    stored_append(store, A, user("last"))
    expected = [
        ("user", "q", [], False),
        ("assistant", "", ["a1", "a2", "a3"], False),
        ("tool", "two", "a2", False),
        ("tool", HEALED_CONTENT, "a1", True),
        ("tool", "three", "a3", False),
        ("assistant", "thinking", [], False),
        ("assistant", "", ["b1"], False),
        ("tool", HEALED_CONTENT, "b1", True),
        ("user", "next", [], False),
        ("assistant", "", ["c1"], False),
        ("tool", HEALED_CONTENT, "c1", True),
        ("assistant", "more", [], False),
        ("assistant", "", ["d1"], False),
        ("tool", "ok", "d1", False),
        ("user", "again", [], False),
        ("assistant", "", ["e1"], False),
        ("tool", "ok", "e1", False),
        ("assistant", "", ["e2"], False),
        ("tool", HEALED_CONTENT, "e2", True),
        ("user", "last", [], False),
    ]
    assert shape(store.load(A)) == expected
    assert store.count(A) == len(expected)
    assert check_sendable(store.load(A)) == []


def test_mem_10_replaced_placeholder_keeps_position_and_drops_healed(store: Store) -> None:
    stored_append(store, A, [call("c1"), user("u1"), user("u2")])
    outcome = stored_append(store, A, result("c1", "real"))
    assert (outcome.appended, outcome.count) == (0, 4)
    rows = store.load(A)
    assert rows[1] == {"role": "tool", "content": "real", "metadata": {"tool_call_id": "c1"}}
    assert stored_append(store, A, result("c1", "again")).appended == 0
    assert store.load(A)[1]["content"] == "real"


def test_mem_14_counts_new_rows_not_size_change(store: Store) -> None:
    stored_append(store, A, [user("a"), user("b"), user("c")], max_messages=3)
    outcome = stored_append(store, A, [user("d"), user("e")], max_messages=3)
    assert (outcome.appended, outcome.count) == (2, 3)
    assert [r["content"] for r in store.load(A)] == ["c", "d", "e"]


def test_window_evicts_turn_with_its_results_and_leading_tools(store: Store) -> None:
    stored_append(store, A, [call("c1"), result("c1"), user("a"), user("b")])
    outcome = stored_append(store, A, user("c"), max_messages=3)
    assert outcome.count == 3
    assert [r["content"] for r in store.load(A)] == ["a", "b", "c"]
    # evicting a turn takes its result even when it sits later (after a healed mid-buffer)
    stored_append(store, B, [call("x1"), user("u"), result("x1", "late"), user("v")])
    stored_append(store, B, user("w"), max_messages=3)
    assert shape(store.load(B))[0][0] != "tool"
    assert check_sendable(store.load(B)) == []
    # an evicted call's id is remembered: its turn sent again is a duplicate (MEM-2)
    assert stored_append(store, A, call("c1")).appended == 0


def test_mem_1_mem_2_an_evicted_result_and_its_turn_sent_again_are_duplicates(
    store: Store,
) -> None:
    """Issue 24 §2: with a window of 4, a late copy of an evicted result, then of its turn.

    Both were appended before: the buffer became [user, user, tool(c1), assistant(c1)],
    an orphan result and an unanswered call. The evicted call's id is remembered, so
    both are duplicates and the buffer stays sendable.
    """
    stored_append(store, A, [call("c1"), result("c1"), user("a"), user("b")], max_messages=4)
    assert stored_append(store, A, user("c"), max_messages=4).count == 3
    assert [r["content"] for r in store.load(A)] == ["a", "b", "c"]
    late = stored_append(store, A, result("c1"), max_messages=4)
    again = stored_append(store, A, call("c1"), max_messages=4)
    assert (late.appended, again.appended, again.count) == (0, 0, 3)
    assert [r["content"] for r in store.load(A)] == ["a", "b", "c"]
    assert check_sendable(store.load(A)) == []
    # in one batch, and for a call evicted with only its healed placeholder (MEM-3)
    stored_append(store, B, [call("c2"), user("x"), user("y")], max_messages=2)
    assert [r["role"] for r in store.load(B)] == ["user", "user"]
    both = stored_append(store, B, [result("c2"), call("c2")], max_messages=4)
    assert (both.appended, both.count) == (0, 2)
    # a turn that declares the id again, with a new one, is appended: its result then pairs
    fresh = stored_append(store, A, [call_both("c1", "c3"), result("c1"), result("c3")], 4)
    assert fresh.appended == 3
    assert check_sendable(store.load(A)) == []


def test_mem_1_mem_2_a_buffer_remembers_a_bounded_number_of_evicted_call_ids(
    store: Store,
) -> None:
    """The latest EVICTED_CALLS_KEPT ids are remembered; an older one is a new call again."""
    turns = [[call(f"k{i}"), result(f"k{i}"), user(f"u{i}")] for i in range(EVICTED_CALLS_KEPT + 1)]
    stored_append(store, A, [row for turn in turns for row in turn], max_messages=1)
    assert [r["content"] for r in store.load(A)] == [f"u{EVICTED_CALLS_KEPT}"]
    assert stored_append(store, A, call(f"k{EVICTED_CALLS_KEPT}")).appended == 0  # the latest
    assert stored_append(store, A, call("k1")).appended == 0  # still among the kept
    assert stored_append(store, A, call("k0")).appended == 1  # the oldest: forgotten
    # clearing the buffer forgets them all
    store.clear(A)
    assert stored_append(store, A, call("k1")).appended == 1


def test_window_never_leaves_a_leading_tool_row(store: Store) -> None:
    stored_append(store, A, [user("a"), result("orphan"), user("b")])
    outcome = stored_append(store, A, user("c"), max_messages=3)
    assert [r["role"] for r in store.load(A)] == ["user", "user"]
    assert outcome.count == 2


def test_mem_1_orphan_result_stored_before_declaration_still_counts(store: Store) -> None:
    stored_append(store, A, [result("c9", "early"), call("c9")])
    outcome = stored_append(store, A, user("u"))
    # answered "anywhere in the buffer": nothing is healed, the orphan stays
    assert outcome.count == 3
    assert [r["role"] for r in store.load(A)] == ["tool", "assistant", "user"]
    assert stored_append(store, A, result("c9", "again")).appended == 0


def test_invalid_rows_and_window_change_nothing(store: Store) -> None:
    stored_append(store, A, user("keep"))
    with pytest.raises(InvalidInputError):
        store.append(A, prepare(user("x")), max_messages=-1)
    with pytest.raises(NotSerializableError):
        store.append(A, [{"role": "user", "content": "x", "metadata": {"o": object()}}])
    assert store.load(A) == [{"role": "user", "content": "keep", "metadata": {}}]
    assert store.count(A) == 1


# --- sessions, transcripts, tokens ------------------------------------------------------------


def _session(sid: str, owner: str | None, created: float) -> SessionRecord:
    return SessionRecord(
        id=sid,
        name=f"n-{sid}",
        owner=owner,
        agent="helper",
        metadata={"k": [1, "v"]},
        created_at=created,
        updated_at=created + 1,
    )


def test_sessions_round_trip_list_status_delete(store: Store) -> None:
    sessions = [
        _session("00000000-0000-0000-0000-00000000000a", "alice", 10.0),
        _session("00000000-0000-0000-0000-00000000000b", "bob", 20.0),
        _session("00000000-0000-0000-0000-00000000000c", "alice", 30.0),
        _session("00000000-0000-0000-0000-00000000000d", None, 40.0),
    ]
    for item in sessions:
        assert store.create_session(item) == item
    assert store.get_session(sessions[0].id) == sessions[0]
    assert store.get_session("nope") is None
    with pytest.raises(ConflictError):
        store.create_session(sessions[0])
    page, total = store.list_sessions("alice", False, 10, 0)
    assert [s.id for s in page] == [sessions[2].id, sessions[0].id] and total == 2
    page, total = store.list_sessions(None, False, 10, 0)
    assert (page, total) == ([], 0)
    page, total = store.list_sessions(None, True, 2, 1)
    assert [s.id for s in page] == [sessions[2].id, sessions[1].id] and total == 4
    assert store.set_session_status(sessions[0].id, "running", frozenset({"idle"})) is True
    assert store.set_session_status(sessions[0].id, "running", frozenset({"idle"})) is False
    assert store.set_session_status(sessions[0].id, "completed") is True
    assert store.set_session_status("nope", "running") is False
    got = store.get_session(sessions[0].id)
    assert got is not None and got.status == "completed"
    store.add_transcript(sessions[0].id, {"role": "user", "content": "x", "metadata": {}})
    assert store.delete_session(sessions[0].id) is True
    assert store.delete_session(sessions[0].id) is False
    assert store.get_session(sessions[0].id) is None
    assert store.list_transcript(sessions[0].id) == ([], False)


def test_deleting_a_session_deletes_its_whole_session_scope(store: Store) -> None:
    gone, kept = "00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000a2"
    for sid in (gone, kept):
        store.create_session(_session(sid, "alice", 1.0))
        store.add_transcript(sid, {"role": "user", "content": "x", "metadata": {}})
        for key in ("chat_history", "notes"):
            store.append(Address("session", sid, key), [call("c1"), user("next")])
        store.put_record(Address("session", sid, "k"), {"v": 1}, None)
    # the same id in another scope is not the session's
    store.put_record(Address("user", gone, "k"), 1, None)
    store.append(Address("workflow", gone, "chat_history"), [user("w")])

    assert store.delete_session(gone) is True

    for key in ("chat_history", "notes"):
        assert store.load(Address("session", gone, key)) == []
        assert store.count(Address("session", gone, key)) == 0
        assert len(store.load(Address("session", kept, key))) == 3  # call, healed, user
    assert store.get_record(Address("session", gone, "k"), 0.0) == (False, None)
    assert store.get_record(Address("session", kept, "k"), 0.0) == (True, {"v": 1})
    assert store.get_record(Address("user", gone, "k"), 0.0) == (True, 1)
    assert store.count(Address("workflow", gone, "chat_history")) == 1
    assert store.list_transcript(gone) == ([], False)
    assert len(store.list_transcript(kept)[0]) == 1
    # a buffer started again under the old id starts empty: no row or call index survived
    outcome = store.append(Address("session", gone, "notes"), [user("again")])
    assert (outcome.count, outcome.appended) == (1, 1)
    assert store.load(Address("session", gone, "notes")) == [user("again")]


def test_deleting_an_unknown_session_changes_nothing(store: Store) -> None:
    sid = "00000000-0000-0000-0000-0000000000b1"
    store.append(Address("session", sid, "chat_history"), [user("orphan")])
    store.put_record(Address("session", sid, "k"), 1, None)
    assert store.delete_session(sid) is False
    assert store.count(Address("session", sid, "chat_history")) == 1
    assert store.get_record(Address("session", sid, "k"), 0.0) == (True, 1)


def test_purge_expired_deletes_only_expired_records_in_batches(store: Store) -> None:
    for index in range(5):
        store.put_record(Address("global", "", f"old{index}"), index, 10.0 + index)
    store.put_record(Address("user", "alice", "fresh"), "f", 100.0)
    store.put_record(Address("user", "alice", "forever"), "v", None)
    store.put_record(Address("global", "", "edge"), "e", 50.0)

    assert store.purge_expired(50.0, limit=3) == 3
    assert store.purge_expired(50.0, limit=3) == 3  # the other two old ones and the edge
    assert store.purge_expired(50.0) == 0
    for index in range(5):
        assert store.get_record(Address("global", "", f"old{index}"), 0.0) == (False, None)
    assert store.get_record(Address("global", "", "edge"), 0.0) == (False, None)
    assert store.get_record(Address("user", "alice", "fresh"), 0.0) == (True, "f")
    assert store.get_record(Address("user", "alice", "forever"), 0.0) == (True, "v")
    with pytest.raises(InvalidInputError):
        store.purge_expired(50.0, limit=-1)


def _fill_user(store: Store, user_id: str, sids: list[str]) -> None:
    """Give ``user_id`` sessions with data, a user-scope buffer and record, and a token."""
    for sid in sids:
        store.create_session(_session(sid, user_id, 1.0))
        store.add_transcript(sid, {"role": "user", "content": "x", "metadata": {}})
        store.append(Address("session", sid, "chat_history"), [user("hi")])
        store.put_record(Address("session", sid, "k"), 1, None)
    store.append(Address("user", user_id, "profile"), [user("likes tea")])
    store.put_record(Address("user", user_id, "name"), "A", None)
    store.put_record(Address("user", user_id, "city"), "B", None)
    store.create_token(TokenRecord(f"t-{user_id}", f"h-{user_id}", user_id, frozenset(), 1.0))


def test_erasing_a_user_deletes_its_sessions_user_scope_and_tokens(store: Store) -> None:
    alice = ["00000000-0000-0000-0000-0000000000e1", "00000000-0000-0000-0000-0000000000e2"]
    bob = ["00000000-0000-0000-0000-0000000000e3"]
    _fill_user(store, "alice", alice)
    _fill_user(store, "bob", bob)

    erased = store.erase_user("alice")

    assert erased == Erasure(sessions=2, buffers=3, records=4, tokens=1)
    for sid in alice:
        assert store.get_session(sid) is None
        assert store.count(Address("session", sid, "chat_history")) == 0
        assert store.list_transcript(sid) == ([], False)
    assert store.count(Address("user", "alice", "profile")) == 0
    assert store.get_record(Address("user", "alice", "name"), 0.0) == (False, None)
    assert store.token_by_hash("h-alice") is None
    # bob is untouched
    assert store.get_session(bob[0]) is not None
    assert store.count(Address("session", bob[0], "chat_history")) == 1
    assert store.count(Address("user", "bob", "profile")) == 1
    assert store.get_record(Address("user", "bob", "name"), 0.0) == (True, "A")
    assert store.token_by_hash("h-bob") is not None
    assert store.erase_user("alice") == Erasure()


def test_erasing_a_user_with_a_running_session_changes_nothing(store: Store) -> None:
    sids = ["00000000-0000-0000-0000-0000000000f1", "00000000-0000-0000-0000-0000000000f2"]
    _fill_user(store, "alice", sids)
    assert store.set_session_status(sids[1], "running")
    with pytest.raises(ConflictError, match="running"):
        store.erase_user("alice")
    for sid in sids:
        assert store.get_session(sid) is not None
        assert store.count(Address("session", sid, "chat_history")) == 1
    assert store.count(Address("user", "alice", "profile")) == 1
    assert store.token_by_hash("h-alice") is not None


def test_transcripts_sequence_and_cursors(store: Store) -> None:
    sid = "00000000-0000-0000-0000-000000000001"
    store.create_session(_session(sid, "alice", 1.0))
    for index in range(1, 8):
        item = store.add_transcript(sid, {"role": "user", "content": f"m{index}", "metadata": {}})
        assert (item.session_id, item.seq) == (sid, index)
    rows, more = store.list_transcript(sid, limit=3)
    assert [r.seq for r in rows] == [1, 2, 3] and more
    rows, more = store.list_transcript(sid, since=3, limit=3)
    assert [r.seq for r in rows] == [4, 5, 6] and more
    rows, more = store.list_transcript(sid, since=6, limit=3)
    assert [r.seq for r in rows] == [7] and not more
    rows, more = store.list_transcript(sid, newest_first=True, limit=2)
    assert [r.seq for r in rows] == [7, 6] and more
    rows, more = store.list_transcript(sid, before=3, newest_first=True, limit=5)
    assert [r.seq for r in rows] == [2, 1] and not more
    rows, more = store.list_transcript(sid, since=2, before=5)
    assert [r.seq for r in rows] == [3, 4] and not more
    assert rows[0].row == {"role": "user", "content": "m3", "metadata": {}}
    assert store.edit_transcript(sid, 3, {"role": "user", "content": "edited", "metadata": {}})
    assert not store.edit_transcript(sid, 99, {"role": "user", "content": "x", "metadata": {}})
    assert store.delete_transcript(sid, 7) is True
    assert store.delete_transcript(sid, 7) is False
    # sequence numbers are never reused, even after deleting the newest row
    assert store.add_transcript(sid, {"role": "user", "content": "m8", "metadata": {}}).seq == 8
    rows, _ = store.list_transcript(sid, limit=100)
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5, 6, 8]
    assert rows[2].row["content"] == "edited"
    other = store.list_transcript("00000000-0000-0000-0000-000000000002")
    assert other == ([], False)


def test_tokens_round_trip_and_revoke(store: Store) -> None:
    first = TokenRecord("t1", "h1", "alice", frozenset({"read", "write"}), 1.0, label="cli")
    second = TokenRecord("t2", "h2", None, frozenset(), 2.0)
    store.create_token(second)
    store.create_token(first)
    assert store.token_by_hash("h1") == first
    assert store.token_by_hash("nope") is None
    assert [t.id for t in store.list_tokens()] == ["t1", "t2"]
    assert store.revoke_token("t2") is True
    assert store.revoke_token("zz") is False
    revoked = store.token_by_hash("h2")
    assert revoked is not None and revoked.revoked and revoked.user_id is None


# --- the same rules as the core -----------------------------------------------------------------


def test_core_and_store_agree_on_a_long_scripted_history(store: Store) -> None:
    batches: list[Any] = [
        user("start"),
        [call("c1"), call("c2")],
        result("c2"),
        user("u1"),
        result("c1", "late"),
        [call("c1"), call("c3")],
        user("u2"),
        {"role": "tool", "content": "fake", "tool_call_id": "c3", "healed": True},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c3"}, {"id": "c4"}]},
        result("c4"),
        user(""),
        user("u3"),
    ]
    pure: list[dict[str, Any]] = []
    for batch in batches:
        expected = append(pure, batch, max_messages=0)
        got = stored_append(store, A, batch)
        pure = expected.messages
        assert (got.appended, got.count) == (expected.appended, expected.count)
        assert store.load(A) == pure


def test_pop_last_removes_the_newest_row_and_its_index(store: Store) -> None:
    assert isinstance(store, SupportsPopLast)
    assert store.pop_last(A) is None
    stored_append(store, A, [call("c1"), result("c1", "r"), user("u")])
    assert store.pop_last(A) == {"role": "user", "content": "u", "metadata": {}}
    assert store.pop_last(A) == {"role": "tool", "content": "r", "metadata": {"tool_call_id": "c1"}}
    assert store.count(A) == 1
    # the call is unanswered again: a new result is appended, a user turn would heal it
    assert stored_append(store, A, result("c1", "again")).appended == 1
    store.pop_last(A)
    stored_append(store, A, user("v"))
    assert shape(store.load(A)) == [
        ("assistant", "", ["c1"], False),
        ("tool", HEALED_CONTENT, "c1", True),
        ("user", "v", [], False),
    ]
    store.pop_last(A)
    store.pop_last(A)
    store.pop_last(A)
    assert store.pop_last(A) is None
    assert store.count(A) == 0 and store.load(A) == []
    # the id is forgotten with its declaration
    assert stored_append(store, A, call("c1")).appended == 1


def test_out_of_range_input_is_refused_with_typed_errors(store: Store) -> None:
    sid = "00000000-0000-0000-0000-000000000009"
    store.create_session(_session(sid, "alice", 1.0))
    for bad in (-1, True, 1.5):
        with pytest.raises(InvalidInputError):
            store.list_sessions("alice", False, bad, 0)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError):
            store.list_sessions("alice", False, 10, bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError):
            store.list_transcript(sid, limit=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        store.load(A, last=True)
    stored_append(store, A, user("x"))
    assert [r["content"] for r in store.load(A, last=2**70)] == ["x"]
    nul = Address("global", "", "nul\x00key")
    with pytest.raises(InvalidInputError):
        store.put_record(nul, 1, None)
    with pytest.raises(InvalidInputError):
        stored_append(store, nul, user("x"))


def test_lock_timeout_must_be_a_number(store: Store) -> None:
    for bad in (math.nan, "1", None, True):
        with pytest.raises(InvalidInputError):
            store.append(A, prepare(user("x")), lock_timeout=bad)  # type: ignore[arg-type]
    assert store.count(A) == 0
    assert store.append(A, prepare(user("x")), lock_timeout=-3).count == 1


# --- lossless content (decision 0021) ---------------------------------------------------------

EVERY_PART: list[dict[str, Any]] = [
    {"type": "text", "text": "héllo", "extra": {"anthropic": {"cache_control": {"type": "ephemeral"}}}},
    {"type": "image", "url": "https://example.com/cat.png", "detail": "high"},
    {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"},
    {"type": "image", "file_id": "file-1"},
    {"type": "audio", "data": "UklGRg==", "format": "wav"},
    {"type": "audio", "id": "audio_1", "transcript": "hi"},
    {"type": "file", "file_id": "file-2", "filename": "a.pdf", "media_type": "application/pdf"},
    {"type": "file", "url": "https://example.com/a.pdf"},
    {"type": "file", "data": "JVBERi0=", "filename": "b.pdf"},
    {"type": "provider", "provider": "responses", "block": {"type": "web_search_call", "id": "ws_1",
                                                            "status": "completed", "action": {}}},
]
REASONING = [
    {"type": "reasoning", "text": "think", "signature": "EqQBCkgIARABGAIi", "provider": "anthropic"},
    {"type": "reasoning", "redacted_data": "EmwKAhgBEgw=", "provider": "anthropic"},
    {"type": "reasoning", "summary": ["s1", "s2"], "encrypted_content": "gAAAA", "provider": "responses",
     "extra": {"responses": {"id": "rs_1"}}},
]
KINDS = ["function", "custom", "computer", "local_shell", "shell", "apply_patch", "mcp_approval"]


def lossless_history() -> list[dict[str, Any]]:
    """Rows carrying every part kind, is_error, extra and every call kind."""
    calls = [
        {"tool_call_id": f"k{i}", "name": kind, "args": {"i": i}, "kind": kind,
         "extra": {"responses": {"id": f"item_{i}", "status": "completed"}}}
        for i, kind in enumerate(KINDS)
    ]  # fmt: skip
    results = [
        {"role": "tool", "content": [{"type": "image", "data": "c2hvdA==", "media_type": "image/png"}]
         if kind == "computer" else f"out {kind}", "tool_call_id": f"k{i}",
         "is_error": kind == "shell", "extra": {"responses": {"id": f"out_{i}"}}}
        for i, kind in enumerate(KINDS)
    ]  # fmt: skip
    return [
        {"role": "system", "content": [{"type": "text", "text": "sys"}],
         "extra": {"anthropic": {"cache_control": {"type": "ephemeral"}}}},
        {"role": "user", "content": EVERY_PART, "extra": {"openai": {"name": "ann"}}},
        {"role": "assistant", "content": [*REASONING, {"type": "text", "text": "calling"}],
         "tool_calls": calls, "extra": {"openai": {"refusal": None}}},
        *results,
        {"role": "user", "content": [{"type": "image", "url": "https://example.com/2.png"}]},
        {"role": "assistant", "content": [EVERY_PART[-1], {"type": "text", "text": "done"}]},
    ]  # fmt: skip


def test_rows_with_every_part_kind_read_back_equal(store: Store) -> None:
    rows = prepare(lossless_history(), 1_755_000_000)
    outcome = store.append(A, rows)
    assert outcome.appended == len(rows)
    loaded = store.load(A)
    assert loaded == rows
    assert loaded[1]["content"] == EVERY_PART  # a list stays a list
    assert loaded[3]["metadata"]["is_error"] is False and loaded[7]["metadata"]["is_error"] is True
    assert [c["kind"] for c in loaded[2]["metadata"]["tool_calls"]] == KINDS
    assert store.load(A, last=2) == rows[-2:]
    assert check_sendable(loaded) == []


def test_part_rows_follow_the_append_rules(store: Store) -> None:
    history = lossless_history()
    turn, first_result = history[2], history[3]
    stored_append(store, A, [turn, first_result, user("next")])  # heals six calls
    rows = store.load(A)
    assert [is_healed(r) for r in rows[1:]] == [False, *[True] * 6, False]
    assert rows[0]["content"] == turn["content"]
    # MEM-10: a real screenshot result replaces the computer call's placeholder in place
    screenshot = history[5]
    assert stored_append(store, A, screenshot).appended == 0
    rows = store.load(A)
    assert rows[3]["content"] == screenshot["content"] and not is_healed(rows[3])
    # MEM-2: the turn again is a duplicate; the empty part list is an empty message
    assert stored_append(store, A, [turn, {"role": "user", "content": []}]).appended == 0
    assert stored_append(store, A, {"role": "user", "content": [EVERY_PART[1]]}).appended == 1
    assert store.load(A, last=1)[0]["content"] == [EVERY_PART[1]]


def test_pop_last_returns_part_rows_intact(store: Store) -> None:
    if not isinstance(store, SupportsPopLast):
        pytest.skip("this backend has no pop_last")
    rows = prepare(lossless_history()[-1:], 3)
    store.append(A, rows)
    assert store.pop_last(A) == rows[0]
# --- write guards (docs/decisions/0014) ---------------------------------------------------


def _guarded_writes(store: Store, guard: WriteGuard, address: Address) -> list[str]:
    """Try a guarded record write, append and transcript row; return the errors' codes."""
    codes = []
    for write in (
        lambda: store.put_record(address, "late", None, guard),
        lambda: store.append(address, [user("late")], guard=guard),
        lambda: store.add_transcript(guard.session_id or "-", user("late"), guard),
    ):
        with pytest.raises((AuthenticationError, NotFoundError)) as caught:
            write()
        codes.append(caught.value.code)
    return codes


def test_guarded_writes_of_an_erased_token_store_nothing(store: Store) -> None:
    sid = "00000000-0000-0000-0000-0000000000a1"
    _fill_user(store, "alice", [sid])
    token = WriteGuard(token_id="t-alice")
    where = Address("user", "alice", "notes")
    store.put_record(where, "early", None, token)  # holds: written
    assert store.append(where, [user("early")], guard=token).count == 1
    store.erase_user("alice")
    assert _guarded_writes(store, token, where) == ["unauthenticated"] * 3
    both = WriteGuard("t-alice", sid)  # the token is checked first
    assert _guarded_writes(store, both, Address("session", sid, "k")) == ["unauthenticated"] * 3
    assert store.count(where) == 0 and store.get_record(where, 0.0) == (False, None)
    assert store.count(Address("session", sid, "k")) == 0
    assert store.list_transcript(sid) == ([], False)
    late = _session("00000000-0000-0000-0000-0000000000a6", "alice", 2.0)
    with pytest.raises(AuthenticationError):
        store.create_session(late, token)
    assert store.get_session(late.id) is None
    assert store.list_sessions("alice", False, 10, 0) == ([], 0)


def test_guarded_writes_of_a_revoked_token_store_nothing(store: Store) -> None:
    store.create_token(TokenRecord("t-r", "h-r", "alice", frozenset(), 1.0))
    assert store.revoke_token("t-r")
    where = Address("user", "alice", "notes")
    sid = "00000000-0000-0000-0000-0000000000a2"
    store.create_session(_session(sid, "alice", 1.0))
    assert _guarded_writes(store, WriteGuard("t-r", sid), where) == ["unauthenticated"] * 3
    assert store.count(where) == 0 and store.get_record(where, 0.0) == (False, None)
    assert store.list_transcript(sid) == ([], False)


def test_guarded_writes_of_a_deleted_session_store_nothing(store: Store) -> None:
    sid = "00000000-0000-0000-0000-0000000000a3"
    store.create_session(_session(sid, "alice", 1.0))
    store.create_token(TokenRecord("t-a", "h-a", "alice", frozenset(), 1.0))
    where = Address("session", sid, "notes")
    guard = WriteGuard("t-a", sid)
    store.put_record(where, "early", None, guard)
    store.append(where, [user("early")], guard=guard)
    assert store.add_transcript(sid, user("early"), guard).seq == 1
    assert store.delete_session(sid)
    for guarded in (guard, WriteGuard(session_id=sid)):
        assert _guarded_writes(store, guarded, where) == ["not_found"] * 3
    assert store.count(where) == 0 and store.get_record(where, 0.0) == (False, None)
    assert store.list_transcript(sid) == ([], False)


def test_a_transcript_row_needs_its_session(store: Store) -> None:
    with pytest.raises(NotFoundError):
        store.add_transcript("00000000-0000-0000-0000-0000000000a4", user("x"))
    assert store.list_transcript("00000000-0000-0000-0000-0000000000a4") == ([], False)


def test_deleting_a_running_session_changes_nothing(store: Store) -> None:
    sid = "00000000-0000-0000-0000-0000000000a5"
    _fill_user(store, "alice", [sid])
    assert store.set_session_status(sid, "running")
    with pytest.raises(ConflictError, match="running"):
        store.delete_session(sid)
    assert store.get_session(sid) is not None
    assert store.count(Address("session", sid, "chat_history")) == 1
    assert store.get_record(Address("session", sid, "k"), 0.0) == (True, 1)
    assert len(store.list_transcript(sid)[0]) == 1
# --- buffer size (the buffer_bytes limit) and unparsed reads ------------------------------


def _size(rows: list[dict[str, Any]]) -> int:
    """UTF-8 bytes of rows as the stores write them (compact JSON)."""
    return sum(len(dump_json(row, "message").encode()) for row in rows)


def _stored_size(store: Store, address: Address) -> int:
    return sum(len(text.encode()) for _, text in store.load_bodies(address))


def _assert_tracked_size(store: Store, address: Address) -> None:
    """The size the store keeps is the size of its rows: one byte more is refused, exact fits."""
    row = prepare({"role": "assistant", "content": "probe ✓"}, None)  # heals nothing
    limit = _stored_size(store, address) + _size(row)
    before = store.load(address)
    with pytest.raises(BufferFullError) as info:
        store.append(address, row, max_bytes=limit - 1)
    assert info.value.code == "buffer_full"
    assert store.load(address) == before  # nothing written
    store.append(address, row, max_bytes=limit)
    assert store.load(address)[-1]["content"] == "probe ✓"


def test_buffer_size_is_tracked_through_every_kind_of_change(store: Store) -> None:
    stored_append(store, A, [user("héllo"), call("c1"), call("c2"), result("c2", "x" * 300)])
    _assert_tracked_size(store, A)
    stored_append(store, A, user("heals c1"))  # a placeholder inserted after its turn
    _assert_tracked_size(store, A)
    stored_append(store, A, result("c1", "the real answer, longer than the placeholder"))
    _assert_tracked_size(store, A)  # the placeholder replaced in place
    stored_append(store, A, [user("a" * 100), user("b")], max_messages=3)  # evicted rows
    _assert_tracked_size(store, A)
    if isinstance(store, SupportsPopLast):
        store.pop_last(A)
        _assert_tracked_size(store, A)
    store.clear(A)
    _assert_tracked_size(store, A)


def test_buffer_limit_refuses_growth_but_not_a_window_that_keeps_it(store: Store) -> None:
    rows = prepare([user("x" * 100) for _ in range(4)], None)
    store.append(A, rows, max_bytes=_size(rows))
    with pytest.raises(BufferFullError):
        store.append(A, prepare(user("y"), None), max_bytes=_size(rows))
    assert store.count(A) == 4
    # a windowed append that evicts as much as it adds leaves the buffer no larger: allowed
    outcome = store.append(A, prepare(user("z" * 100), None), max_messages=4, max_bytes=_size(rows))
    assert (outcome.appended, outcome.count) == (1, 4)
    # a limit of 0 is no limit
    store.append(A, prepare(user("w" * 1000), None), max_bytes=0)
    assert store.count(A) == 5


def test_load_bodies_returns_stored_json_with_cursors(store: Store) -> None:
    stored_append(store, A, [user(f"m{n}") for n in range(5)])
    found = store.load_bodies(A)
    assert [json.loads(text) for _, text in found] == store.load(A)
    cursors = [cursor for cursor, _ in found]
    assert cursors == sorted(cursors) and len(set(cursors)) == 5
    assert [json.loads(t)["content"] for _, t in store.load_bodies(A, last=2)] == ["m3", "m4"]
    older = store.load_bodies(A, last=2, before=cursors[3])
    assert [json.loads(t)["content"] for _, t in older] == ["m1", "m2"]
    assert [c for c, _ in store.load_bodies(A, before=cursors[2])] == cursors[:2]
    assert store.load_bodies(A, last=0) == [] and store.load_bodies(B) == []
def test_iter_rows_yields_the_whole_buffer_in_order_batch_by_batch(store: Store) -> None:
    stored_append(store, A, [user("q"), call("c1"), result("c1"), user("r")])
    stored_append(store, A, [user(f"m{n}") for n in range(5)])
    for batch in (1, 2, 3, 1000):
        assert list(store.iter_rows(A, batch=batch)) == store.load(A)
    assert list(store.iter_rows(A)) == store.load(A)
    assert list(store.iter_rows(B)) == []


def test_iter_rows_is_one_snapshot_while_other_appends_commit(store: Store) -> None:
    stored_append(store, A, [user(f"m{n}") for n in range(6)])
    rows = store.iter_rows(A, batch=2)
    first = next(rows)
    stored_append(store, A, [user("late")])
    assert store.count(A) == 7
    seen = [first, *rows]
    assert [row["content"] for row in seen] == [f"m{n}" for n in range(6)]


def test_iter_rows_closed_early_leaves_the_store_usable(store: Store) -> None:
    stored_append(store, A, [user(f"m{n}") for n in range(5)])
    rows = store.iter_rows(A, batch=2)
    assert next(rows)["content"] == "m0"
    rows.close()  # type: ignore[attr-defined]
    assert store.clear(A) == 5
    stored_append(store, A, [user("again")])
    assert [row["content"] for row in store.iter_rows(A)] == ["again"]


@pytest.mark.parametrize("batch", [0, -1, True, 1.5, "2"])
def test_iter_rows_refuses_a_batch_that_is_not_a_positive_integer(store: Store, batch: Any) -> None:
    with pytest.raises(InvalidInputError):
        store.iter_rows(A, batch=batch)


def test_load_of_more_rows_than_one_read_batch_keeps_order(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flowmem.store.sqlbase as sqlbase

    monkeypatch.setattr(sqlbase, "LOAD_BATCH", 3)
    stored_append(store, A, [user(f"m{n}") for n in range(10)])
    assert [row["content"] for row in store.load(A)] == [f"m{n}" for n in range(10)]


def test_loaded_rows_share_no_mutable_object(store: Store) -> None:
    stored_append(store, A, [user("a"), user("b"), call("c1"), result("c1"), call("c2", "search")])
    for rows in (store.load(A), list(store.iter_rows(A))):
        rows[0]["metadata"]["note"] = "mine"
        rows[2]["metadata"]["tool_calls"][0]["name"] = "changed"
        assert "note" not in rows[1]["metadata"]
        assert rows[4]["metadata"]["tool_calls"][0]["name"] == "search"
    assert "note" not in store.load(A)[0]["metadata"]


# --- text that cannot be stored (issue 12): every backend refuses it alike ---------------

LONE = "a\ud800b"


@pytest.mark.parametrize(
    "value", [LONE, {LONE: 1}, {"k": [LONE]}, ["\udfff"], {"pair": "\ud83d\ude00"[::-1]}]
)
def test_unstorable_text_in_a_record_raises_invalid_text_and_writes_nothing(
    store: Store, value: Any
) -> None:
    store.put_record(A, "before", None)
    with pytest.raises(InvalidTextError) as caught:
        store.put_record(A, value, None)
    assert caught.value.code == "invalid_text" and isinstance(caught.value, InvalidInputError)
    assert store.get_record(A, now=0) == (True, "before")


@pytest.mark.parametrize(
    "address",
    [Address("user", LONE, "k"), Address("user", "u", LONE), Address("global", "", "\udc80")],
)
def test_unstorable_text_in_an_address_raises_invalid_text(store: Store, address: Address) -> None:
    with pytest.raises(InvalidTextError):
        store.put_record(address, 1, None)
    with pytest.raises(InvalidTextError):
        store.append(address, prepare(user("x")))
    with pytest.raises(InvalidTextError):
        store.get_record(address, now=0)


@pytest.mark.parametrize(
    "row",
    [
        {"role": "user", "content": LONE, "metadata": {}},
        {"role": "user", "content": "x", "metadata": {LONE: 1}},
        {"role": "tool", "content": "x", "metadata": {"tool_call_id": LONE}},
        {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"id": LONE}]}},
    ],
)
def test_unstorable_text_in_a_row_raises_invalid_text_and_appends_nothing(
    store: Store, row: dict[str, Any]
) -> None:
    """Rows as the service hands them over (already prepared): the store refuses too."""
    stored_append(store, A, user("keep"))
    with pytest.raises(InvalidTextError):
        store.append(A, [row])
    with pytest.raises(InvalidTextError):
        store.append(B, [user("first"), row], max_messages=1)
    assert store.load(A) == [{"role": "user", "content": "keep", "metadata": {}}]
    assert store.load(B) == []


def test_unstorable_text_in_sessions_transcripts_and_tokens_raises_invalid_text(
    store: Store,
) -> None:
    sid = "00000000-0000-0000-0000-0000000000e1"
    for bad in (
        {"name": LONE},
        {"owner": LONE},
        {"agent": LONE},
        {"metadata": {"k": LONE}},
        {"metadata": {LONE: 1}},
    ):
        base = _session(sid, "alice", 1.0)
        fields = {**base.__dict__, **bad}
        with pytest.raises(InvalidTextError):
            store.create_session(SessionRecord(**fields))
        assert store.get_session(sid) is None
    store.create_session(_session(sid, "alice", 1.0))
    item = store.add_transcript(sid, {"role": "user", "content": "ok", "metadata": {}})
    with pytest.raises(InvalidTextError):
        store.add_transcript(sid, {"role": "user", "content": LONE, "metadata": {}})
    with pytest.raises(InvalidTextError):
        store.edit_transcript(sid, item.seq, {"role": "user", "content": LONE, "metadata": {}})
    rows, _ = store.list_transcript(sid)
    assert [(m.seq, m.row["content"]) for m in rows] == [(item.seq, "ok")]
    for bad_token in (
        TokenRecord("t-bad", "h-bad", LONE, frozenset(), 1.0),
        TokenRecord("t-bad", "h-bad", "alice", frozenset(), 1.0, label=LONE),
    ):
        with pytest.raises(InvalidTextError):
            store.create_token(bad_token)
    assert store.list_tokens() == []


# --- one session model: claimed sessions (docs/decisions/0032) ------------------------------


def _claim(sid: str, owner: str | None, *, token: str | None = None, **kw: Any) -> WriteGuard:
    """A guard claiming session ``sid`` for ``owner`` (created when absent unless create=False)."""
    kw.setdefault("create", True)
    kw.setdefault("created_at", 5.0)
    return WriteGuard(token, sid, SessionClaim(owner=owner, **kw))


def _claiming_writes(store: Store, guard: WriteGuard) -> list[Any]:
    """A claimed record write and append to the guard's session scope."""
    sid = guard.session_id or ""
    return [
        lambda: store.put_record(Address("session", sid, "topic"), "Lisbon", None, guard),
        lambda: store.append(Address("session", sid, "chat"), [user("weather?")], guard=guard),
    ]


def test_mem_8_a_claiming_write_creates_its_session_owned_by_the_claimed_owner(
    store: Store,
) -> None:
    for n, write in enumerate(_claiming_writes(store, _claim("s-weather", "alice"))):
        write()
        session = store.get_session("s-weather")
        assert session is not None
        assert (session.owner, session.name, session.status, session.created_at) == (
            "alice", "", "idle", 5.0,
        )  # fmt: skip
        assert store.list_sessions("alice", False, 10, 0)[1] == 1, n
    assert store.count(Address("session", "s-weather", "chat")) == 1
    assert store.get_record(Address("session", "s-weather", "topic"), 0.0) == (True, "Lisbon")
    # the session is the owner's: its delete and the owner's erasure remove the scope
    assert store.erase_user("alice").sessions == 1
    assert store.count(Address("session", "s-weather", "chat")) == 0
    assert store.get_record(Address("session", "s-weather", "topic"), 0.0) == (False, None)


def test_mem_9_a_claim_without_an_owner_creates_a_session_owned_by_nobody(store: Store) -> None:
    for write in _claiming_writes(store, _claim("s-anon", None)):
        write()
    session = store.get_session("s-anon")
    assert session is not None and session.owner is None
    assert store.list_sessions(None, False, 10, 0) == ([], 0)  # nobody lists it as theirs
    assert store.delete_session("s-anon")
    assert store.count(Address("session", "s-anon", "chat")) == 0


def test_mem_8_a_claim_by_another_owner_is_refused_and_stores_nothing(store: Store) -> None:
    store.create_session(_session("s-bob", "bob", 1.0))
    for claimant in ("alice", None):
        for write in _claiming_writes(store, _claim("s-bob", claimant)):
            with pytest.raises(AccessDeniedError):
                write()
    assert store.count(Address("session", "s-bob", "chat")) == 0
    assert store.get_record(Address("session", "s-bob", "topic"), 0.0) == (False, None)
    assert store.get_session("s-bob") == _session("s-bob", "bob", 1.0)
    # the owner's own claim writes, and creates nothing new
    for write in _claiming_writes(store, _claim("s-bob", "bob")):
        write()
    assert store.count(Address("session", "s-bob", "chat")) == 1
    assert store.list_sessions(None, True, 10, 0)[1] == 1


def test_a_claiming_write_that_is_refused_creates_no_session(store: Store) -> None:
    with pytest.raises(BufferFullError):  # refused by its own rules, after the claim
        store.append(
            Address("session", "s-full", "chat"),
            [user("x" * 100)],
            guard=_claim("s-full", "alice"),
            max_bytes=10,
        )
    store.create_token(TokenRecord("t-r", "h-r", "alice", frozenset(), 1.0))
    assert store.revoke_token("t-r")
    for write in _claiming_writes(store, _claim("s-revoked", "alice", token="t-r")):
        with pytest.raises(AuthenticationError):
            write()
    assert store.list_sessions(None, True, 10, 0) == ([], 0)
    assert store.count(Address("session", "s-full", "chat")) == 0


def test_a_claim_past_the_owner_session_limit_is_refused_and_creates_nothing(
    store: Store,
) -> None:
    store.create_session(_session("s-1", "alice", 1.0))
    store.create_session(_session("s-2", "alice", 2.0))
    for write in _claiming_writes(store, _claim("s-3", "alice", limit=2)):
        with pytest.raises(TooManySessionsError):
            write()
    assert store.get_session("s-3") is None
    assert store.count(Address("session", "s-3", "chat")) == 0
    # an existing session of the owner still takes writes at the limit
    for write in _claiming_writes(store, _claim("s-2", "alice", limit=2)):
        write()
    # another owner, and sessions owned by nobody, are not counted against alice
    for write in _claiming_writes(store, _claim("s-b", "bob", limit=2)):
        write()
    for write in _claiming_writes(store, _claim("s-n", None, limit=2)):
        write()
    assert store.list_sessions(None, True, 10, 0)[1] == 4


def test_a_claim_that_does_not_create_needs_that_very_session(store: Store) -> None:
    # the request loaded the session made at 1.0: it is gone, then made again at 2.0
    for write in _claiming_writes(store, _claim("s-x", "alice", create=False, created_at=1.0)):
        with pytest.raises(NotFoundError):
            write()
    assert store.get_session("s-x") is None
    store.create_session(_session("s-x", "alice", 2.0))
    for write in _claiming_writes(store, _claim("s-x", "alice", create=False, created_at=1.0)):
        with pytest.raises(NotFoundError):
            write()
    assert store.count(Address("session", "s-x", "chat")) == 0
    for write in _claiming_writes(store, _claim("s-x", "alice", create=False, created_at=2.0)):
        write()
    assert store.count(Address("session", "s-x", "chat")) == 1


def test_a_raw_claim_creates_an_unowned_session_and_writes_to_any_owners(store: Store) -> None:
    store.create_session(_session("s-alice", "alice", 1.0))
    for sid in ("s-alice", "s-raw"):
        for write in _claiming_writes(store, _claim(sid, None, any_owner=True)):
            write()
    assert store.get_session("s-alice") == _session("s-alice", "alice", 1.0)
    raw = store.get_session("s-raw")
    assert raw is not None and raw.owner is None


def test_concurrent_first_writes_of_a_session_create_one_session(store: Store) -> None:
    import threading

    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def writer(n: int) -> None:
        try:
            start.wait()
            guard = _claim("s-race", "alice", created_at=float(n + 1))
            if n % 2:
                store.put_record(Address("session", "s-race", f"k{n}"), n, None, guard)
            else:
                store.append(Address("session", "s-race", "chat"), [user(f"m{n}")], guard=guard)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert store.list_sessions(None, True, 10, 0)[1] == 1
    assert store.count(Address("session", "s-race", "chat")) == 3
    assert all(store.get_record(Address("session", "s-race", f"k{n}"), 0.0)[0] for n in (1, 3, 5))


# --- idempotency keys (docs/decisions/0031) ------------------------------------------


def _key(key: str = "k1", owner: str = "user:alice", expires_at: float | None = 100.0) -> Any:
    """An idempotency key whose answer names the write's outcome."""
    from flowmem.store import Idempotency

    return Idempotency(owner, key, f"fp-{key}", expires_at, lambda out: (200, repr(out)))


def test_an_append_records_its_key_in_its_transaction_and_a_repeat_writes_nothing(
    store: Store,
) -> None:
    from flowmem.errors import IdempotencyKeyInFlightError

    outcome = store.append(A, prepare(user("hi"), None), idempotency=_key())
    stored = store.get_idempotency("user:alice", "k1", 50.0)
    assert stored is not None
    assert (stored.fingerprint, stored.status, stored.body) == ("fp-k1", 200, repr(outcome))
    with pytest.raises(IdempotencyKeyInFlightError):
        store.append(A, prepare(user("hi"), None), idempotency=_key())
    assert store.count(A) == 1
    # another owner's key of the same name is another key
    store.append(A, prepare(user("again"), None), idempotency=_key(owner="user:bob"))
    assert store.count(A) == 2


def test_a_keyed_append_that_returns_the_buffer_records_the_buffer_in_its_answer(
    store: Store,
) -> None:
    store.append(A, prepare(user("first"), None))
    outcome = store.append(A, prepare(user("second"), None), snapshot=True, idempotency=_key())
    assert [row["content"] for row in outcome.rows or []] == ["first", "second"]
    stored = store.get_idempotency("user:alice", "k1", 50.0)
    assert stored is not None and stored.body == repr(outcome)
    assert store.count(A) == 2


def test_every_keyed_write_records_its_key_or_nothing(store: Store) -> None:
    from flowmem.errors import IdempotencyKeyInFlightError

    record = Address("user", "alice", "note")
    store.put_record(record, {"v": 1}, None, idempotency=_key("put"))
    assert store.get_idempotency("user:alice", "put", 0.0) is not None
    with pytest.raises(IdempotencyKeyInFlightError):
        store.put_record(record, {"v": 2}, None, idempotency=_key("put"))
    assert store.get_record(record, 0.0) == (True, {"v": 1})
    with pytest.raises(IdempotencyKeyInFlightError):
        store.delete_record(record, idempotency=_key("put"))
    assert store.get_record(record, 0.0) == (True, {"v": 1})
    assert store.delete_record(record, idempotency=_key("del")) is True
    assert store.get_idempotency("user:alice", "del", 0.0).body == "True"  # type: ignore[union-attr]
    stored_append(store, A, [user("a"), user("b")])
    with pytest.raises(IdempotencyKeyInFlightError):
        store.clear(A, idempotency=_key("del"))
    assert store.count(A) == 2
    assert store.clear(A, idempotency=_key("clear")) == 2
    assert store.get_idempotency("user:alice", "clear", 0.0).body == "2"  # type: ignore[union-attr]
    session = SessionRecord(id="s-key", name="n", owner="alice", created_at=1.0, updated_at=1.0)
    with pytest.raises(IdempotencyKeyInFlightError):
        store.create_session(session, idempotency=_key("clear"))
    assert store.get_session("s-key") is None
    store.create_session(session, idempotency=_key("create"))
    assert store.get_session("s-key") == session


def test_a_refused_write_records_no_key(store: Store) -> None:
    stored_append(store, A, user("x" * 100))
    with pytest.raises(BufferFullError):
        store.append(A, prepare(user("more"), None), max_bytes=120, idempotency=_key())
    assert store.get_idempotency("user:alice", "k1", 0.0) is None
    store.create_token(TokenRecord("t1", "h1", "alice", frozenset(), 1.0))
    store.revoke_token("t1")
    with pytest.raises(AuthenticationError):
        store.put_record(
            Address("user", "alice", "r"), 1, None, WriteGuard(token_id="t1"), _key("g")
        )
    assert store.get_idempotency("user:alice", "g", 0.0) is None


def test_a_claimed_key_is_answered_or_released(store: Store) -> None:
    assert store.claim_idempotency(_key("c"), 10.0) is None
    found = store.claim_idempotency(_key("c"), 10.0)
    assert found is not None and found.status == 0  # in flight
    store.answer_idempotency("user:alice", "c", 201, '{"ok":true}')
    stored = store.get_idempotency("user:alice", "c", 10.0)
    assert stored is not None and (stored.status, stored.body) == (201, '{"ok":true}')
    store.release_idempotency("user:alice", "c")  # an answered key stays
    assert store.get_idempotency("user:alice", "c", 10.0) is not None
    assert store.claim_idempotency(_key("d"), 10.0) is None
    store.release_idempotency("user:alice", "d")
    assert store.get_idempotency("user:alice", "d", 10.0) is None
    assert store.claim_idempotency(_key("d"), 10.0) is None  # free again


def test_expired_keys_are_absent_replaced_and_purged(store: Store) -> None:
    store.append(A, prepare(user("a"), None), idempotency=_key("old", expires_at=100.0))
    store.put_record(Address("user", "alice", "n"), 1, None, idempotency=_key("old2", expires_at=100.0))
    store.put_record(Address("user", "alice", "m"), 1, None, idempotency=_key("kept", expires_at=None))
    assert store.get_idempotency("user:alice", "old", 99.0) is not None
    assert store.get_idempotency("user:alice", "old", 100.0) is None  # expired (and deleted)
    store.append(A, prepare(user("b"), None), idempotency=_key("old", expires_at=300.0))
    assert store.count(A) == 2
    assert store.claim_idempotency(_key("old2", expires_at=300.0), 150.0) is None  # replaced
    assert store.purge_expired(250.0) == 0
    assert store.purge_expired(350.0) == 2  # both keys, now expired
    assert store.get_idempotency("user:alice", "kept", 1e12) is not None


def test_erasing_a_user_deletes_their_keys_only(store: Store) -> None:
    store.append(A, prepare(user("a"), None), idempotency=_key("k", owner="user:alice"))
    store.append(A, prepare(user("b"), None), idempotency=_key("k", owner="user:bob"))
    store.append(A, prepare(user("c"), None), idempotency=_key("k", owner="token:t9"))
    store.erase_user("alice")
    assert store.get_idempotency("user:alice", "k", 0.0) is None
    assert store.get_idempotency("user:bob", "k", 0.0) is not None
    assert store.get_idempotency("token:t9", "k", 0.0) is not None
