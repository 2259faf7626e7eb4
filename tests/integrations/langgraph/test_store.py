"""``FlowmemStore`` answers as LangGraph's ``InMemoryStore`` does, on memory, SQLite and PostgreSQL.

Side by side: the same items in both stores, the same questions, the same answers
(namespace, key, value; order where ``InMemoryStore`` defines one, else the
``(namespace, key)`` order ``FlowmemStore`` defines: see ``store_oracle``). Then what
only flowmem does: user namespaces refuse without a real user (MEM-6, MEM-7), a user's
items go with ``flowmem user erase``, TTLs on the service's clock, the async API,
and bad input refused with typed errors.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

import flowmem.integrations.langgraph.store as store_module
from flowmem.errors import (
    AccessDeniedError,
    ConfigurationError,
    InvalidInputError,
    NotSerializableError,
    RecordTooLargeError,
    ScopeRefusedError,
    StoreError,
)
from flowmem.integrations.langgraph.store import (
    KEY_PREFIX,
    FlowmemStore,
    NamespaceError,
    decode_record_key,
    record_key,
)
from flowmem.limits import Limits
from flowmem.scope import ExecutionContext, usable_identity
from flowmem.service import MemoryService, kinds
from flowmem.store import Address, MemoryStore, Store
from tests.integrations.langgraph.store_oracle import (
    EVERYTHING,
    Clock,
    SpyStore,
    fill,
    normalized,
    triple,
    triples,
)
from tests.store.conftest import BACKENDS, open_backend

GLOBAL_ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("docs",), "readme", {"kind": "doc", "n": 1, "tags": ["a", "b"], "meta": {"lang": "en"}}),
    (("docs",), "guide", {"kind": "doc", "n": 5, "meta": {"lang": "fr"}}),
    (("docs", "v1"), "intro", {"kind": "page", "n": 2}),
    (("docs", "v1"), "usage", {"kind": "page", "n": 7, "status": "draft"}),
    (("docs", "v1", "draft"), "x", {"kind": "page", "n": 3, "status": "draft"}),
    (("docs", "v2"), "intro", {"kind": "page", "n": 4.5}),
    (("docs", "v 2!"), "odd key", {"kind": "page", "n": 0}),
    (("docs-old",), "a", {"kind": "doc", "n": 9}),
    (("cache", "emb", "v1"), "k1", {"kind": "cache", "n": 10}),
    (("cache", "emb", "v2"), "k1", {"kind": "cache", "n": 11}),
    (("cache", "tok", "v1"), "k2", {"kind": "cache", "n": 12, "status": "hot"}),
    (("ünï", "çødé"), "ключ", {"n": 13}),
    (("a\x01b", "c d"), "ctl", {"n": 14}),
    (("Users",), "not-a-user", {"n": 15}),  # labels compare exactly: a global namespace
]
USER_ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("users", "42"), "prefs", {"theme": "dark", "n": 1}),
    (("users", "42", "memories"), "m1", {"text": "likes tea", "n": 2}),
    (("users", "42", "memories"), "m2", {"text": "lives in Oslo", "n": 3, "status": "draft"}),
    (("users", "42", "memories", "old"), "m0", {"text": "moved", "n": 4}),
    (("users", "42", "notes"), "n1", {"text": "n", "n": 5}),
    (("users", "7", "memories"), "m1", {"text": "someone else", "n": 6}),
]
FILTERS: list[dict[str, Any] | None] = [
    None,
    {"kind": "page"},
    {"kind": "page", "n": {"$gt": 2}},
    {"meta": {"lang": "en"}},
    {"tags": ["a", "b"]},
    {"n": {"$gt": 2}},
    {"n": {"$gte": 2, "$lt": 7}},
    {"n": {"$lte": 1}},
    {"n": {"$eq": 5}},
    {"n": 4.5},
    {"status": {"$ne": "draft"}},
    {"status": "draft"},
    {"status": {"$eq": "hot"}},
]
PAGES = [(10, 0), (2, 0), (2, 1), (3, 4), (1, 100), (0, 0), (EVERYTHING, 0)]


def _is_user(namespace: tuple[str, ...]) -> bool:
    return bool(namespace) and namespace[0] == "users"


@dataclass
class Flow:
    """A ``FlowmemStore`` over one backend, its service, that service's store and clock."""

    store: FlowmemStore
    service: MemoryService
    raw: Store
    clock: Clock


@pytest.fixture(params=BACKENDS)
def flow(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Flow]:
    """A ``FlowmemStore`` over a fresh store of each backend, on a clock the test moves."""
    raw = open_backend(request.param, request, tmp_path)
    clock = Clock()
    service = MemoryService(raw, clock=clock)
    try:
        yield Flow(FlowmemStore(service), service, raw, clock)
    finally:
        raw.close()


@pytest.fixture
def filled(flow: Flow) -> tuple[Flow, InMemoryStore]:
    """``flow`` and an ``InMemoryStore`` holding the same global and user items."""
    reference = InMemoryStore()
    fill([flow.store, reference], GLOBAL_ITEMS + USER_ITEMS)
    return flow, reference


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "flowmem" and r.levelno == logging.WARNING]


