"""``flowmem.store.listing``: records by (scope, scope id, key prefix), in code-point order, on every backend."""

from __future__ import annotations

import pytest

from flowmem.errors import ConfigurationError, InvalidInputError
from flowmem.store import Address, Store
from flowmem.store.listing import (
    ListedRecord,
    iter_records,
    list_records,
    listing_of,
    prefix_end,
    successor,
    touch_record,
)
from flowmem.store.rows import to_json

NOW = 1_000.0
KEYS = [
    "a",
    "a\x01",
    "a b",
    "ab",
    "aé",
    "a\U0001f600",
    "a\U0010ffff",
    "a\U0010ffffz",
    "b",
    "Z",
    "é",
]


def _fill(store: Store) -> None:
    for index, key in enumerate(KEYS):
        store.put_record(Address("global", "", key), {"i": index}, None)
    store.put_record(Address("global", "other", "a"), {"i": "other id"}, None)
    store.put_record(Address("user", "", "a"), {"i": "other scope"}, None)
    store.put_record(Address("global", "", "a gone"), {"i": "expired"}, NOW)
    store.put_record(Address("global", "", "a later"), {"i": "expires later"}, NOW + 1)


def _keys(records: list[ListedRecord]) -> list[str]:
    return [record.key for record in records]


def test_a_listing_is_one_scope_ids_live_records_in_code_point_order(store: Store) -> None:
    _fill(store)
    everything = list_records(store, "global", "", "", now=NOW, limit=100)
    assert _keys(everything) == sorted([*KEYS, "a later"])
    assert [record.value["i"] for record in everything if record.key == "b"] == [KEYS.index("b")]
    assert everything[0].text == to_json({"i": KEYS.index("Z")})
    assert {record.expires_at for record in everything} == {None, NOW + 1}
    starting_a = [key for key in sorted([*KEYS, "a later"]) if key.startswith("a")]
    assert _keys(list_records(store, "global", "", "a", now=NOW)) == starting_a
    assert _keys(list_records(store, "global", "", "a\U0010ffff", now=NOW)) == [
        "a\U0010ffff",
        "a\U0010ffffz",
    ]
    assert _keys(list_records(store, "global", "other", "", now=NOW)) == ["a"]
    assert _keys(list_records(store, "user", "", "a", now=NOW)) == ["a"]
    assert list_records(store, "global", "", "c", now=NOW) == []
    assert "a later" not in _keys(list_records(store, "global", "", "a", now=NOW + 1))


def test_pages_start_after_or_at_a_key_and_iterate_in_batches(store: Store) -> None:
    _fill(store)
    ordered = _keys(list_records(store, "global", "", "a", now=NOW, limit=100))
    at = ordered.index("ab")
    after_ab = list_records(store, "global", "", "a", now=NOW, after="ab", limit=2)
    assert _keys(after_ab) == ordered[at + 1 : at + 3]
    from_ab = list_records(store, "global", "", "a", now=NOW, start="ab", limit=2)
    assert _keys(from_ab) == ordered[at : at + 2]
    past_ab = list_records(store, "global", "", "a", now=NOW, start=successor("ab"))
    assert _keys(past_ab) == ordered[at + 1 :]
    assert list_records(store, "global", "", "a", now=NOW, start="b") == []
    assert (
        _keys(list_records(store, "global", "", "a", now=NOW, start="0")) == ordered
    )  # below: the prefix
    for batch in (1, 2, 3, 100):
        assert _keys(list(iter_records(store, "global", "", "a", now=NOW, batch=batch))) == ordered
    assert list_records(store, "global", "", "a", now=NOW, limit=0) == []


def test_a_keys_only_listing_sends_no_values(store: Store) -> None:
    _fill(store)
    [record, *_] = list_records(store, "global", "", "b", now=NOW, values=False)
    assert record == ListedRecord("b", None, None)
    with pytest.raises(InvalidInputError):
        _ = record.value


def test_touch_moves_only_a_live_expiring_record_that_still_holds_the_text(store: Store) -> None:
    address = Address("global", "", "t")
    store.put_record(address, {"v": 1}, NOW + 10)
    assert touch_record(store, address, to_json({"v": 1}), NOW + 100, NOW)
    assert store.get_record(address, NOW + 50) == (True, {"v": 1})
    assert not touch_record(store, address, to_json({"v": 2}), NOW + 500, NOW)  # rewritten since
    assert store.get_record(address, NOW + 200) == (False, None)
    assert not touch_record(store, address, to_json({"v": 1}), NOW + 500, NOW + 100)  # expired
    store.put_record(address, {"v": 1}, None)
    assert not touch_record(store, address, to_json({"v": 1}), NOW + 500, NOW)  # never expires
    assert store.get_record(address, NOW + 10_000) == (True, {"v": 1})
    store.delete_record(address)
    assert not touch_record(store, address, to_json({"v": 1}), NOW + 500, NOW)  # gone: stays gone
    assert store.get_record(address, NOW) == (False, None)


def test_bad_arguments_and_stores_that_cannot_list(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        list_records(store, "global", "", "a", now=NOW, limit=-1)
    with pytest.raises(InvalidInputError):
        list_records(store, "global", "", "a\x00", now=NOW)
    with pytest.raises(InvalidInputError):
        list_records(store, "global", "", "a", now=NOW, after=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        list(iter_records(store, "global", "", "a", now=NOW, batch=0))
    with pytest.raises(InvalidInputError):
        touch_record(store, Address("global", "", "k"), None, NOW, NOW)  # type: ignore[arg-type]

    class Elsewhere:
        url = "custom://"

    with pytest.raises(ConfigurationError, match="cannot list"):
        list_records(Elsewhere(), "global", "", "", now=NOW)  # type: ignore[arg-type]
    assert listing_of(store) is listing_of(store)


def test_prefix_end_is_the_first_key_after_the_prefix() -> None:
    assert prefix_end("ab") == "ac"
    assert prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\U0010ffff\U0010ffff") is None
    assert prefix_end("") is None
    assert successor("a") == "a\x01"


@pytest.mark.postgres
def test_postgresql_orders_by_code_point_in_any_collation(postgres_store_url: str) -> None:
    from flowmem.store import open_store
    from flowmem.store.listing.postgres import PostgresListing

    store = open_store(postgres_store_url)
    try:
        _fill(store)
        listing = listing_of(store)
        assert isinstance(listing, PostgresListing)
        assert listing.collation_is_c()  # the tests' server runs initdb --locale=C
        fast = _keys(list_records(store, "global", "", "a", now=NOW, limit=100))
        listing._collation_is_c = False  # as in an en_US or ICU database: COLLATE "C" statements
        assert listing.statement("list").count('COLLATE "C"') == 3
        assert _keys(list_records(store, "global", "", "a", now=NOW, limit=100)) == fast
        assert _keys(list(iter_records(store, "global", "", "", now=NOW, batch=2))) == sorted(
            [*KEYS, "a later"]
        )
    finally:
        store.close()
