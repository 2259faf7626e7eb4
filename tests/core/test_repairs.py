"""The repair log's pure side (issue 37 §2): an eviction's entry, the kinds, the indexes of removed rows."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import KINDS, ListEditor, Repair, apply_append, kind_of, prepare
from flowmem.core.repairs import WINDOW, removed_index


def _call(*cids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": c} for c in cids]}


def _result(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "ok"}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_a_window_eviction_is_one_entry_with_the_indexes_the_rows_had_before_it() -> None:
    """The turn at 0 and its result at 2 (after another turn) leave; their indexes before it are kept."""
    editor = ListEditor(prepare([_call("a"), _call("b"), _result("a"), _result("b")], 1))
    outcome = apply_append(editor, prepare([_user("x")], 2), max_messages=3)
    (evicted,) = outcome.repairs
    assert evicted == Repair(WINDOW, ("a",), 2, (0, 2))
    assert evicted.kind == "evict" and outcome.logged == (evicted,)


def test_an_eviction_names_a_stripped_results_call_id_and_counts_every_row_removed() -> None:
    editor = ListEditor(prepare([_user("q"), _call("a", "b"), _result("a"), _result("b"), _user("r")], 1))
    outcome = apply_append(editor, prepare([_user("s")], 2), max_messages=2)
    (evicted,) = outcome.repairs
    assert (evicted.call_ids, evicted.count, evicted.positions) == (("a", "b"), 4, (0, 1, 2, 3))
    assert [row["content"] for row in editor.rows] == ["r", "s"]


def test_mem_3_a_heal_and_an_eviction_in_one_append_are_two_entries_heal_first() -> None:
    editor = ListEditor(prepare([_user("q"), _call("a")], 1))
    outcome = apply_append(editor, prepare([_user("r")], 2), max_messages=2)
    assert [r.kind for r in outcome.repairs] == ["heal", "evict"]


def test_mem_1_an_append_of_duplicates_that_evicts_is_logged() -> None:
    """It changed rows (a lowered window): not the pure retry decision 0116 leaves out."""
    editor = ListEditor(prepare([_user("q"), _call("a"), _result("a")], 1))
    outcome = apply_append(editor, prepare([_result("a")], 2), max_messages=1)
    assert outcome.appended == 0 and [r.kind for r in outcome.logged] == ["duplicate", "evict"]


def test_an_append_within_its_window_has_no_eviction_entry() -> None:
    editor = ListEditor(prepare([_user("q")], 1))
    assert apply_append(editor, prepare([_user("r")], 2), max_messages=2).repairs == ()


def test_every_rule_has_a_kind_and_any_other_rule_is_a_refusal() -> None:
    assert {kind_of(rule) for rule in KINDS} == {"heal", "replace", "duplicate", "evict", "compact", "normalize"}
    assert kind_of("buffer_full") == "refuse"
    assert Repair("MEM-10", ("c",), 1).kind == "replace"


@given(st.integers(min_value=1, max_value=30), st.randoms(use_true_random=False))
def test_removed_index_gives_the_index_before_every_removal(size: int, rng: random.Random) -> None:
    rows = list(range(size))
    noted: list[int] = []
    found: list[int] = []
    for _ in range(rng.randint(1, size)):
        now = rng.randrange(len(rows))
        found.append(removed_index(noted, now))
        assert found[-1] == rows.pop(now)
    assert noted == sorted(found)