# --- side by side with InMemoryStore ------------------------------------------------------
def test_put_get_delete_answer_as_in_memory_store(flow: Flow) -> None:
    reference = InMemoryStore()
    for store in (flow.store, reference):
        for namespace, key, value in GLOBAL_ITEMS + USER_ITEMS:
            store.put(namespace, key, value)
        store.put(("docs",), "guide", {"kind": "doc", "n": 6})  # an update
        store.delete(("docs", "v1"), "intro")
        store.delete(("docs", "v1"), "never-there")
        store.delete(("users", "42", "memories"), "m2")
    for namespace, key, _ in [*GLOBAL_ITEMS, *USER_ITEMS, (("docs",), "missing", {})]:
        assert triple(flow.store.get(namespace, key)) == triple(reference.get(namespace, key))
    assert flow.store.get(("docs",), "guide").value == {"kind": "doc", "n": 6}
    assert flow.store.get(("docs", "v1"), "intro") is None
    assert flow.store.get(("nowhere",), "readme") is None


@pytest.mark.parametrize(
    "prefix",
    [(), ("docs",), ("docs", "v1"), ("docs", "v1", "draft"), ("doc",), ("docs-old",), ("cache",),
     ("cache", "emb"), ("nothing",), ("ünï",), ("a\x01b",), ("Users",)],
)  # fmt: skip
def test_search_answers_as_in_memory_store(
    filled: tuple[Flow, InMemoryStore], prefix: tuple[str, ...]
) -> None:
    flow, reference = filled
    oracle = normalized(reference, keep=lambda namespace: not _is_user(namespace))
    for condition, (limit, offset) in itertools.product(FILTERS, PAGES):
        got = flow.store.search(prefix, filter=condition, limit=limit, offset=offset)
        want = oracle.search(prefix, filter=condition, limit=limit, offset=offset)
        assert triples(got) == triples(want), (prefix, condition, limit, offset)
        assert all(item.score is None for item in got)


@pytest.mark.parametrize(
    "prefix", [("users", "42"), ("users", "42", "memories"), ("users", "7"), ("users", "9")]
)
def test_search_in_a_user_namespace_answers_as_in_memory_store(
    filled: tuple[Flow, InMemoryStore], prefix: tuple[str, ...]
) -> None:
    flow, reference = filled
    for condition, (limit, offset) in itertools.product(FILTERS, PAGES):
        got = flow.store.search(prefix, filter=condition, limit=limit, offset=offset)
        want = reference.search(prefix, filter=condition, limit=limit, offset=offset)
        assert triples(got) == triples(want), (prefix, condition, limit, offset)


LIST_PREFIXES: list[tuple[str, ...] | None] = [
    None, ("docs",), ("docs", "*"), ("*", "v1"), ("*",), ("cache", "*", "v1"), ("doc",), ("ünï",),
]  # fmt: skip
LIST_SUFFIXES: list[tuple[str, ...] | None] = [None, ("v1",), ("*",), ("emb", "*"), ("v1", "draft")]
LIST_PAGES = [(100, 0), (2, 0), (2, 2), (1, 50), (0, 0)]


@pytest.mark.parametrize("max_depth", [None, 1, 2, 3])
def test_list_namespaces_answers_as_in_memory_store(
    filled: tuple[Flow, InMemoryStore], max_depth: int | None
) -> None:
    flow, reference = filled
    oracle = normalized(reference, keep=lambda namespace: not _is_user(namespace))
    for prefix, suffix, (limit, offset) in itertools.product(
        LIST_PREFIXES, LIST_SUFFIXES, LIST_PAGES
    ):
        asked: dict[str, Any] = {"prefix": prefix, "suffix": suffix, "max_depth": max_depth}
        got = flow.store.list_namespaces(**asked, limit=limit, offset=offset)
        want = oracle.list_namespaces(**asked, limit=limit, offset=offset)
        assert got == want, (asked, limit, offset)


@pytest.mark.parametrize("max_depth", [None, 1, 2, 3, 4])
def test_list_namespaces_of_a_user_answers_as_in_memory_store(
    filled: tuple[Flow, InMemoryStore], max_depth: int | None
) -> None:
    flow, reference = filled
    prefixes = [("users", "42"), ("users", "42", "memories"), ("users", "42", "*"), ("users", "7")]
    suffixes: list[tuple[str, ...] | None] = [None, ("memories",), ("*",), ("42", "*"), ("old",)]
    for prefix, suffix, (limit, offset) in itertools.product(prefixes, suffixes, LIST_PAGES):
        asked: dict[str, Any] = {"prefix": prefix, "suffix": suffix, "max_depth": max_depth}
        got = flow.store.list_namespaces(**asked, limit=limit, offset=offset)
        want = reference.list_namespaces(**asked, limit=limit, offset=offset)
        assert got == want, (asked, limit, offset)


def test_a_search_or_listing_without_a_user_covers_the_global_scope_only(
    filled: tuple[Flow, InMemoryStore], caplog: pytest.LogCaptureFixture
) -> None:
    flow, _ = filled
    caplog.set_level(logging.WARNING, logger="flowmem")
    everything = flow.store.search((), limit=EVERYTHING)
    assert sorted(triples(everything)) == sorted(triples(normalized_items(GLOBAL_ITEMS)))
    assert all(not _is_user(tuple(name)) for name in flow.store.list_namespaces(limit=1000))
    assert ("users",) not in flow.store.list_namespaces(max_depth=1)
    assert flow.store.list_namespaces(prefix=("*",), suffix=("memories",)) == []
    assert _warnings(caplog) == []  # nothing was asked of the user scope: nothing refused


