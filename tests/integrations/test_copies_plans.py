"""A planned copy is what pickle's copy is, and kept copies read the same planned or pickled (decision 0176)."""

from __future__ import annotations

import gc
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessagesTypeAdapter

from flowmem.integrations import copies as copies_module
from flowmem.integrations.copies import MAX_SEGMENTS, KeptCopies, Plan, planned
from tests.integrations.pydantic_ai import messages as m

_IMMUTABLE = (str, int, float, bool, type(None), bytes, date, timedelta)


@dataclass
class Plain:
    """A dataclass pickle copies as ``object.__new__`` and its ``__dict__``."""

    a: Any
    b: Any = None


@dataclass(frozen=True)
class Frozen:
    """Frozen: pickle fills its ``__dict__`` without ``__setattr__``, as a plan does."""

    a: Any


@dataclass
class Checked:
    """A ``__post_init__`` pickle does not call (nor does a plan)."""

    a: Any
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.seen.append("init")


@dataclass
class Slotted:
    """Slots: pickle copies them as state of their own; not planned."""

    __slots__ = ("a",)
    a: Any


@dataclass
class Reducing:
    """Its own ``__reduce__``: not planned."""

    a: Any

    def __reduce__(self) -> tuple[Any, ...]:
        return (Reducing, (self.a,))


@dataclass
class Answering:
    """A ``__getattr__`` pickle's lookups could reach: not planned."""

    a: Any

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


class NotData:
    """Not a dataclass: not planned."""

    def __init__(self, a: Any) -> None:
        self.a = a

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NotData) and other.a == self.a

    __hash__ = None  # type: ignore[assignment]


_ZONE = timezone(timedelta(hours=2))
_ATOMS = st.one_of(
    st.text(max_size=8),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.binary(max_size=4),
    st.dates(),
    st.timedeltas(),
    st.datetimes(timezones=st.sampled_from([None, UTC, _ZONE])),
)


def _graphs(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=3), children, max_size=3),
        st.dictionaries(st.integers(0, 9), children, max_size=2),
        st.builds(Plain, children, children),
        st.builds(Frozen, children),
        st.builds(Checked, children),
        st.builds(Slotted, children),
        st.builds(Reducing, children),
        st.builds(Answering, children),
        st.builds(NotData, children),
        st.tuples(children),
        st.frozensets(st.integers(), max_size=2),
        children.map(lambda shared: [shared, shared]),  # one object reached twice
    )


_VALUES = st.recursive(_ATOMS, _graphs, max_leaves=12)


def _shape(value: Any, ids: dict[int, int]) -> Any:
    """``value`` as a tree of types and values, each mutable object numbered by first reach (aliasing shows)."""
    kind = type(value)
    if isinstance(value, datetime):
        return ("datetime", repr(value), repr(value.tzinfo))
    if isinstance(value, _IMMUTABLE) or kind is frozenset:
        return (kind.__name__, repr(value))
    if id(value) in ids:
        return ("again", ids[id(value)])
    ids[id(value)] = len(ids)
    if kind in (list, tuple):
        return (kind.__name__, [_shape(item, ids) for item in value])
    if kind is set:
        return ("set", sorted(map(repr, value)))
    if kind is dict:
        return ("dict", [(repr(k), _shape(item, ids)) for k, item in value.items()])
    if kind is Slotted:
        return ("Slotted", _shape(value.a, ids))
    return (kind.__name__, [(k, _shape(item, ids)) for k, item in vars(value).items()])


def _mutables(value: Any, found: dict[int, Any]) -> dict[int, Any]:
    """Every object reached that a caller could change, by id."""
    if isinstance(value, (*_IMMUTABLE, frozenset, datetime)) or id(value) in found:
        return found
    found[id(value)] = value
    items: Any
    if isinstance(value, set):
        return found
    if isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, dict):
        items = value.values()
    elif isinstance(value, Slotted):
        items = [value.a]
    else:
        items = vars(value).values()
    for item in items:
        _mutables(item, found)
    return found


def _plannable(value: Any, reached: set[int]) -> bool:
    """The reference: only lists, dicts of immutable keys, plain dataclasses and immutable values, each reached once."""
    if isinstance(value, datetime):
        return value.tzinfo is None or isinstance(value.tzinfo, timezone)
    if type(value) in _IMMUTABLE:
        return True
    if id(value) in reached or type(value) not in (list, dict, Plain, Frozen, Checked):
        return False
    reached.add(id(value))
    if isinstance(value, list):
        return all(_plannable(item, reached) for item in value)
    if isinstance(value, dict):
        return all(type(k) in _IMMUTABLE for k in value) and all(
            _plannable(item, reached) for item in value.values()
        )
    return all(_plannable(item, reached) for item in vars(value).values())


