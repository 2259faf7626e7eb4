"""Token-budget windows (issue 28 §1): the longest sendable suffix that fits."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.core.fast import fast_row_facts
from flowmem.core.validate import check_sendable
from flowmem.core.window import RowFacts, WindowScan, fit, row_facts
from flowmem.errors import WindowTooSmallError

Row = dict[str, Any]


def _facts(row: Row, tokens: int) -> RowFacts:
    calls = tuple(c["id"] for c in row.get("tool_calls", ()))
    return RowFacts(row["role"], tokens, calls, row.get("tool_call_id"))


KINDS = st.sampled_from(["user", "system", "text", "calls", "reasoning"])


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Row], list[int]]:
    """A sendable buffer (pairs complete, an open call only in the last turn) and row tokens."""
    rows: list[Row] = []
    turns = draw(st.integers(0, 12))
    serial = 0
    for turn in range(turns):
        kind = draw(KINDS)
        if kind == "user":
            rows.append({"role": "user", "content": f"q{turn}"})
        elif kind == "system":
            rows.append({"role": "system", "content": f"s{turn}"})
        elif kind == "text":
            rows.append({"role": "assistant", "content": f"a{turn}"})
        else:
            count = draw(st.integers(1, 3))
            ids = [f"c{serial + i}" for i in range(count)]
            serial += count
            content: Any = f"a{turn}"
            if kind == "reasoning":
                content = [{"type": "reasoning", "text": "..."}, {"type": "text", "text": "a"}]
            calls = [{"id": i, "function": {"name": "f", "arguments": "{}"}} for i in ids]
            rows.append({"role": "assistant", "content": content, "tool_calls": calls})
            answered = ids if turn < turns - 1 else draw(st.sampled_from([ids, []]))
            for cid in draw(st.permutations(answered)):
                rows.append({"role": "tool", "content": "r", "tool_call_id": cid})
    tokens = draw(st.lists(st.integers(0, 40), min_size=len(rows), max_size=len(rows)))
    return rows, tokens


def _oracle(rows: list[Row], tokens: list[int], budget: int, keep: bool, first: str | None):
    """Brute force: the earliest valid start whose window fits, or None."""
    declared_at = {c["id"]: i for i, r in enumerate(rows) for c in r.get("tool_calls", ())}
    systems = [i for i, r in enumerate(rows) if r["role"] == "system"]
    for s in range(len(rows)):
        suffix = rows[s:]
        if suffix[0]["role"] == "tool" or (keep and suffix[0]["role"] == "system"):
            continue
        if any(
            r.get("tool_call_id") in declared_at and declared_at[r["tool_call_id"]] < s
            for r in suffix
        ):
            continue
        non_system = [r for r in suffix if r["role"] != "system"]
        if first and non_system and non_system[0]["role"] != first:
            continue
        kept = ([i for i in systems if i < s] if keep else []) + list(range(s, len(rows)))
        if sum(tokens[i] for i in kept) <= budget:
            return s
    return None


@settings(max_examples=400, deadline=None)
@given(histories(), st.integers(0, 200), st.booleans(), st.sampled_from([None, "user"]))
def test_window_is_the_longest_sendable_suffix_that_fits(
    history: tuple[list[Row], list[int]], budget: int, keep: bool, first: str | None
) -> None:
    rows, tokens = history
    facts = [_facts(r, t) for r, t in zip(rows, tokens, strict=True)]
    expected = _oracle(rows, tokens, budget, keep, first)
    try:
        window = fit(facts, budget, keep_system=keep, first_role=first)
    except WindowTooSmallError as error:
        assert expected is None
        assert error.details["needed"] > budget
        return
    kept = [rows[i] for i in window.kept]
    assert window.tokens == sum(tokens[i] for i in window.kept) <= budget
    assert window.cut_messages == len(rows) - len(kept)
    assert window.cut_tokens == sum(tokens) - window.tokens
    # an open call at the tail and a system row after others are the buffer's own
    allowed = {"unanswered_call", "system_after_non_system"}
    open_tail = [v for v in check_sendable(kept) if v.code not in allowed]
    assert open_tail == [], open_tail
    if expected is None:  # no non-system row can start: the system rows alone
        assert all(r["role"] == "system" for r in kept) or not keep
    else:
        assert window.start == expected
    if keep:
        assert all(i in window.kept for i, r in enumerate(rows) if r["role"] == "system")


def test_a_call_and_its_parallel_results_are_cut_together() -> None:
    rows = [
        RowFacts("user", 5),
        RowFacts("assistant", 5, ("a", "b")),
        RowFacts("tool", 5, answers="b"),
        RowFacts("tool", 5, answers="a"),
        RowFacts("user", 5),
    ]
    assert fit(rows, 19).kept == (4,)  # 20 tokens would keep the call: 19 cannot split it
    assert fit(rows, 20).kept == (1, 2, 3, 4)


def test_system_rows_are_kept_and_counted_wherever_they_stood() -> None:
    rows = [RowFacts("system", 3), RowFacts("user", 10), RowFacts("system", 2), RowFacts("user", 4)]
    window = fit(rows, 9)
    assert window.kept == (0, 2, 3) and window.tokens == 9 and window.cut_tokens == 10
    assert fit(rows, 9, keep_system=False).kept == (2, 3)


def test_first_role_user_moves_the_start_past_a_leading_assistant_turn() -> None:
    rows = [
        RowFacts("user", 1),
        RowFacts("assistant", 1),
        RowFacts("user", 1),
        RowFacts("assistant", 1),
    ]
    assert fit(rows, 3).start == 1
    assert fit(rows, 3, first_role="user").start == 2


def test_a_newest_turn_over_the_budget_is_an_error_that_names_what_it_needs() -> None:
    rows = [
        RowFacts("user", 4),
        RowFacts("assistant", 6, ("x",)),
        RowFacts("tool", 30, answers="x"),
    ]
    with pytest.raises(WindowTooSmallError) as raised:
        fit(rows, 20)
    assert raised.value.code == "window_too_small"
    assert raised.value.details == {"argument": "max_tokens", "budget": 20, "needed": 36}


def test_the_scan_stops_one_turn_past_the_window() -> None:
    rows = [RowFacts("user", 10) for _ in range(1000)]
    scan = WindowScan(35)
    fed = 0
    for position in range(999, -1, -1):
        scan.feed(position, rows[position])
        fed += 1
        if scan.done:
            break
    assert fed == 4 and scan.window(1000, 10_000).kept == (997, 998, 999)


def test_rows_fed_out_of_order_are_refused() -> None:
    scan = WindowScan(10)
    scan.feed(5, RowFacts("user", 1))
    with pytest.raises(ValueError):
        scan.feed(5, RowFacts("user", 1))
    with pytest.raises(ValueError):
        scan.feed(7, RowFacts("user", 1))


def test_positions_may_be_any_falling_cursors_and_start_is_an_index() -> None:
    scan = WindowScan(12, systems={3: 2})
    for cursor, row in [(90, RowFacts("user", 5)), (40, RowFacts("assistant", 5)),
                        (20, RowFacts("user", 5))]:
        scan.feed(cursor, row)
        if scan.done:
            break
    window = scan.window(6, 40)
    assert window.kept == (3, 40, 90) and window.start == 4
    assert window.tokens == 12 and window.cut_messages == 3 and window.cut_tokens == 28
    assert scan.window(6, None).cut_tokens is None


def test_an_empty_buffer_has_an_empty_window() -> None:
    window = fit([], 0)
    assert window.kept == () and window.cut_messages == 0 and window.tokens == 0


def test_a_result_stored_apart_from_its_call_is_never_kept_without_it() -> None:
    rows = [
        RowFacts("assistant", 5, ("a",)),
        RowFacts("assistant", 5),  # a row between the call and its result
        RowFacts("tool", 5, answers="a"),
        RowFacts("user", 5),
    ]
    assert fit(rows, 15).kept == (3,)  # starting on the middle row would orphan the result
    assert fit(rows, 20).kept == (0, 1, 2, 3)


_IDS = st.one_of(
    st.sampled_from(["c1", " c2 ", "", "0", "  ", " 0 "]), st.none(), st.integers(-1, 3), st.booleans()
)
_CALL = st.one_of(
    st.fixed_dictionaries({}, optional={"id": _IDS, "tool_call_id": _IDS, "name": st.just("f")}),
    st.integers(),
    st.none(),
)
_META = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "tool_calls": st.one_of(st.lists(_CALL, max_size=4), st.none(), st.text(max_size=2)),
            "tool_call_id": _IDS,
        },
    ),
    st.none(),
    st.integers(),
)


@settings(max_examples=1000, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["tool", "assistant", "user", "system", "other", 3]),
            "metadata": _META,
        },
        optional={
            "tool_calls": st.one_of(st.lists(_CALL, max_size=3), st.none()),
            "tool_call_id": _IDS,
            "content": st.just("x"),
        },
    ),
    st.integers(0, 99),
)
def test_the_fast_row_facts_equal_row_facts_on_every_row(row: Row, tokens: int) -> None:
    """The speed twin (``core.fast.fast_row_facts``) is the plain reader, MEM-11 and all."""
    assert fast_row_facts(row, tokens) == row_facts(row, tokens)


@pytest.mark.parametrize("given", ["c1", " c2 ", "", "0", " 0 ", 0, 3, True, None, 1.5])
@pytest.mark.parametrize("where", ["metadata", "top"])
def test_the_fast_row_facts_read_every_id_spelling_as_row_facts(given: Any, where: str) -> None:
    """The edge ids of MEM-11 (blank, zero, numbers, booleans) on both fast paths."""
    call = {"id": given, "name": "f"}
    both = {"tool_call_id": given, "id": "c9"}
    for row in (
        {"role": "tool", "metadata": {"tool_call_id": given}},
        {"role": "assistant", "metadata": {"tool_calls": [call, both, call]}},
    ):
        if where == "top":
            row = {"role": row["role"], "metadata": {}, **row["metadata"]}
        assert fast_row_facts(row, 1) == row_facts(row, 1)


_CALLS = [(), *((a,) for a in "abc"), *((a, b) for a in "abc" for b in "abc")]
"""Every tuple of at most two of ``a``, ``b``, ``c``: one draw, not a list's draws (decision 0217)."""
_FACTS = st.builds(
    RowFacts,
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.integers(0, 30),
    st.sampled_from(_CALLS),
    st.sampled_from([None, None, None, "a", "b", "c"]),  # None half the time, as none() | abc
)


