"""A window's cut found without keeping the rows fed (issue 38 §2): ``CutScan`` against ``WindowScan``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.core.window import WindowScan
from flowmem.core.window_cut import CutScan
from flowmem.errors import WindowTooSmallError
from tests.core.test_window import _facts, histories


def _feed(scan: Any, rows: list[dict[str, Any]], tokens: list[int], cursors: list[int], batch: int) -> None:
    """Feed newest first in batches of ``batch``, as a store's read from the end does."""
    facts = [(cursors[i], _facts(rows[i], tokens[i])) for i in range(len(rows) - 1, -1, -1)]
    for at in range(0, len(facts), batch):
        if scan.done:
            return
        scan.feed_rows(iter(facts[at : at + batch]))


@settings(max_examples=300, deadline=None)
@given(
    histories(),
    st.integers(0, 200),
    st.booleans(),
    st.sampled_from([None, "user"]),
    st.integers(1, 5),
    st.integers(1, 7),
)
def test_the_lean_cut_is_the_window_of_the_scan_that_keeps_every_row(
    history: tuple[list[dict[str, Any]], list[int]],
    budget: int,
    keep: bool,
    first: str | None,
    batch: int,
    gap: int,
) -> None:
    rows, tokens = history
    cursors = [10 + gap * i for i in range(len(rows))]  # falling cursors with gaps, as SQL's
    systems = {cursors[i]: tokens[i] for i, row in enumerate(rows) if row["role"] == "system"}
    plain, lean = WindowScan(budget, systems, keep, first), CutScan(budget, systems, keep, first)
    _feed(plain, rows, tokens, cursors, batch)
    _feed(lean, rows, tokens, cursors, batch)
    assert lean.done == plain.done
    try:
        window = plain.window(len(rows), sum(tokens))
    except WindowTooSmallError as refused:
        with pytest.raises(WindowTooSmallError) as also:
            lean.cut(len(rows), sum(tokens))
        assert str(also.value) == str(refused)
        return
    cut = lean.cut(len(rows), sum(tokens))
    suffix = [p for p in window.kept if cut.start is not None and p >= cut.start]
    assert cut.systems + tuple(suffix) == window.kept
    assert cut.suffix == len(suffix)
    assert suffix == sorted(p for p in cursors if cut.start is not None and p >= cut.start)
    assert (cut.tokens, cut.start_index, cut.cut_messages, cut.cut_tokens, cut.total) == (
        window.tokens, window.start, window.cut_messages, window.cut_tokens, window.total
    )


def test_the_lean_cut_keeps_no_row() -> None:
    scan = CutScan(10**9)
    scan.feed_rows((p, _facts({"role": "user", "content": "x"}, 1)) for p in range(10_000, 0, -1))
    assert not hasattr(scan, "_tokens")
    assert scan.cut(10_000, 10_000).suffix == 10_000