def _same_as_pickles(source: list[Any], copy: list[Any]) -> None:
    """``copy`` has the shape pickle's copy of ``source`` has, and shares nothing changeable with it."""
    expected = pickle.loads(pickle.dumps(source, protocol=pickle.HIGHEST_PROTOCOL))
    assert _shape(copy, {}) == _shape(expected, {})
    assert copy == expected
    assert not set(_mutables(copy, {})) & set(_mutables(source, {}))


def _planned_as(sets_state: bool, objects: list[Any]) -> Plan | None:
    """``planned(objects)`` with decision 0220's seam (``copies.SETS_STATE``) as given."""
    kept = copies_module.SETS_STATE
    copies_module.SETS_STATE = sets_state
    try:
        return planned(objects)
    finally:
        copies_module.SETS_STATE = kept


@pytest.mark.parametrize("sets_state", [True, False], ids=["state_set", "plain"])
@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, max_size=4))
def test_a_plan_copies_what_pickle_copies_and_only_plain_data_is_planned(
    sets_state: bool, objects: list[Any]
) -> None:
    plan = _planned_as(sets_state, objects)
    assert (plan is not None) == _plannable(objects, set())
    if plan is None:
        return
    before = _shape(objects, {})
    first, second = plan.copy(), plan.copy()
    _same_as_pickles(objects, first)
    _same_as_pickles(objects, second)
    assert not set(_mutables(first, {})) & set(_mutables(second, {}))
    for (
        item
    ) in first:  # a caller changing its copy changes neither the kept objects nor the next copy
        if isinstance(item, list):
            item.append("changed")
        elif isinstance(item, Plain):
            item.a = "changed"
    assert _shape(objects, {}) == before
    _same_as_pickles(objects, plan.copy())


@pytest.mark.parametrize("sets_state", [True, False], ids=["state_set", "plain"])
def test_pydantic_ai_messages_are_planned_and_copied_as_pickle_copies_them(sets_state: bool) -> None:
    history = m.round_tripped(
        [m.prompt("hi"), m.call("c1"), m.result("c1"), m.answer("done"), *m.every_part_kind()]
    )
    plan = _planned_as(sets_state, history)
    assert plan is not None
    _same_as_pickles(history, plan.copy())


def _copiers(node: Any) -> set[Any]:
    """The copy functions of a plan's node and of every node under it."""
    if node is None:
        return set()
    inner = node[3] if len(node) == 4 else node[2]
    return {node[0]}.union(*(_copiers(child) for _, child in inner))


def test_an_instance_copy_sets_a_copy_of_its_state_unless_the_seam_is_off() -> None:
    """Decision 0220: by default a plan copies an instance by setting a copy of the kept state
    as its ``__dict__``; the plain path (``SETS_STATE = False``, and a frozen dataclass always)
    fills a new ``__dict__``; the copies are alike, field by field, and share nothing."""
    history = m.round_tripped([m.prompt("hi"), m.call("c1"), m.result("c1"), *m.every_part_kind()])
    objects: list[Any] = [*history, Frozen([1, {"k": Plain([2])}]), Checked("a")]
    assert copies_module.SETS_STATE
    state_set, plain = _planned_as(True, objects), _planned_as(False, objects)
    assert state_set is not None and plain is not None
    used = set().union(*map(_copiers, state_set.nodes)), set().union(*map(_copiers, plain.nodes))
    assert copies_module._copy_instance_state in used[0] and copies_module._copy_instance in used[0]
    assert copies_module._copy_instance in used[1] and copies_module._copy_instance_state not in used[1]
    frozen = state_set.nodes[-2]
    assert frozen is not None and frozen[0] is copies_module._copy_instance  # its own __setattr__
    one, other = state_set.copy(), plain.copy()
    assert _shape(one, {}) == _shape(other, {}) and one == other
    assert not set(_mutables(one, {})) & set(_mutables(other, {}))
    assert not set(_mutables(one, {})) & set(_mutables(objects, {}))
    one[-2].a.append("changed")  # a frozen copy's state is its own
    assert objects[-2].a == [1, {"k": Plain([2])}]


@pytest.mark.usefixtures("collector")
@pytest.mark.parametrize("enabled", [True, False])
def test_no_collection_starts_while_a_plan_copies(enabled: bool) -> None:
    plan = planned([Plain([i], {"k": [i]}) for i in range(20_000)])
    assert plan is not None
    started: list[str] = []

    def noted(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(phase)

    (gc.enable if enabled else gc.disable)()
    gc.callbacks.append(noted)
    try:
        plan.copy()
    finally:
        gc.callbacks.remove(noted)
    assert started == [] and gc.isenabled() is enabled


# --- KeptCopies planned against the plain path (pickled), over random reads and writes -----


@dataclass
class Item:
    """An object validated from a JSON text; a ``tags`` set makes it one pickle must copy."""

    name: str
    tags: Any


def _validate(texts: Sequence[str]) -> list[Item]:
    found = []
    for text in texts:
        data = json.loads(text)
        found.append(Item(data["name"], set(data["tags"]) if data["set"] else list(data["tags"])))
    return found


def _text(index: int, variant: int, as_set: bool) -> str:
    return json.dumps({"name": f"n{index}.{variant}", "tags": [index, variant], "set": as_set})


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["read", "grow", "extend", "change"]),
        st.integers(1, 3),
        st.booleans(),
    ),
    min_size=1,
    max_size=2 * MAX_SEGMENTS + 4,
)