def normalized_items(items: list[tuple[tuple[str, ...], str, dict[str, Any]]]) -> list[Any]:
    """The items as ``InMemoryStore`` holds them after a put (the same triples)."""
    reference = InMemoryStore()
    fill([reference], items)
    return reference.search((), limit=EVERYTHING)


def test_search_and_listing_read_in_pages_and_jump_over_namespaces(
    flow: Flow, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = InMemoryStore()
    items = [((f"ns{n}", "deep"), f"k{i:03}", {"n": i}) for n in range(4) for i in range(120)]
    fill([flow.store, reference], items)
    calls: list[int] = []
    real = kinds.list_records  # the listing's page read, which the store reaches through the service

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["limit"])
        return real(*args, **kwargs)

    monkeypatch.setattr(kinds, "list_records", counted)
    assert flow.store.list_namespaces() == reference.list_namespaces()
    assert len(calls) <= 5  # one read per namespace (and the one that finds none left), not 480
    calls.clear()
    assert flow.store.list_namespaces(max_depth=1) == [("ns0",), ("ns1",), ("ns2",), ("ns3",)]
    assert len(calls) <= 5
    got = flow.store.search((), limit=EVERYTHING)
    assert triples(got) == triples(reference.search((), limit=EVERYTHING))
    assert len(got) == 480
    page = flow.store.search(("ns2",), filter={"n": {"$gte": 100}}, offset=5, limit=7)
    assert [item.key for item in page] == [f"k{i:03}" for i in range(105, 112)]


def test_a_batch_reads_before_it_writes_and_the_last_put_wins(flow: Flow) -> None:
    reference = InMemoryStore()
    reference.put(("a",), "k", {"v": 0})
    flow.store.put(("a",), "k", {"v": 0})
    ops = [
        PutOp(("a",), "k", {"v": 1}),
        GetOp(("a",), "k"),
        PutOp(("a",), "k2", {"v": 2}),
        SearchOp(("a",)),
        ListNamespacesOp(),
        PutOp(("a",), "k", {"v": 3}),
        PutOp(("b",), "k", {"v": 4}),
        PutOp(("b",), "k", None),
    ]
    got, want = flow.store.batch(ops), reference.batch(ops)
    assert triple(got[1]) == triple(want[1]) == (("a",), "k", {"v": 0})
    assert triples(got[3]) == triples(want[3])
    assert got[4] == want[4] == [("a",)]
    assert [got[i] for i in (0, 2, 5, 6, 7)] == [None] * 5
    for namespace, key in [(("a",), "k"), (("a",), "k2"), (("b",), "k")]:
        assert triple(flow.store.get(namespace, key)) == triple(reference.get(namespace, key))


def test_a_query_is_ignored_as_by_an_in_memory_store_without_an_index(
    filled: tuple[Flow, InMemoryStore],
) -> None:
    flow, reference = filled
    got = flow.store.search(("docs",), query="python tutorials", filter={"kind": "page"})
    want = normalized(reference).search(
        ("docs",), query="python tutorials", filter={"kind": "page"}
    )
    assert triples(got) == triples(want)
    assert [item.score for item in got] == [None] * len(got)
    with pytest.raises(ConfigurationError, match="needs 'embed'"):  # an index is checked when built
        FlowmemStore(flow.service, index={"dims": 3})


def test_labels_and_keys_keep_any_character_and_never_collide(flow: Flow) -> None:
    pairs = [
        (("a b",), "c"),
        (("a", "b"), "c"),
        (("a",), "b  c"),
        (("a",), "b c"),
        (("a!",), "c"),
        (("a", "!"), "c"),
        (("a\x01",), "c"),
        (("a",), ""),
        (("a",), " "),
        (("\U0010ffff",), "\U0010ffff"),
        (("users", "42", "x y"), "z"),
        (("users", "42"), "x y  z"),
    ]
    for index, (namespace, key) in enumerate(pairs):
        flow.store.put(namespace, key, {"i": index})
    for index, (namespace, key) in enumerate(pairs):
        assert triple(flow.store.get(namespace, key)) == (namespace, key, {"i": index})
    found = triples(flow.store.search((), limit=100)) + triples(flow.store.search(("users", "42")))
    assert sorted(found) == sorted((ns, key, {"i": i}) for i, (ns, key) in enumerate(pairs))


# --- keys: the encoding is exact and keeps order -------------------------------------------
LABELS = st.text(
    st.characters(blacklist_characters=".\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=6,
)


ITEM_KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)
"""``st.text()``'s strings without NUL, drawn from its alphabet less NUL, not filtered (decision 0217)."""
NAMESPACES = st.lists(LABELS, max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NAMESPACES, ITEM_KEYS), min_size=2, max_size=6))
def test_record_keys_decode_exactly_and_sort_as_namespace_then_key(
    items: list[tuple[tuple[str, ...], str]],
) -> None:
    encoded = [record_key(labels, key) for labels, key in items]
    assert [decode_record_key(text) for text in encoded] == items
    assert sorted(range(len(items)), key=lambda i: encoded[i]) == sorted(
        range(len(items)), key=lambda i: items[i]
    )
    assert all(text.startswith(KEY_PREFIX) for text in encoded)


