"""Deciding an append on known facts, without a database (flowmem.store.known, decision 0039)."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import Message, prepare
from flowmem.store import Address
from flowmem.store.known import Known, KnownBuffers, Unforeseen, foresee

KNOWN = Known(
    buffer_id=1,
    version=3,
    count=2,
    last_major=2,
    bytes=100,
    open=frozenset({"c1"}),
    listed='[["c1",2097152,0]]',
)
ADDRESS = Address("global", "", "b")


def _rows(*messages: dict[str, Any]) -> list[Message]:
    return prepare(list(messages), 1)


def test_foresee_a_result_for_an_open_call_assumes_nothing_new() -> None:
    seen = foresee(
        KNOWN,
        ADDRESS,
        _rows({"role": "tool", "content": "r", "tool_call_id": "c1"}),
        ["c1"],
        False,
        0,
        0,
    )
    assert (seen.outcome.appended, seen.outcome.count, seen.fresh) == (1, 3, [])
    # no flag flipped: the answer takes the call off the header's list (decision 0153), and
    # its own row carries the declaration the list held, written with it: no write of the
    # call ids' table (PostgreSQL's migration 35, decision 0194; 34 wrote ``answer_carry``)
    assert [name for name, _ in seen.writes] == ["row_insert", "header_listed"]
    assert seen.writes[0][1][:2] == (1, 3 << 20) and seen.writes[0][1][-3:] == ("c1", 2 << 20, 0)
    assert seen.writes[-1][1][4] == "[]"


def test_foresee_new_call_ids_are_assumed_new_for_the_server_to_check() -> None:
    turn = {"role": "assistant", "content": "", "tool_calls": [{"id": "c9", "name": "f"}]}
    seen = foresee(KNOWN, ADDRESS, _rows(turn), ["c9"], False, 0, 0)
    assert seen.fresh == ["c9"] and seen.outcome.appended == 1
    # listed only: no row of its own (decision 0190)
    assert [name for name, _ in seen.writes] == ["row_insert", "header_listed"]
    name, params = seen.writes[-1]  # the new call listed after the known one, with the header
    assert (name, params[:3], params[4:]) == (
        "header_listed",
        (3, 3, 100 + len(seen.writes[0][1][3])),
        ('[["c1",2097152,0],["c9",3145728,0]]', 1),
    )


@pytest.mark.parametrize(
    ("rows", "ids", "heals", "window", "limit"),
    [
        ([{"role": "user", "content": "u"}], [], True, 0, 0),  # c1 is open: healing needs positions
        ([{"role": "assistant", "content": "a"}], [], False, 2, 0),  # the window evicts
        ([{"role": "assistant", "content": "a"}], [], False, 0, 101),  # over the size limit
    ],
)
def test_foresee_refuses_what_the_known_facts_do_not_say(
    rows: list[dict[str, Any]], ids: list[str], heals: bool, window: int, limit: int
) -> None:
    with pytest.raises(Unforeseen):
        foresee(KNOWN, ADDRESS, _rows(*rows), ids, heals, window, limit)


def test_foresee_a_user_turn_with_nothing_open_heals_nothing() -> None:
    quiet = Known(1, 3, 2, 2, 100, frozenset())
    seen = foresee(quiet, ADDRESS, _rows({"role": "user", "content": "u"}), [], True, 0, 0)
    assert seen.outcome.appended == 1 and [n for n, _ in seen.writes] == [
        "row_insert",
        "header_update",
    ]


def test_known_buffers_are_bounded_and_forget_the_oldest() -> None:
    memo = KnownBuffers(2)
    for n in range(3):
        memo.remember(Address("global", "", str(n)), KNOWN)
    assert memo.get(Address("global", "", "0")) is None
    assert memo.get(Address("global", "", "2")) == KNOWN
    memo.remember(Address("global", "", "2"), None)
    assert memo.get(Address("global", "", "2")) is None
    off = KnownBuffers(0)
    off.remember(ADDRESS, KNOWN)
    assert off.get(ADDRESS) is None