@settings(max_examples=150, deadline=None)
@given(_STEPS)
def test_kept_copies_read_the_same_planned_or_pickled(steps: list[tuple[str, int, bool]]) -> None:
    both = [KeptCopies(_validate), KeptCopies(_validate, plans=False)]
    chosen: list[tuple[str, str]] = [("h#0", _text(0, 0, False))]
    for what, count, as_set in steps:
        if what == "grow":
            chosen += [
                (f"h#{len(chosen) + i}", _text(len(chosen) + i, 0, as_set)) for i in range(count)
            ]
        elif what == "change" and len(chosen) > count:
            chosen[count] = (chosen[count][0], _text(count, len(chosen), as_set))
        elif what == "extend":
            added = [
                (f"h#{len(chosen) + i}", _text(len(chosen) + i, 0, as_set)) for i in range(count)
            ]
            for copies in both:
                written = [(entry_id, text, _validate([text])[0]) for entry_id, text in added]
                copies.extend(chosen[-1][0], written)
            chosen += added
        got = [copies.objects(chosen) for copies in both]
        assert got[0] == got[1] == _validate([text for _, text in chosen])
        assert _shape(got[0], {}) == _shape(got[1], {})
        got[0][0].name = "changed by its caller"
        got[1][0].name = "changed by its caller"
        assert all(copies.objects(chosen)[0].name == "n0.0" for copies in both)


def test_a_history_is_planned_when_read_again_then_copied_without_pickle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Validated and pickled at its first read (as before), planned from one unpickled copy at the next."""
    history = m.round_tripped([m.prompt("hi"), m.call("c1"), m.result("c1"), m.answer("done")])
    texts = [
        (f"e{i}", ModelMessagesTypeAdapter.dump_json([msg])[1:-1].decode())
        for i, msg in enumerate(history)
    ]
    copies = KeptCopies(
        lambda found: ModelMessagesTypeAdapter.validate_json("[" + ",".join(found) + "]")
    )
    loads: list[bytes] = []
    dumps: list[object] = []
    real_loads, real_dumps = pickle.loads, pickle.dumps

    def counted_loads(blob: bytes, *args: Any, **kwargs: Any) -> Any:
        loads.append(blob)
        return real_loads(blob, *args, **kwargs)

    def counted_dumps(obj: object, *args: Any, **kwargs: Any) -> bytes:
        dumps.append(obj)
        return real_dumps(obj, *args, **kwargs)

    monkeypatch.setattr(pickle, "loads", counted_loads)
    monkeypatch.setattr(pickle, "dumps", counted_dumps)
    assert copies.objects(texts) == history
    assert (len(dumps), len(loads)) == (1, 0)  # validated, kept pickled
    assert copies.objects(texts) == history
    assert (len(dumps), len(loads)) == (1, 1)  # read again: unpickled once, planned
    for _ in range(3):
        assert copies.objects(texts) == history
    assert (len(dumps), len(loads)) == (1, 1)  # copied by the plan


def test_writes_past_the_segments_kept_are_joined_when_planned() -> None:
    """Extends past ``MAX_SEGMENTS`` join planned segments into one, so reads validate nothing."""
    validated: dict[bool, list[int]] = {True: [], False: []}

    def counting(plans: bool) -> KeptCopies[Item]:
        def counted(texts: Sequence[str]) -> list[Item]:
            validated[plans].append(len(texts))
            return _validate(texts)

        return KeptCopies(counted, plans=plans)

    both = [counting(True), counting(False)]
    chosen = [(f"h#{i}", _text(i, 0, False)) for i in range(3)]
    for copies in both:
        copies.objects(chosen)
        copies.objects(chosen)
    grown = list(chosen)
    for turn in range(2 * MAX_SEGMENTS):
        added = [(f"h#{len(grown)}", _text(len(grown), turn, False))]
        for copies in both:
            copies.extend(grown[-1][0], [(i, t, _validate([t])[0]) for i, t in added])
        grown += added
        planned_read, pickled_read = (copies.objects(grown) for copies in both)
        assert planned_read == pickled_read == _validate([t for _, t in grown])
    assert validated[True] == [3]  # the first read only: every extend kept, joined past the bound
    assert (
        len(validated[False]) > 1
    )  # the pickled path drops extends past the bound and validates them