def test_a_record_key_names_what_it_holds() -> None:
    assert record_key(("docs", "v1"), "intro") == "langgraph:docs v1  intro"
    assert record_key(("v 2!",), "k") == "langgraph:v!`2!a  k"
    assert decode_record_key("someone else's key") is None
    assert decode_record_key("langgraph:docs") is None


def test_values_and_timestamps_are_kept_in_an_envelope(flow: Flow) -> None:
    flow.store.put(("users", "42"), "prefs", {"theme": "dark"})
    first = flow.store.get(("users", "42"), "prefs")
    flow.clock.advance(10)
    flow.store.put(("users", "42"), "prefs", {"theme": "light"})
    second = flow.store.get(("users", "42"), "prefs")
    assert first is not None and second is not None
    assert second.created_at == first.created_at == first.updated_at
    assert (second.updated_at - first.updated_at).total_seconds() == 10
    assert second.created_at.timestamp() == flow.clock.now - 10
    found, stored = flow.raw.get_record(
        Address("user", "42", "langgraph:users  prefs"), flow.clock.now
    )
    assert (
        found and stored["value"] == {"theme": "light"} and stored["format"] == "langgraph.store/1"
    )
    [hit] = flow.store.search(("users", "42"))
    assert (hit.created_at, hit.updated_at) == (second.created_at, second.updated_at)


def test_a_record_of_another_writer_under_the_prefix_is_not_an_item(flow: Flow) -> None:
    flow.service.write_raw("global", "", "langgraph:docs  plain", {"not": "an envelope"})
    flow.service.write_raw("global", "", "langgraph:broken", {"format": "x"})
    flow.store.put(("docs",), "real", {"n": 1})
    assert flow.store.get(("docs",), "plain") is None
    assert [item.key for item in flow.store.search(())] == ["real"]
    assert flow.store.list_namespaces() == [("docs",)]


# --- MEM-6, MEM-7: a user namespace without a real user -----------------------------------
# ids flowmem.scope.usable_identity refuses (MEM-6: none of them is a real user)
UNUSABLE = [
    "0",
    "00",
    "-1",
    "+0",
    "None",
    "null",
    "undefined",
    "nil",
    "a b",
    "tab\there",
    "x" * 256,
]


def _spied(context: ExecutionContext | None = None) -> tuple[FlowmemStore, SpyStore]:
    spy = SpyStore()
    store = FlowmemStore(MemoryService(spy, clock=Clock()), context=context)
    spy.touched.clear()
    return store, spy


