"""``store.postgres.after.known_after``: a buffer's facts worked out from an append's writes.

The oracle (``buffer_known`` read after each append of random histories) is in
tests/store/test_postgres_known.py; these are the cases by name, without a database.
"""

from __future__ import annotations

from flowmem.store.known import MAX_KNOWN_OPEN, Known
from flowmem.store.postgres.after import known_after

KNOWN = Known(7, 3, 2, 2, 100, frozenset({"c1"}))


def test_no_write_leaves_every_fact_as_it_was() -> None:
    assert known_after(KNOWN, []) == KNOWN


def test_the_header_update_sets_the_header_and_increments_the_version() -> None:
    after = known_after(KNOWN, [("row_insert", (7, 3 << 20, "user", "{}")), ("header_update", (3, 3, 120, 7))])
    assert after == Known(7, 4, 3, 3, 120, frozenset({"c1"}))


def test_an_answer_closes_its_call_and_a_declaration_opens_one() -> None:
    writes = [
        ("answer_insert", (7, "c1", 3 << 20, False)),
        ("calls_answered", (7, "c1")),
        ("call_insert", (7, "c2", 4 << 20, 0, 7, "c2")),
        ("header_update", (4, 4, 150, 7)),
    ]
    assert known_after(KNOWN, writes).open == {"c2"}  # type: ignore[union-attr]


def test_a_call_answered_in_the_same_append_is_not_open_whatever_the_order() -> None:
    declared = ("call_insert", (7, "c2", 4 << 20, 0, 7, "c2"))
    answered = ("answer_insert", (7, "c2", 5 << 20, False))
    for writes in ([declared, answered], [answered, declared]):
        assert known_after(KNOWN, writes).open == {"c1"}  # type: ignore[union-attr]


def test_more_open_calls_than_kept_are_not_remembered() -> None:
    writes = [("call_insert", (7, f"n{i}", 4 << 20, i, 7, f"n{i}")) for i in range(MAX_KNOWN_OPEN)]
    assert known_after(KNOWN, writes) is None
    assert known_after(KNOWN, writes[:-1]) is not None