def _scan_result(scan: WindowScan, total: int) -> Any:
    try:
        return scan.window(total, None)
    except WindowTooSmallError as error:
        return error.details


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(_FACTS, max_size=12),
    st.integers(0, 120),
    st.booleans(),
    st.sampled_from([None, "user"]),
    st.integers(0, 12),
)
def test_feed_rows_is_feed_called_row_by_row(
    rows: list[RowFacts], budget: int, keep: bool, first: str | None, split: int
) -> None:
    """The speed twin (``WindowScan.feed_rows``) ends where ``feed`` does, fed in any batches."""
    systems = {i: r.tokens for i, r in enumerate(rows) if r.role == "system"}
    plain, fast = WindowScan(budget, systems, keep, first), WindowScan(budget, systems, keep, first)
    fed = 0
    for position in range(len(rows) - 1, -1, -1):
        plain.feed(position, rows[position])
        fed += 1
        if plain.done:
            break
    newest_first = [(p, rows[p]) for p in range(len(rows) - 1, -1, -1)]
    taken = iter(newest_first)
    fast.feed_rows(itertools.islice(taken, split))
    fast.feed_rows(taken)
    consumed = len(newest_first) - len(list(taken))
    assert fast.done == plain.done and (fast.cost, fast._best) == (plain.cost, plain._best)
    assert consumed == (fed if plain.done else len(rows))
    assert _scan_result(fast, len(rows)) == _scan_result(plain, len(rows))


def test_feed_rows_refuses_rows_out_of_order() -> None:
    scan = WindowScan(10)
    with pytest.raises(ValueError):
        scan.feed_rows([(5, RowFacts("user", 1)), (6, RowFacts("user", 1))])
