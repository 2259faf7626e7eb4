"""``store.rows``' argument checks of an append, against their plain definitions (decision 0168).

``check_address`` passes ASCII strings without NUL at once, ``check_lock_timeout``
returns a float already in bounds as it is, and ``check_rows`` tests its rows'
types without a generator: over any argument hypothesis makes, each raises the
same error with the same message, or returns the same value, as its plain twin
(the functions as they were).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flowmem.core.storable import check_storable
from flowmem.errors import InvalidInputError
from flowmem.store.rows import DumpedRow, check_address, check_lock_timeout, check_rows


def plain_check_address(address: Any) -> None:
    """``check_address`` as it was."""
    if len(address) != 3:
        raise InvalidInputError(f"an address is (scope, scope_id, key), got {address!r}")
    for name, part in zip(("scope", "scope_id", "key"), address, strict=True):
        if not isinstance(part, str):
            raise InvalidInputError(f"address parts must be strings, got {part!r}")
        if "\x00" in part:
            raise InvalidInputError("address parts must not contain NUL characters")
        if not part.isascii():
            check_storable(part, name)


def plain_check_lock_timeout(seconds: Any) -> float:
    """``check_lock_timeout`` as it was."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds:
        raise InvalidInputError(f"lock_timeout must be a number of seconds, got {seconds!r}")
    return min(max(float(seconds), 0.0), 86400.0)


def plain_check_rows(rows: Any) -> None:
    """``check_rows`` as it was."""
    if (
        isinstance(rows, list)
        and rows
        and type(rows[0]) is DumpedRow
        and all(type(row) is DumpedRow for row in rows)
    ):
        return
    check_storable(rows, "messages")


class Text(str):
    """A ``str`` subclass: not the fast path's exact ``str``."""


def _outcome(check: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", check(value)
    except Exception as exc:
        return type(exc).__name__, str(exc)


PART = st.one_of(
    st.text(max_size=4),
    st.sampled_from(["a", "", "a\x00", "\udc80", "é", "x\udfff"]),
    st.integers(),
    st.none(),
    st.builds(Text, st.text(max_size=3)),
)


@settings(max_examples=500)
@given(st.lists(PART, min_size=0, max_size=4).map(tuple))
@example(("user", "u1", "chat"))
@example(("user", "u\x00", "chat"))
@example(("user", "u", "\udc80"))
@example(("user", Text("u"), "chat"))
@example(("user", 1, "chat"))
def test_check_address_decides_as_its_plain_twin(address: tuple[Any, ...]) -> None:
    assert _outcome(check_address, address) == _outcome(plain_check_address, address)


@settings(max_examples=500)
@given(
    st.one_of(
        st.floats(),
        st.integers(-5, 100_000),
        st.booleans(),
        st.none(),
        st.text(max_size=2),
        st.sampled_from([0.0, -0.0, 86400.0, 86400.5, 5.0]),
    )
)
def test_check_lock_timeout_decides_as_its_plain_twin(seconds: Any) -> None:
    mine, plain = _outcome(check_lock_timeout, seconds), _outcome(plain_check_lock_timeout, seconds)
    assert mine == plain or (
        mine[0] == plain[0] == "ok" and mine[1] != mine[1] and plain[1] != plain[1]
    )
    if mine[0] == "ok":
        assert type(mine[1]) is float
        assert str(mine[1]) == str(plain[1])  # -0.0 stays -0.0


def _dumped(row: dict[str, Any]) -> DumpedRow:
    made = DumpedRow(row)
    made.text = "{}"
    return made


ROWS = st.one_of(
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"content": st.text(max_size=3)}),
            st.fixed_dictionaries({"content": st.text(max_size=3)}).map(_dumped),
            st.integers(),
        ),
        max_size=3,
    ),
    st.tuples(st.fixed_dictionaries({"content": st.text(max_size=3)}).map(_dumped)),
    st.none(),
)


@settings(max_examples=500)
@given(ROWS)
def test_check_rows_decides_as_its_plain_twin(rows: Any) -> None:
    assert _outcome(check_rows, rows) == _outcome(plain_check_rows, rows)


def test_a_row_after_dumped_ones_is_still_checked() -> None:
    with pytest.raises(InvalidInputError):
        check_rows([_dumped({"content": "a"}), {"content": "\udc80"}])


JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=4),
        st.sampled_from(["\udc80", "\u2028", "é", '"', "\\"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=2).map(tuple),
        st.dictionaries(
            st.one_of(st.text(max_size=3), st.integers(), st.floats(), st.booleans(), st.none()),
            inner,
            max_size=3,
        ),
        st.sets(st.integers(), max_size=1),
    ),
    max_leaves=10,
)


def _encoded(encode: Any, row: Any) -> tuple[str, str]:
    try:
        return "ok", encode(row)
    except (TypeError, ValueError, RecursionError):
        return "failed", ""


@settings(max_examples=800)
@given(st.dictionaries(st.text(max_size=3), JSONISH, max_size=4))
@example({"content": float("nan")})
@example({"content": {1: "a", 2.5: "b", False: "c", None: "d"}})
@example({"content": {(1,): "tuple key"}})
def test_the_rows_encoder_built_once_writes_what_the_compact_encoder_writes(
    row: dict[str, Any],
) -> None:
    from flowmem.store import rows

    fast = _encoded(lambda r: "".join(rows._ROW_CHUNKS(r, 0)), row)
    assert fast == _encoded(rows._COMPACT.encode, row)


def test_a_cyclic_row_is_handed_to_the_plain_checks_as_given() -> None:
    from flowmem.store.rows import dumped_ahead

    row: dict[str, Any] = {"role": "user", "content": "a"}
    row["metadata"] = {"self": row}
    given_rows = [row]
    assert dumped_ahead(given_rows) is given_rows
