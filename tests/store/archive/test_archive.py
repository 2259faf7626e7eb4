"""Compaction into a buffer's archive, on every backend (issue 28 §2; decision 0083)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from flowmem.core import Repair
from flowmem.core.compaction import SUMMARY_KEY
from flowmem.errors import CompactionStaleError, InvalidInputError, WindowTooSmallError
from flowmem.service import MemoryService
from flowmem.store import Store
from flowmem.store.base import Address, SessionRecord
from flowmem.store.repairs import entry_text
from flowmem.store.rows import dump_json, utf8_size

KEY = "chat"


def turn(i: int, calls: int = 1) -> list[dict[str, Any]]:
    """A user question, an assistant turn with ``calls`` parallel calls, their results, an answer."""
    ids = [f"c{i}_{n}" for n in range(calls)]
    return [
        {"role": "user", "content": f"question {i} " * 8},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for cid in ids
            ],
        },
        *({"role": "tool", "tool_call_id": cid, "content": "result " * 6} for cid in ids),
        {"role": "assistant", "content": f"answer {i} " * 5},
    ]


def history(turns: int, calls: int = 1) -> list[dict[str, Any]]:
    return [row for i in range(turns) for row in turn(i, calls)]


def summarizer(seen: list[list[dict[str, Any]]] | None = None) -> Any:
    def summarize(rows: list[dict[str, Any]]) -> str:
        if seen is not None:
            seen.append(rows)
        return f"summary of {len(rows)} rows"

    return summarize


def fill(service: MemoryService, turns: int = 5, scope: str = "user", sid: str = "u1") -> list[Any]:
    service.append_raw(scope, sid, KEY, history(turns))
    return service.load_raw(scope, sid, KEY).messages


def test_compaction_replaces_the_oldest_rows_by_one_marked_summary(store: Store) -> None:
    service = MemoryService(store)
    before = fill(service)
    seen: list[list[dict[str, Any]]] = []
    done = service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=summarizer(seen))
    assert done.compacted and done.archived == len(seen[0]) and done.first == 1
    assert done.last == done.archived and done.tokens and done.tokens > 0
    live = service.load_raw("user", "u1", KEY).messages
    assert live[0] == done.summary
    assert live[0]["metadata"][SUMMARY_KEY] == {"archived": done.archived, "first": 1, "last": done.archived}
    assert live[1:] == before[done.archived :]  # the kept rows, unchanged
    assert seen[0] == before[: done.archived]  # the summarizer saw exactly the archived rows
    assert done.count == len(live) == service.load_raw("user", "u1", KEY).count


def test_include_archived_reads_the_originals_in_order_then_the_live_rows(store: Store) -> None:
    service = MemoryService(store)
    before = fill(service)
    done = service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=summarizer())
    read = service.load_raw("user", "u1", KEY, include_archived=True)
    archived = len(read.messages) - read.count
    assert archived == done.archived
    assert read.messages[:archived] == before[:archived]
    assert read.messages[archived:] == service.load_raw("user", "u1", KEY).messages
    with pytest.raises(InvalidInputError):
        service.load_raw("user", "u1", KEY, last=2, include_archived=True)


def test_the_cut_keeps_parallel_calls_with_all_their_results(store: Store) -> None:
    service = MemoryService(store)
    service.append_raw("user", "u1", KEY, history(4, calls=3))
    for budget in range(60, 400, 17):
        service.clear_raw("user", "u1", KEY)
        service.append_raw("user", "u1", KEY, history(4, calls=3))
        service.compact_raw("user", "u1", KEY, keep_tokens=budget, summarize=summarizer())
        live = service.load_raw("user", "u1", KEY).messages
        declared = {c["id"] for row in live for c in row["metadata"].get("tool_calls", [])}
        answered = {row["metadata"]["tool_call_id"] for row in live if row["role"] == "tool"}
        assert answered <= declared and declared <= answered
        assert live[1]["role"] != "tool"


def test_a_second_compaction_archives_the_first_summary_and_numbers_on(store: Store) -> None:
    service = MemoryService(store)
    fill(service, turns=8)
    first = service.compact_raw("user", "u1", KEY, keep_tokens=400, summarize=summarizer())
    second = service.compact_raw("user", "u1", KEY, keep_tokens=100, summarize=summarizer())
    assert second.compacted and second.first == first.last + 1
    read = service.load_raw("user", "u1", KEY, include_archived=True)
    assert read.messages[first.archived] == first.summary  # archived too, still marked
    assert sum(1 for row in read.messages if SUMMARY_KEY in row["metadata"]) == 2


def test_nothing_beyond_the_budget_changes_nothing(store: Store) -> None:
    service = MemoryService(store)
    before = fill(service, turns=1)
    done = service.compact_raw("user", "u1", KEY, keep_tokens=10_000, summarize=summarizer())
    assert not done.compacted and done.archived == 0 and done.count == len(before)
    assert service.load_raw("user", "u1", KEY).messages == before
    empty = service.compact_raw("user", "u1", "none", keep_tokens=10, summarize=summarizer())
    assert not empty.compacted and empty.count == 0


def test_a_budget_below_the_newest_turn_is_refused_and_changes_nothing(store: Store) -> None:
    service = MemoryService(store)
    before = fill(service)
    with pytest.raises(WindowTooSmallError):
        service.compact_raw("user", "u1", KEY, keep_tokens=5, summarize=summarizer())
    assert service.load_raw("user", "u1", KEY, include_archived=True).messages == before


def test_a_summarizer_that_raises_leaves_the_buffer_unchanged(store: Store) -> None:
    service = MemoryService(store)
    before = fill(service)

    def broken(rows: list[dict[str, Any]]) -> str:
        raise RuntimeError("the model is down")

    with pytest.raises(RuntimeError):
        service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=broken)
    assert service.load_raw("user", "u1", KEY, include_archived=True).messages == before


@pytest.mark.parametrize("bad", ["", {"role": "tool", "content": "x", "tool_call_id": "c9"}, 42])
def test_an_unusable_summary_is_refused_and_changes_nothing(store: Store, bad: Any) -> None:
    service = MemoryService(store)
    before = fill(service)
    with pytest.raises(InvalidInputError):
        service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=lambda rows: bad)
    assert service.load_raw("user", "u1", KEY, include_archived=True).messages == before


def test_mem_1_mem_2_an_archived_result_or_turn_sent_again_is_a_duplicate(store: Store) -> None:
    service = MemoryService(store)
    rows = fill(service)
    done = service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=summarizer())
    archived = rows[: done.archived]
    results = [row for row in archived if row["role"] == "tool"]
    calls = [row for row in archived if row["metadata"].get("tool_calls")]
    assert results and calls
    for row in [*results, *calls]:
        again = service.append_raw("user", "u1", KEY, [row])
        assert again.appended == 0, row
    check = service.load_raw("user", "u1", KEY).messages
    assert len(check) == done.count


def test_mem_1_archived_ids_outlive_the_bound_on_evicted_ids(store: Store) -> None:
    service = MemoryService(store)
    fill(service)
    service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=summarizer())
    # a window that evicts more call ids than the evicted memory keeps (256)
    for i in range(100, 100 + 90):
        service.append_raw("user", "u1", KEY, turn(i, calls=3), max_messages=6)
    again = service.append_raw("user", "u1", KEY, [{"role": "tool", "tool_call_id": "c0_0", "content": "late"}])
    assert again.appended == 0


def test_a_stale_plan_archives_nothing(store: Store) -> None:
    service = MemoryService(store)
    fill(service)
    plan = service.compaction_plan("user", KEY, None, 150)
    assert plan.refused  # no user in the context: the neutral result (MEM-7)
    from flowmem.scope import ExecutionContext

    context = ExecutionContext(user_id="u1")
    plan = service.compaction_plan("user", KEY, context, 150)
    assert plan.plan and plan.archived == len(plan.messages)
    service.compact("user", KEY, context, keep_tokens=150, summarize=summarizer())
    after = service.load("user", KEY, context, include_archived=True).messages
    with pytest.raises(CompactionStaleError):
        service.apply_compaction("user", KEY, context, plan.plan, "late summary")
    assert service.load("user", KEY, context, include_archived=True).messages == after


def test_a_plan_applied_after_an_append_keeps_the_appended_rows(store: Store) -> None:
    service = MemoryService(store)
    from flowmem.scope import ExecutionContext

    context = ExecutionContext(user_id="u1")
    before = fill(service)
    plan = service.compaction_plan("user", KEY, context, 150)
    service.append("user", KEY, [{"role": "user", "content": "racing"}], context)
    done = service.apply_compaction("user", KEY, context, str(plan.plan), "the summary")
    assert done.compacted and done.archived == plan.archived
    live = service.load("user", KEY, context).messages
    assert live[-1]["content"] == "racing" and live[1:-1] == before[plan.archived :]


def test_clear_deletes_the_archive(store: Store) -> None:
    service = MemoryService(store)
    fill(service)
    service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=summarizer())
    service.clear_raw("user", "u1", KEY)
    assert service.load_raw("user", "u1", KEY, include_archived=True).messages == []
    # and a new buffer at the address starts a new archive, with new memory of ids
    again = service.append_raw("user", "u1", KEY, turn(0))
    assert again.appended == len(turn(0))


def test_deleting_the_session_deletes_the_archive(store: Store) -> None:
    service = MemoryService(store)
    sid = str(uuid.uuid4())
    store.create_session(SessionRecord(sid, "s", None))
    fill(service, scope="session", sid=sid)
    service.compact_raw("session", sid, KEY, keep_tokens=150, summarize=summarizer())
    assert store.delete_session(sid)
    assert store.archive.read(Address("session", sid, KEY)).archived == []  # type: ignore[attr-defined]


def test_erasing_the_user_deletes_the_archive_and_its_usage(store: Store) -> None:
    service = MemoryService(store)
    fill(service, sid="u2")
    before = store.usage("u2").bytes
    done = service.compact_raw("user", "u2", KEY, keep_tokens=150, summarize=summarizer())
    assert done.summary is not None
    # archived rows count against the quota until they go: only the summary was added,
    # and the compaction's entry in the buffer's repair log (issue 37 §2)
    (logged,) = store.repairs.page(Address("user", "u2", KEY)).entries  # type: ignore[attr-defined]
    repair = Repair(logged.rule, (), logged.count, tuple(logged.positions), logged.archived)
    entry = utf8_size(entry_text(repair, logged.at))
    assert store.usage("u2").bytes == before + utf8_size(dump_json(done.summary, "message")) + entry
    store.erase_user("u2")
    assert store.archive.read(Address("user", "u2", KEY)).archived == []  # type: ignore[attr-defined]
    assert store.usage("u2").bytes == 0


def test_compact_to_archives_every_row_behind_a_compacted_history(store: Store) -> None:
    from flowmem.scope import ExecutionContext

    service = MemoryService(store)
    context = ExecutionContext(user_id="u1")
    before = fill(service)
    made = [{"role": "user", "content": "kept question"}, {"role": "assistant", "content": "compacted"}]
    done = service.compact_to("user", KEY, context, made)
    assert done.compacted and done.archived == len(before) and done.count == 2
    live = service.load("user", KEY, context).messages
    assert [row["content"] for row in live] == ["kept question", "compacted"]
    assert live[0]["metadata"][SUMMARY_KEY] == {"archived": len(before), "first": 1, "last": len(before)}
    whole = service.load("user", KEY, context, include_archived=True).messages
    assert whole[: len(before)] == before and whole[len(before) :] == live
    late = service.append("user", KEY, [r for r in before if r["role"] == "tool"][:1], context)
    assert late.appended == 0  # MEM-1 across the replacement
    fresh = service.compact_to("user", "empty", context, made)
    assert not fresh.compacted and fresh.count == 2


def test_compact_to_refuses_when_the_buffer_changed_under_it(store: Store) -> None:
    from flowmem.core import compaction

    service = MemoryService(store)
    before = fill(service)
    address = Address("user", "u1", KEY)
    stale = compaction.prefix_digest([(0, "{}")])
    archive = store.archive  # type: ignore[attr-defined]
    assert archive.compact(address, -1, stale, lambda first, last: [{"role": "user", "content": "x"}]) is None
    assert service.load_raw("user", "u1", KEY, include_archived=True).messages == before


def test_a_live_call_answered_only_by_an_archived_result_is_healed_later(store: Store) -> None:
    """An orphan result stored before its call (MEM-1) archived: the live call is open again."""
    from flowmem.core import check_sendable

    service = MemoryService(store)
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
    rows = [
        {"role": "user", "content": "first " * 50},
        {"role": "tool", "tool_call_id": "x", "content": "early " * 50},
        call,
    ]
    service.append_raw("user", "u1", KEY, rows)
    assert service.append_raw("user", "u1", KEY, [{"role": "tool", "tool_call_id": "x", "content": "r"}]).appended == 0
    done = service.compact_raw("user", "u1", KEY, keep_tokens=60, summarize=summarizer())
    assert done.compacted and done.archived == 2
    service.append_raw("user", "u1", KEY, [{"role": "user", "content": "next"}])
    live = service.load_raw("user", "u1", KEY).messages
    assert not check_sendable(live[1:]), live


def test_a_token_window_after_compaction_counts_only_the_live_rows(store: Store) -> None:
    """The buffer's stored token total (issue 28 §1) loses the archived rows: a window's cut is exact."""
    from flowmem.core.tokens import estimate_tokens

    service = MemoryService(store)
    fill(service, turns=8)
    service.compact_raw("user", "u1", KEY, keep_tokens=150, summarize=summarizer())
    live = service.load_raw("user", "u1", KEY).messages
    assert store.read_tail(Address("user", "u1", KEY)).tokens == sum(map(estimate_tokens, live))
    window = service.load_window_raw("user", "u1", KEY, 10**6).window
    assert window is not None and window.cut_messages == 0 and window.cut_tokens == 0
