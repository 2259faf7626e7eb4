"""The pure compaction plan (issue 28 §2): a prefix cut where the window rules allow."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.core import prepare
from flowmem.core.compaction import (
    SUMMARY_KEY,
    is_summary,
    parse_plan_id,
    plan_compaction,
    prefix_digest,
    summary_row,
)
from flowmem.core.validate import check_sendable
from flowmem.errors import InvalidInputError, WindowTooSmallError
from tests.core.test_window import histories

Row = dict[str, Any]


def _stored(rows: list[Row]) -> tuple[list[tuple[int, str]], list[Row]]:
    stored = prepare(rows, 1) if rows else []
    return [(10 * i, json.dumps(row)) for i, row in enumerate(stored)], stored


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 200))
def test_a_plan_cuts_a_prefix_whose_rest_is_sendable_and_fits(
    drawn: tuple[list[Row], list[int]], budget: int
) -> None:
    rows, tokens = drawn
    bodies, stored = _stored(rows)
    cost = {id(row): tokens[i] for i, row in enumerate(stored)}
    try:
        plan = plan_compaction(bodies, stored, budget, lambda row: cost[id(row)])
    except WindowTooSmallError:
        return
    if plan is None:
        return
    start = len(plan.rows)
    kept = stored[start:]
    assert list(plan.rows) == stored[:start] and plan.kept == bodies[start][0]
    assert plan.kept_tokens == sum(tokens[start:]) <= budget
    assert plan.tokens == sum(tokens[:start])
    assert kept[0]["role"] != "tool"
    archived_calls = {c["id"] for row in plan.rows for c in row["metadata"].get("tool_calls", [])}
    assert not any(row["metadata"].get("tool_call_id") in archived_calls for row in kept)
    summary = summary_row("the summary", 1, start, 1)
    assert not [v for v in check_sendable([summary, *kept]) if v.code == "orphan_result"]
    assert plan.digest == prefix_digest(bodies[: start + 1])


def test_a_plan_id_names_the_first_kept_row_and_the_digest() -> None:
    digest = prefix_digest([(1, "{}")])
    assert parse_plan_id(f"42.{digest}") == (42, digest)
    for bad in (None, 42, "", "42", f"x.{digest}", "42.abc", f"-1.{digest}", f"42.{digest.upper()}"):
        with pytest.raises(InvalidInputError):
            parse_plan_id(bad)


def test_the_digest_changes_with_any_cursor_or_text() -> None:
    base = [(1, '{"a":1}'), (2, '{"b":2}')]
    assert prefix_digest(base) != prefix_digest([(1, '{"a":1}'), (3, '{"b":2}')])
    assert prefix_digest(base) != prefix_digest([(1, '{"a":1}'), (2, '{"b":3}')])
    assert prefix_digest(base) != prefix_digest(base[:1])


def test_a_summary_row_is_marked_with_the_archive_numbers_it_stands_for() -> None:
    row = summary_row("what happened", 3, 9, 7)
    assert row["role"] == "user" and row["content"] == "what happened"
    assert row["metadata"][SUMMARY_KEY] == {"archived": 7, "first": 3, "last": 9}
    assert is_summary(row) and not is_summary({"role": "user", "metadata": {}})
    as_message = summary_row({"role": "system", "content": "ctx", "source": "m"}, 1, 1, 7)
    assert as_message["role"] == "system" and as_message["metadata"]["source"] == "m"


def test_nothing_beyond_the_budget_but_the_last_summary_is_no_plan() -> None:
    rows = [summary_row("earlier", 1, 4, 1), {"role": "user", "content": "q" * 400}]
    bodies = [(i, json.dumps(row)) for i, row in enumerate(rows)]
    assert plan_compaction(bodies, rows, 150, lambda row: 10 if is_summary(row) else 101) is None


def test_a_counter_must_count() -> None:
    rows = [{"role": "user", "content": "q"}, {"role": "user", "content": "r"}]
    bodies = [(i, json.dumps(row)) for i, row in enumerate(rows)]
    with pytest.raises(InvalidInputError):
        plan_compaction(bodies, rows, 10, lambda row: -1)