@pytest.mark.parametrize("user_id", UNUSABLE)
def test_mem_6_a_user_namespace_without_a_usable_user_reads_nothing(
    user_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, spy = _spied()
    caplog.set_level(logging.WARNING, logger="flowmem")
    reads = [
        lambda: store.get(("users", user_id), "prefs"),
        lambda: store.get(("users", user_id, "memories"), "m1"),
        lambda: store.search(("users", user_id)),
        lambda: store.search(("users", user_id, "memories"), filter={"n": 1}),
        lambda: store.list_namespaces(prefix=("users", user_id)),
    ]
    for read in reads:
        caplog.clear()
        assert read() in (None, [])
        assert len(_warnings(caplog)) == 1
        assert spy.touched == []


@pytest.mark.parametrize(
    "user_id", ["42", "ana", "007", "+7", "José", "NULL", "NONE", "Nil", "*", "0x1", "-0", "None"]
)
def test_mem_6_the_store_refuses_exactly_the_ids_flowmem_refuses(
    user_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, spy = _spied()
    caplog.set_level(logging.WARNING, logger="flowmem")
    refused = usable_identity(user_id) is None  # the one decision (DESIGN.md §3)
    if refused:
        with pytest.raises(ScopeRefusedError):
            store.put(("users", user_id), "prefs", {"n": 1})
        assert spy.touched == []
    else:
        store.put(("users", user_id), "prefs", {"n": 1})
    assert (store.get(("users", user_id), "prefs") is None) == refused
    assert len(_warnings(caplog)) == (2 if refused else 0)


def test_mem_6_listing_users_without_naming_one_refuses(caplog: pytest.LogCaptureFixture) -> None:
    store, spy = _spied()
    caplog.set_level(logging.WARNING, logger="flowmem")
    reads = [
        lambda: store.get(("users",), "k"),
        lambda: store.search(("users",)),
        lambda: store.list_namespaces(prefix=("users",)),
        lambda: store.list_namespaces(prefix=("users", "*")),
        lambda: store.list_namespaces(prefix=("users", "*", "memories"), max_depth=2),
    ]
    for read in reads:
        caplog.clear()
        assert read() in (None, [])
        assert len(_warnings(caplog)) == 1
        assert spy.touched == []


@pytest.mark.parametrize("user_id", ["0", "None", "null", " 42"])
def test_mem_7_a_refused_write_or_delete_raises_and_stores_nothing(
    user_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, spy = _spied()
    caplog.set_level(logging.WARNING, logger="flowmem")
    with pytest.raises(ScopeRefusedError) as raised:
        store.put(("users", user_id, "memories"), "m1", {"text": "x"})
    assert raised.value.code == "scope_refused" and raised.value.details["rule"] == "MEM-6"
    assert len(_warnings(caplog)) == 1
    caplog.clear()
    with pytest.raises(ScopeRefusedError):
        store.delete(("users", user_id), "prefs")
    assert len(_warnings(caplog)) == 1
    caplog.clear()
    with pytest.raises(ScopeRefusedError):
        asyncio.run(store.aput(("users", user_id), "prefs", {"a": 1}))
    assert len(_warnings(caplog)) == 1
    assert spy.touched == []


def test_mem_7_a_batch_with_a_refused_write_touches_no_storage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, spy = _spied()
    caplog.set_level(logging.WARNING, logger="flowmem")
    ops = [
        PutOp(("docs",), "fine", {"n": 1}),
        GetOp(("users", "42"), "prefs"),
        PutOp(("users", "null"), "prefs", {"n": 2}),
    ]
    with pytest.raises(ScopeRefusedError):
        store.batch(ops)
    assert len(_warnings(caplog)) == 1
    assert spy.touched == []
    assert store.get(("docs",), "fine") is None  # the good put before it was not applied either


def test_mem_7_the_warning_names_the_node_pipeline_and_workflow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    context = ExecutionContext(workflow_id="wf-1", pipeline_id="pl-2", node_id="recall")
    store, spy = _spied(context)
    caplog.set_level(logging.WARNING, logger="flowmem")
    assert store.search(("users", "undefined", "memories")) == []
    [warning] = _warnings(caplog)
    text = warning.getMessage()
    assert "'recall'" in text and "'pl-2'" in text and "'wf-1'" in text
    assert warning.flowmem_refusal["scope"] == "user"
    assert spy.touched == []


def test_a_usable_user_id_is_read_as_flowmem_reads_ids(flow: Flow) -> None:
    nfd, nfc = "Jose\u0301", "Jos\u00e9"
    flow.store.put(("users", nfd), "prefs", {"n": 1})
    assert triple(flow.store.get(("users", nfc), "prefs")) == (("users", nfc), "prefs", {"n": 1})
    assert flow.raw.get_record(Address("user", nfc, "langgraph:users  prefs"), flow.clock.now)[0]
    flow.store.put(("users", "007"), "k", {"n": 2})
    assert flow.store.get(("users", "7"), "k") is None  # "007" is not 7 (decision 0016)


def test_more_first_labels_can_name_users_without_colliding(flow: Flow) -> None:
    store = FlowmemStore(flow.service, user_labels=("users", "memories"))
    store.put(("memories", "42"), "k", {"from": "memories"})
    store.put(("users", "42"), "k", {"from": "users"})
    assert store.get(("memories", "42"), "k").value == {"from": "memories"}
    assert store.get(("users", "42"), "k").value == {"from": "users"}
    assert flow.raw.erase_user("42").records == 2
    assert store.search(("memories", "42")) == []


# --- flowmem user erase -----------------------------------------------------------------
def test_erasing_a_user_removes_their_items_and_nothing_else(
    filled: tuple[Flow, InMemoryStore],
) -> None:
    flow, _ = filled
    erased = flow.raw.erase_user("42")
    assert erased.records == 5
    assert flow.store.get(("users", "42"), "prefs") is None
    assert flow.store.search(("users", "42")) == []
    assert flow.store.list_namespaces(prefix=("users", "42")) == []
    assert [item.key for item in flow.store.search(("users", "7"))] == ["m1"]
    assert len(flow.store.search((), limit=EVERYTHING)) == len(GLOBAL_ITEMS)


def test_flowmem_user_erase_on_the_command_line_removes_their_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flowmem.cli import main

    url = f"sqlite:///{tmp_path / 'app.db'}"
    with FlowmemStore.from_conn_string(url) as store:
        store.put(("users", "alice", "memories"), "m1", {"text": "likes tea"})
        store.put(("docs",), "shared", {"n": 1})
    monkeypatch.setattr(
        sys, "argv", ["flowmem", "user", "erase", "alice", "--yes", "--database", url]
    )
    capsys.readouterr()
    try:
        main()
    except SystemExit as ended:  # only a failure exits
        pytest.fail(f"flowmem user erase exited {ended.code}: {capsys.readouterr().err}")
    assert json.loads(capsys.readouterr().out)["records"] == 1
    with FlowmemStore.from_conn_string(url) as store:
        assert store.search(("users", "alice")) == []
        assert store.get(("docs",), "shared") is not None


# --- TTL on the service's clock -----------------------------------------------------------
def test_an_item_expires_after_its_ttl_in_minutes(flow: Flow) -> None:
    flow.store.put(("docs",), "short", {"n": 1}, ttl=1)
    flow.store.put(("docs",), "kept", {"n": 2})
    flow.clock.advance(59)
    assert flow.store.get(("docs",), "short", refresh_ttl=False) is not None
    flow.clock.advance(1)
    assert flow.store.get(("docs",), "short") is None
    assert [item.key for item in flow.store.search(("docs",))] == ["kept"]
    flow.store.delete(("docs",), "kept")
    assert flow.store.list_namespaces() == []
    assert flow.store.sweep_ttl() == 1


def test_a_read_refreshes_the_ttl_of_what_it_returns(flow: Flow) -> None:
    flow.store.put(("docs",), "a", {"n": 1}, ttl=1)
    flow.store.put(("docs",), "b", {"n": 2}, ttl=1)
    flow.store.put(("docs",), "c", {"n": 3}, ttl=1)
    flow.clock.advance(50)
    assert flow.store.get(("docs",), "a") is not None  # refreshed: now expires at +110
    assert [item.key for item in flow.store.search(("docs",), offset=1, limit=1)] == ["b"]
    flow.clock.advance(50)  # +100
    assert [item.key for item in flow.store.search(("docs",), refresh_ttl=False)] == ["a", "b"]
    flow.clock.advance(20)  # +120
    assert flow.store.search(("docs",)) == []


def test_the_ttl_config_gives_the_default_ttl_and_refresh(flow: Flow) -> None:
    store = FlowmemStore(flow.service, ttl={"default_ttl": 2, "refresh_on_read": False})
    store.put(("docs",), "a", {"n": 1})
    store.put(("docs",), "b", {"n": 2}, ttl=None)
    flow.clock.advance(100)
    assert store.get(("docs",), "a") is not None  # not refreshed
    flow.clock.advance(20)  # +120
    assert store.get(("docs",), "a") is None
    store.put(("docs",), "a", {"n": 1})
    flow.clock.advance(100)
    assert store.get(("docs",), "a", refresh_ttl=True) is not None
    flow.clock.advance(100)
    assert store.get(("docs",), "a") is not None
    assert store.get(("docs",), "b") is not None  # ttl=None: never expires


def test_a_put_without_ttl_clears_the_old_one(flow: Flow) -> None:
    flow.store.put(("docs",), "a", {"n": 1}, ttl=1)
    flow.store.put(("docs",), "a", {"n": 2}, ttl=None)
    flow.clock.advance(3600)
    assert flow.store.get(("docs",), "a").value == {"n": 2}


def test_a_refresh_does_not_bring_back_a_deleted_item_nor_an_older_value(flow: Flow) -> None:
    flow.store.put(("docs",), "a", {"n": 1}, ttl=1)
    read = flow.service.read_raw("global", "", "langgraph:docs  a")
    flow.store.put(("docs",), "a", {"n": 2}, ttl=1)  # a writer in between
    flow.store._refresh(
        store_module.GLOBAL, "langgraph:docs  a", store_module.to_json(read.value), 60
    )
    assert flow.store.get(("docs",), "a").value == {"n": 2}
    flow.store.delete(("docs",), "a")
    flow.store._refresh(
        store_module.GLOBAL, "langgraph:docs  a", store_module.to_json(read.value), 60
    )
    assert flow.store.get(("docs",), "a") is None


# --- async ------------------------------------------------------------------------------
def test_the_async_api_answers_as_the_sync_one(flow: Flow) -> None:
    reference = InMemoryStore()

    async def scenario(store: Any) -> list[Any]:
        for namespace, key, value in sorted(GLOBAL_ITEMS + USER_ITEMS, key=lambda i: (i[0], i[1])):
            await store.aput(namespace, key, value)
        await store.adelete(("docs",), "guide")
        return [
            triple(await store.aget(("docs", "v1"), "intro")),
            triple(await store.aget(("docs",), "guide")),
            triples(await store.asearch(("docs",), filter={"n": {"$gt": 2}}, limit=3, offset=1)),
            triples(await store.asearch(("users", "42", "memories"))),
            await store.alist_namespaces(prefix=("docs",), max_depth=2),
            await store.alist_namespaces(prefix=("users", "42"), suffix=("old",)),
        ]

    assert asyncio.run(scenario(flow.store)) == asyncio.run(scenario(reference))


def test_abatch_runs_in_a_worker_thread(flow: Flow) -> None:
    threads: list[int] = []
    clock = flow.service.clock

    def spied_clock() -> float:
        threads.append(threading.get_ident())
        return clock()

    store = FlowmemStore(MemoryService(flow.raw, clock=spied_clock))

    async def run() -> int:
        await store.aput(("docs",), "a", {"n": 1})
        assert (await store.aget(("docs",), "a")) is not None
        await asyncio.gather(*(store.asearch(("docs",)) for _ in range(4)))
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert threads and loop_thread not in threads


def test_threads_share_one_store(flow: Flow) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(20):
                namespace = ("users", f"u{worker}", "memories") if i % 2 else ("docs", f"w{worker}")
                flow.store.put(namespace, f"k{i:02}", {"worker": worker, "i": i}, ttl=5)
                flow.store.search(namespace[:2], limit=5)
                flow.store.list_namespaces(prefix=namespace[:1], max_depth=2)
        except BaseException as exc:  # collected: an assertion in a thread would be lost
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(flow.store.search(("docs",), limit=EVERYTHING)) == 40
    assert [len(flow.store.search(("users", f"u{n}"))) for n in range(4)] == [10] * 4
    assert len(flow.store.list_namespaces(prefix=("docs",))) == 4


# --- construction -------------------------------------------------------------------------
def test_from_conn_string_opens_and_closes_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    with FlowmemStore.from_conn_string(url, ttl={"default_ttl": 5}) as store:
        store.setup()
        store.put(("docs",), "a", {"n": 1})
        assert store.ttl_config == {"default_ttl": 5}
    with pytest.raises(StoreError):
        store.get(("docs",), "a")
    with FlowmemStore.from_conn_string(url) as again:
        assert again.get(("docs",), "a").value == {"n": 1}


@pytest.mark.postgres
def test_from_conn_string_on_postgresql(postgres_db_url: str) -> None:
    with FlowmemStore.from_conn_string(postgres_db_url) as store:
        store.put(("users", "42"), "prefs", {"theme": "dark"})
    with FlowmemStore.from_conn_string(postgres_db_url) as store:
        assert store.get(("users", "42"), "prefs").value == {"theme": "dark"}
        assert store.list_namespaces(prefix=("users", "42")) == [("users", "42")]


def test_construction_refuses_what_cannot_work() -> None:
    service = MemoryService(MemoryStore())
    with pytest.raises(ConfigurationError):
        FlowmemStore(MemoryStore())
    with pytest.raises(ConfigurationError):
        FlowmemStore(service, user_labels=())
    with pytest.raises(ConfigurationError):
        FlowmemStore(service, user_labels=("us.ers",))
    with pytest.raises(ConfigurationError):
        FlowmemStore(service, ttl={"default_ttl": 0})

    class Derived(MemoryStore):
        pass

    class NotListable:
        url = "custom://"

    with pytest.raises(ConfigurationError, match="cannot list"):
        FlowmemStore(MemoryService(NotListable()))
    assert isinstance(FlowmemStore(MemoryService(Derived())), FlowmemStore)


# --- bad input ----------------------------------------------------------------------------
def test_bad_input_raises_typed_errors_and_stores_nothing(flow: Flow) -> None:
    store = flow.store
    with pytest.raises(InvalidInputError, match="must be a dict"):
        store.put(("docs",), "a", ["not", "a", "dict"])
    with pytest.raises(InvalidInputError, match="must be a dict"):
        store.batch([PutOp(("docs",), "a", "text")])
    with pytest.raises(InvalidInputError, match="string keys"):
        store.put(("docs",), "a", {1: "x"})
    with pytest.raises(NotSerializableError):
        store.put(("docs",), "a", {"x": object()})
    with pytest.raises(InvalidInputError, match="over the 255"):
        store.put(("docs",), "k" * 240, {"n": 1})
    with pytest.raises(InvalidInputError, match="over the 255"):
        store.get(("docs",) * 60, "k")
    for namespace in (["docs"], "docs", None):
        with pytest.raises(NamespaceError) as raised:
            store.batch([PutOp(namespace, "a", {"n": 1})])
        assert isinstance(raised.value, InvalidInputError) and isinstance(
            raised.value, InvalidNamespaceError
        )
    with pytest.raises(NamespaceError):
        store.batch([SearchOp(["docs"])])
    with pytest.raises(InvalidNamespaceError):
        store.put(("docs", ""), "a", {"n": 1})
    with pytest.raises(NamespaceError):
        store.batch([PutOp(("docs", ""), "a", {"n": 1})])
    with pytest.raises(NamespaceError):
        store.batch([GetOp(("do.cs",), "a")])
    with pytest.raises(NamespaceError):
        store.batch([PutOp((), "a", {"n": 1})])
    with pytest.raises(NamespaceError):
        store.batch([PutOp(("langgraph",), "a", {"n": 1})])
    with pytest.raises(InvalidInputError):
        store.batch([GetOp(("docs",), 42)])
    with pytest.raises(InvalidInputError, match="operator"):
        store.search(("docs",), filter={"n": {"$in": [1]}})
    with pytest.raises(InvalidInputError):
        store.search(("docs",), limit=-1)
    with pytest.raises(InvalidInputError):
        store.list_namespaces(max_depth=0)
    with pytest.raises(InvalidInputError, match="minutes"):
        store.put(("docs",), "a", {"n": 1}, ttl=0)
    with pytest.raises(InvalidInputError):
        store.batch(["not an op"])
    assert store.search((), limit=EVERYTHING) == []
    store.put(("docs",), "k" * (255 - len("langgraph:docs  ")), {"n": 1})  # exactly 255: kept


def test_a_value_over_the_record_limit_is_refused_before_any_write(tmp_path: Path) -> None:
    raw = MemoryStore()
    store = FlowmemStore(MemoryService(raw, limits=Limits(record_bytes=200)))
    with pytest.raises(RecordTooLargeError):
        store.batch(
            [PutOp(("docs",), "small", {"n": 1}), PutOp(("docs",), "big", {"x": "y" * 300})]
        )
    assert store.search(("docs",)) == []


# --- random operations against InMemoryStore ----------------------------------------------
ROOTS = itertools.count()
OP_NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("a", "c"), ("a b",), ("a!",), ("b",)]
OP_KEYS = ["k", " k", "a b!"]
VALUES = st.fixed_dictionaries(
    {"n": st.integers(-2, 3), "tag": st.sampled_from(["x", "y"])},
    optional={"deep": st.fixed_dictionaries({"z": st.integers(0, 1)})},
)
FILTER_CHOICES: list[dict[str, Any] | None] = [
    None, {"tag": "x"}, {"n": {"$gt": 0}}, {"n": {"$lte": 0}, "tag": "y"}, {"n": {"$ne": 1}},
    {"deep": {"z": 1}}, {"n": {"$gte": -1, "$lt": 2}}, {"n": {"$eq": 3}},
]  # fmt: skip


def _ops(root: str) -> st.SearchStrategy[Any]:
    users = [("users", f"{root}u1"), ("users", f"{root}u2")]
    global_ns = st.sampled_from([(root, *ns) for ns in OP_NAMESPACES])
    user_ns = st.sampled_from([(*user, *ns) for user in users for ns in [(), ("m",), ("m", "x")]])
    namespaces = st.one_of(global_ns, user_ns)
    prefixes = st.one_of(
        st.sampled_from([(root,), (root, "a"), (root, "a", "b"), (root, "a b")]),
        st.sampled_from([*users, *[(*user, "m") for user in users]]),
    )
    pages = st.tuples(st.sampled_from([0, 1, 2, 3, 10, 10]), st.sampled_from([0, 0, 0, 1, 2]))
    put = st.builds(
        lambda ns, key, value: PutOp(ns, key, value), namespaces, st.sampled_from(OP_KEYS), VALUES
    )
    delete = st.builds(lambda ns, key: PutOp(ns, key, None), namespaces, st.sampled_from(OP_KEYS))
    get = st.builds(lambda ns, key: GetOp(ns, key), namespaces, st.sampled_from(OP_KEYS))
    search = st.builds(
        lambda prefix, condition, page: SearchOp(prefix, condition, page[0], page[1]),
        prefixes,
        st.sampled_from(FILTER_CHOICES),
        pages,
    )
    list_prefixes = st.sampled_from(
        [(root,), (root, "*"), (root, "a"), (root, "*", "b"), *users, (*users[0], "*")]
    )
    suffixes = st.sampled_from([None, ("b",), ("*",), ("c",), ("m", "*")])
    listing = st.builds(
        lambda prefix, suffix, depth, page: ListNamespacesOp(
            (MatchCondition("prefix", prefix),)
            + (() if suffix is None else (MatchCondition("suffix", suffix),)),
            depth,
            page[0],
            page[1],
        ),
        list_prefixes,
        suffixes,
        st.sampled_from([None, 1, 2, 3, 4]),
        pages,
    )
    one = st.one_of(put, put, delete, get, search, search, listing)
    seed = st.lists(put, min_size=6, max_size=20)  # a batch of puts first: reads find things
    batches = st.lists(st.lists(one, min_size=1, max_size=5), min_size=1, max_size=8)
    return st.tuples(seed, batches).map(lambda drawn: [drawn[0], *drawn[1]])


def _answer(result: Any) -> Any:
    if isinstance(result, list):
        return [r if isinstance(r, tuple) else triple(r) for r in result]
    return triple(result)


@pytest.mark.parametrize("kind", BACKENDS)
def test_random_batches_answer_as_in_memory_store(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    raw = open_backend(kind, request, tmp_path)
    store = FlowmemStore(MemoryService(raw))
    examples = 25 if kind == "postgres" else 60

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        root = f"r{next(ROOTS)}"  # every example has namespaces (and users) of its own
        model = InMemoryStore()
        for batch in data.draw(_ops(root)):
            # each read answered by the live items before the batch, in (namespace, key)
            # order, on a fresh copy: InMemoryStore's gets add empty namespaces it lists
            want = [
                None if isinstance(op, PutOp) else normalized(model).batch([op])[0] for op in batch
            ]
            model.batch(batch)
            got = store.batch(batch)
            assert [_answer(r) for r in got] == [_answer(r) for r in want], batch

    try:
        run()
    finally:
        raw.close()


# --- a store built for one user (issue 38 §3, decision 0109) --------------------------------
def test_mem_9_a_store_built_for_a_user_never_reaches_another_users_namespace(flow: Flow) -> None:
    flow.store.put(("users", "alice", "memories"), "m1", {"text": "ALICE-SECRET"})
    flow.store.put(("docs",), "shared", {"text": "for everyone"})
    bobs = FlowmemStore(flow.service, context=ExecutionContext(user_id="bob"))
    alices = ("users", "alice", "memories")
    for call in (
        lambda: bobs.get(alices, "m1"),
        lambda: bobs.search(alices),
        lambda: bobs.search(("users", "alice")),
        lambda: bobs.list_namespaces(prefix=("users", "alice")),
        lambda: bobs.put(alices, "m2", {"text": "bob was here"}),
        lambda: bobs.delete(alices, "m1"),
        lambda: asyncio.run(bobs.aget(alices, "m1")),
        lambda: bobs.batch([PutOp(("users", "bob"), "k", {"n": 1}), GetOp(alices, "m1")]),
    ):
        with pytest.raises(AccessDeniedError):
            call()
    assert [i.key for i in flow.store.search(alices)] == ["m1"]
    assert flow.store.get(("users", "bob"), "k") is None  # the batch refused as a whole
    bobs.put(("users", "bob", "memories"), "m1", {"text": "his"})  # his own namespace
    assert bobs.get(("users", "bob", "memories"), "m1").value == {"text": "his"}
    assert bobs.get(("docs",), "shared").value == {"text": "for everyone"}  # the global scope
    assert all(ns[:2] != ("users", "alice") for ns in bobs.list_namespaces())
