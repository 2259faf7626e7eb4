"""``MemoryService.load(max_tokens=…)``: token windows read from the store (issue 28 §1).

The window read from the buffer's end (``flowmem.store.window``, O(kept) rows) is
the plain rule (``flowmem.core.window.fit``) over the whole buffer: the oracle,
itself checked against brute force in tests/core/test_window.py. For any history
and budget it fits, is sendable, keeps each row (a turn with its reasoning) whole,
and is the longest suffix that does; a windowed read changes nothing, and the
buffer's rules (MEM-1, 2, 3, 10) hold for the next append.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import check_sendable, result_id
from flowmem.core.tokens import estimate_tokens
from flowmem.core.window import fit, row_facts
from flowmem.errors import InvalidInputError, WindowTooSmallError
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, Store, open_store
from tests.core.test_window import histories
from tests.migrated import migrated_sqlite_url

ALICE = ExecutionContext(user_id="alice")
_ALLOWED = {"unanswered_call", "system_after_non_system"}  # the buffer's own, not the window's
_keys = itertools.count()


@pytest.fixture(params=["memory", "sqlite"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryService]:
    """A service over each cheap backend (PostgreSQL: tests/store/test_tail.py, bench/window.py)."""
    store: Store = (
        MemoryStore()
        if request.param == "memory"
        else open_store(migrated_sqlite_url(tmp_path / "w.db"))
    )
    yield MemoryService(store)
    store.close()


def _json_counter(row: Any) -> int:
    return len(json.dumps(row.get("content"))) // 3 + 1


def _oracle(rows: list[dict[str, Any]], budget: int, counter: Any, first: str | None) -> Any:
    return fit([row_facts(r, counter(r)) for r in rows], budget, first_role=first)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    histories(),
    st.integers(0, 400),
    st.sampled_from([None, _json_counter]),
    st.sampled_from([None, "user"]),
)
def test_a_window_is_the_plain_rule_over_the_whole_buffer_and_sendable(
    service: MemoryService,
    history: tuple[list[dict[str, Any]], list[int]],
    budget: int,
    counter: Any,
    first: str | None,
) -> None:
    key = f"k{next(_keys)}"
    service.append("user", key, history[0], ALICE)
    rows = service.load("user", key, ALICE).messages
    count = counter or estimate_tokens
    try:
        expected = _oracle(rows, budget, count, first)
    except WindowTooSmallError as refused:
        with pytest.raises(WindowTooSmallError) as raised:
            service.load("user", key, ALICE, max_tokens=budget, counter=counter, first_role=first)
        assert raised.value.details == refused.details
        return
    got = service.load("user", key, ALICE, max_tokens=budget, counter=counter, first_role=first)
    window = got.window
    assert window is not None
    assert got.messages == [rows[i] for i in expected.kept]  # whole rows: turns with reasoning
    assert window.tokens == sum(count(r) for r in got.messages) <= budget
    assert (window.start, window.cut_messages) == (expected.start, len(rows) - len(got.messages))
    assert got.count == len(rows)
    if counter is None:
        assert window.cut_tokens == sum(map(estimate_tokens, rows)) - window.tokens
    else:
        assert window.cut_tokens is None
    assert [v for v in check_sendable(got.messages) if v.code not in _ALLOWED] == []
    # the read changed nothing, and the next append obeys the buffer's rules
    assert service.load("user", key, ALICE).messages == rows
    service.append("user", key, [*got.messages, {"role": "user", "content": "next"}], ALICE)
    after = service.load("user", key, ALICE).messages
    answered = [rid for r in after if (rid := result_id(r)) is not None]
    assert len(answered) == len(set(answered))  # MEM-1: no result stored twice
    assert [v for v in check_sendable(after) if v.code not in _ALLOWED] == []


def test_a_window_reports_what_it_cut(service: MemoryService) -> None:
    turns = [{"role": "system", "content": "You are terse."}]
    for n in range(6):
        turns += [
            {"role": "user", "content": f"question {n} " * 10},
            {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}", "name": "f"}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "result " * 20},
            {"role": "assistant", "content": f"answer {n} " * 8},
        ]
    service.append("user", "chat", turns, ALICE)
    got = service.load("user", "chat", ALICE, max_tokens=200)
    assert got.window is not None
    assert got.messages[0]["role"] == "system" and got.messages[1]["role"] != "tool"
    assert got.window.to_dict() == {
        "budget": 200,
        "tokens": sum(map(estimate_tokens, got.messages)),
        "start": 25 - len(got.messages) + 1,
        "cut_messages": 25 - len(got.messages),
        "cut_tokens": sum(map(estimate_tokens, turns)) - got.window.tokens,
    }


def test_a_newest_turn_over_the_budget_is_window_too_small(service: MemoryService) -> None:
    service.append("user", "chat", [{"role": "user", "content": "x" * 400}], ALICE)
    with pytest.raises(WindowTooSmallError) as raised:
        service.load("user", "chat", ALICE, max_tokens=50)
    assert raised.value.code == "window_too_small" and raised.value.details["needed"] == 104


@pytest.mark.parametrize(
    "arguments",
    [
        {"max_tokens": -1},
        {"max_tokens": 10, "last": 2},
        {"counter": len},
        {"max_tokens": 10, "counter": "len"},
        {"max_tokens": 10, "first_role": "tool"},
    ],
)
def test_bad_window_arguments_are_refused_before_any_read(
    service: MemoryService, arguments: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInputError):
        service.load("user", "chat", ALICE, **arguments)


def test_a_counter_that_returns_no_count_is_refused(service: MemoryService) -> None:
    service.append("user", "chat", [{"role": "user", "content": "hi"}], ALICE)
    with pytest.raises(InvalidInputError):
        service.load("user", "chat", ALICE, max_tokens=10, counter=lambda row: -1)


def test_a_refused_scope_reads_nothing_and_reports_no_window(service: MemoryService) -> None:
    got = service.load("user", "chat", ExecutionContext(), max_tokens=10)
    assert got.refused is not None and got.messages == [] and got.window is None
