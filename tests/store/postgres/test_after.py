"""``store.postgres.after.known_after``: a buffer's facts worked out from an append's writes.

The oracle (``buffer_known`` read after each append of random histories) is in
tests/store/test_postgres_known.py; these are the cases by name, without a database.
Since migration 26 (decision 0153) the open calls are the header's list, which the
editor writes with the header (``header_listed``, the list its fifth parameter).
"""

from __future__ import annotations

import json

from flowmem.store.known import MAX_KNOWN_OPEN, Known
from flowmem.store.postgres.after import known_after, open_of

LISTED = '[["c1",2097152,0]]'
KNOWN = Known(7, 3, 2, 2, 100, frozenset({"c1"}), LISTED)


def _listed(*calls: tuple[str, int, int]) -> str:
    """A header's list as the editor writes it."""
    return json.dumps([list(call) for call in calls], separators=(",", ":"))


def test_no_write_leaves_every_fact_as_it_was() -> None:
    assert known_after(KNOWN, []) == KNOWN


def test_the_header_update_sets_the_header_and_increments_the_version_leaving_the_list() -> None:
    after = known_after(
        KNOWN,
        [("row_insert", (7, 3 << 20, "user", "{}", 1, None)), ("header_update", (3, 3, 120, 7))],
    )
    assert after == Known(7, 4, 3, 3, 120, frozenset({"c1"}), LISTED)


def test_an_answer_closes_its_call_and_a_declaration_opens_one_as_the_written_list_says() -> None:
    listed = _listed(("c2", 4 << 20, 0))
    writes = [
        ("answer_insert", (7, "c1", 3 << 20, False)),
        ("call_insert", (7, "c2", 4 << 20, 0, 7, "c2")),
        ("header_listed", (4, 4, 150, 7, listed)),
    ]
    after = known_after(KNOWN, writes)
    assert after == Known(7, 4, 4, 4, 150, frozenset({"c2"}), listed)


def test_the_open_calls_are_the_ids_the_list_names_once_each() -> None:
    assert open_of("[]") == frozenset()
    assert open_of(_listed(("a", 1, 0), ("b", 1, 1), ("a", 2, 0))) == {"a", "b"}


def test_more_open_calls_than_kept_are_not_remembered() -> None:
    many = [(f"n{i}", 4 << 20, i) for i in range(MAX_KNOWN_OPEN)]
    writes = [("header_listed", (4, 4, 150, 7, _listed(("c1", 2 << 20, 0), *many)))]
    assert known_after(KNOWN, writes) is None
    fewer = [("header_listed", (4, 4, 150, 7, _listed(*many)))]
    assert known_after(KNOWN, fewer) is not None
