"""Histories an adapter validated, kept as pickled copies so a read validates only what is new (decisions 0141, 0155).

An adapter whose reads validate stored JSON texts into its framework's objects
(pydantic-ai's messages, ADK's events) validated every text on every read, though
only the last turn's were new. ``KeptCopies`` keeps, per history (keyed by its first
id), what it validated as *segments*: the ids and JSON texts a segment was validated
from, and the validated objects pickled. A read takes the longest run of leading
segments whose ids and texts are exactly the ones read now, unpickles them (a fresh
copy each time: the caller may change what it gets; pickle restores each object's
state as validation left it, about 2.7 times faster than validating), validates the
rest in one call and keeps it as a new segment. A write may add what it validated
from the very texts it stored after a kept history (``extend``). Only bytes pickled
here, in this process, are ever unpickled. Past ``MAX_SEGMENTS`` the segments are
merged into one. At most ``max_bytes`` (texts and pickles) are kept, the least
recently read histories going first; a history larger than that is not kept.

A segment read again whose objects are plain data (``planned``: dataclass instances,
``list``, ``dict`` and immutable values, no object reached twice) is then kept as the
objects themselves (the copy unpickled for that read), never handed out, with a *plan*
of where their mutable parts are; later reads copy them by that plan (``Plan.copy``):
each dataclass instance, list and dict made anew as pickle makes it (``object.__new__``
and a copy of the kept ``__dict__`` set as its own, decision 0220; no ``__init__``), the immutable values (strings, numbers,
times) shared, about 2.3 times faster than unpickling at 100 pydantic-ai messages
(decision 0176). A write's segment (``extend``) is planned at once; planned segments
past ``MAX_SEGMENTS`` are joined. A first read keeps its segment pickled (a process
that reads a history once pays no plan). Any other object (a pydantic model, a set, a
class with its own pickling) keeps the segment pickled. A planned segment's size is the
``sys.getsizeof`` of every object it reaches (about 2.8 times its pickle's bytes).
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")

MAX_BYTES = 32 * 1024 * 1024
"""How many bytes of kept texts and pickles a store holds at most, by default."""
MAX_SEGMENTS = 8
"""How many segments a history keeps before they are merged into one."""


_ATOMS: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes, date, timedelta})
"""Immutable values a plan's copy shares (exact types; a ``datetime`` is one when its zone is)."""
_ZONES: set[type] = {timezone}
try:  # the zone pydantic validates an offset to: immutable, as ``timezone``
    from pydantic_core import TzInfo

    _ZONES.add(TzInfo)
except ImportError:  # pragma: no cover - pydantic is installed with every adapter
    pass
_new = object.__new__
_set = object.__setattr__
SETS_STATE = True
"""The seam of decision 0220: a plan copies an instance of a class without a ``__setattr__`` of
its own by setting a copy of the kept object's ``__dict__`` as its ``__dict__``
(``_copy_instance_state``, no dict made and then filled key by key); False, and for any
other class (a frozen dataclass), the plain path: the new instance's own ``__dict__``
updated from it, as pickle does (``_copy_instance``). Read when a segment is planned."""
_PLAIN_CLASSES: dict[type, bool] = {}
"""Per class: whether pickle copies its instances as ``object.__new__`` and their ``__dict__`` (``_plain_class``)."""


class _Unplanned(Exception):
    """An object a plan does not copy (the segment is pickled instead)."""


def _plain_class(cls: type) -> bool:
    """Whether pickle copies an instance of ``cls`` as ``object.__new__(cls)`` with its ``__dict__`` set.

    A dataclass without slots (``typing.Generic``'s empty ``__slots__`` hold none), ``__new__``, ``__setstate__``, its own
    ``__reduce__``/``__reduce_ex__``/``__getstate__``, ``__getnewargs__`` or attribute
    lookup of its own (``__getattr__``, ``__getattribute__``): pickle's
    protocol 2 then makes it with ``copyreg.__newobj__`` and updates its ``__dict__``.
    """
    known = _PLAIN_CLASSES.get(cls)
    if known is None:
        known = (
            dataclasses.is_dataclass(cls)
            and not any(vars(base).get("__slots__") for base in cls.__mro__[:-1])
            and cls.__new__ is object.__new__
            and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__
            and getattr(cls, "__getstate__", None) is getattr(object, "__getstate__", None)
            and not hasattr(cls, "__setstate__")
            and not hasattr(cls, "__getnewargs__")
            and not hasattr(cls, "__getnewargs_ex__")
            and not hasattr(cls, "__getattr__")  # it could answer pickle's lookups of those
            and cls.__getattribute__ is object.__getattribute__
        )
        _PLAIN_CLASSES[cls] = known
    return known


def _copy_instance(node: tuple[Any, ...]) -> Any:
    made = _new(node[1])
    state = made.__dict__
    state.update(node[2])
    for key, inner in node[3]:
        state[key] = inner[0](inner)
    return made


def _copy_instance_state(node: tuple[Any, ...]) -> Any:
    """``_copy_instance`` with a copy of the kept state set as the new instance's ``__dict__`` (decision 0220).

    Only for a class whose ``__setattr__`` is ``object``'s (``_sets_state``): the assignment
    then reaches the type's ``__dict__`` descriptor, as pickle's update calls no ``__setattr__``.
    """
    made = _new(node[1])
    state = node[2].copy()
    for key, inner in node[3]:
        state[key] = inner[0](inner)
    made.__dict__ = state
    return made


def _sets_state(cls: type) -> bool:
    """Whether a plan copies instances of ``cls`` by ``_copy_instance_state`` (``SETS_STATE``, ``object.__setattr__``)."""
    setter: object = cls.__setattr__
    return SETS_STATE and setter is _set


def _copy_list(node: tuple[Any, ...]) -> list[Any]:
    made: list[Any] = node[1].copy()
    for index, inner in node[2]:
        made[index] = inner[0](inner)
    return made


def _copy_dict(node: tuple[Any, ...]) -> dict[Any, Any]:
    made: dict[Any, Any] = node[1].copy()
    for key, inner in node[2]:
        made[key] = inner[0](inner)
    return made


class _Planner:
    """One walk of a segment's objects: each mutable one's node, the objects' size, what was reached."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.size = 0

    def node(self, value: Any) -> tuple[Any, ...] | None:
        """How to copy ``value`` (None: it is immutable, shared); ``_Unplanned`` for what a plan does not copy.

        ``value`` itself is sized by its holder (``planned`` for the objects); what it
        holds is sized here.
        """
        kind = type(value)
        if kind in _ATOMS:
            return None
        if kind is datetime:
            if value.tzinfo is None or type(value.tzinfo) in _ZONES:
                return None
            raise _Unplanned(kind)
        if id(value) in self.seen:  # reached twice, or a cycle: pickle keeps that, a plan would not
            raise _Unplanned(kind)
        self.seen.add(id(value))
        size = sys.getsizeof
        if kind is list:
            self.size += sum(map(size, value))
            return (_copy_list, value, self._inner(enumerate(value)))
        if kind is dict:
            if not _ATOMS.issuperset(map(type, value)):  # keys are shared: immutable ones only
                raise _Unplanned(kind)
            self.size += sum(map(size, value)) + sum(map(size, value.values()))
            return (_copy_dict, value, self._inner(value.items()))
        if _plain_class(kind):
            state = value.__dict__
            if not _ATOMS.issuperset(
                map(type, state)
            ):  # attribute names; anything else is not planned
                raise _Unplanned(kind)
            self.size += size(state) + sum(map(size, state.values()))
            copier = _copy_instance_state if _sets_state(kind) else _copy_instance
            return (copier, kind, state, self._inner(state.items()))
        raise _Unplanned(kind)

    def _inner(self, items: Any) -> tuple[tuple[Any, tuple[Any, ...]], ...]:
        """The nodes of the values among ``items`` (key, value) that are not immutable, by key."""
        atoms, zones = _ATOMS, _ZONES
        found = []
        for key, item in [(key, item) for key, item in items if type(item) not in atoms]:
            if type(item) is datetime and (item.tzinfo is None or type(item.tzinfo) in zones):
                continue  # shared, as ``node`` would say, without the call
            inner = self.node(item)
            if inner is not None:
                found.append((key, inner))
        return tuple(found)


@dataclass(frozen=True)
class Plan:
    """Objects kept as they are, never handed out, and where their mutable parts are (``planned``)."""

    objects: tuple[Any, ...]
    nodes: tuple[tuple[Any, ...] | None, ...]
    """Per object: its node, or None when it is immutable (shared)."""
    size: int
    """``sys.getsizeof`` of every object reached."""

    def copy(self) -> list[Any]:
        """A fresh copy of the objects, equal to ``pickle.loads(pickle.dumps(objects))`` (the collector paused).

        Every dataclass instance, list and dict is new; immutable values are shared.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            return [
                obj if node is None else node[0](node)
                for obj, node in zip(self.objects, self.nodes, strict=True)
            ]
        finally:
            if enabled:
                gc.enable()


def planned(objects: Sequence[Any]) -> Plan | None:
    """A plan of copying ``objects`` without pickle, or None when one of them needs pickle.

    The caller must never hand out ``objects`` themselves, nor change them: every copy
    is made from them.
    """
    planner = _Planner()
    enabled = gc.isenabled()
    gc.disable()  # the walk allocates a node per mutable object and frees nothing (as ``Plan.copy``)
    try:
        nodes = tuple(planner.node(obj) for obj in objects)
    except (_Unplanned, RecursionError):
        return None
    finally:
        if enabled:
            gc.enable()
    return Plan(tuple(objects), nodes, planner.size + sum(map(sys.getsizeof, objects)))


@dataclass(frozen=True)
class _Segment:
    """Objects validated from these ids' JSON texts, pickled (``blob``) or kept as a ``Plan``."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    blob: bytes | None
    plan: Plan | None
    size: int
    """Its texts' characters and its pickle's bytes (or its plan's objects' sizes)."""
    tried: bool = False
    """Whether it was planned, or found not to be plannable (``KeptCopies.objects``)."""

    def copy(self) -> list[Any]:
        """A fresh copy of its objects."""
        plan = self.plan
        return unpickled(cast("bytes", self.blob)) if plan is None else plan.copy()


@dataclass(frozen=True)
class Made:
    """A write's segment made ahead of its keeping (``KeptCopies.made``); ``segment`` None: pickle refused it."""

    segment: _Segment | None


def _kept(
    ids: Sequence[str], texts: Sequence[str], objects: list[Any], plans: bool
) -> _Segment | None:
    """The segment of ``objects`` (which it then owns): planned when ``plans`` and it can be, else pickled."""
    chars = sum(len(text) for text in texts)
    plan = planned(objects) if plans else None
    if plan is not None:
        return _Segment(tuple(ids), tuple(texts), None, plan, plan.size + chars, True)
    try:
        blob = pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an object pickle cannot copy: validated on every read, as before
        return None
    return _Segment(tuple(ids), tuple(texts), blob, None, len(blob) + chars)


def _joined(segments: list[_Segment]) -> _Segment | None:
    """The segments as one, their plans joined, when every one is planned; else None."""
    plans = [segment.plan for segment in segments]
    if not all(plan is not None for plan in plans):
        return None
    joined = cast("list[Plan]", plans)
    plan = Plan(
        tuple(obj for one in joined for obj in one.objects),
        tuple(node for one in joined for node in one.nodes),
        sum(one.size for one in joined),
    )
    ids = tuple(entry_id for segment in segments for entry_id in segment.ids)
    texts = tuple(text for segment in segments for text in segment.texts)
    return _Segment(ids, texts, None, plan, plan.size + sum(map(len, texts)), True)


def _merged(
    segments: list[_Segment], ids: list[str], texts: list[str], found: list[Any]
) -> _Segment | None:
    """One segment of them all: ``_joined``, else ``found`` (not yet handed out) pickled."""
    return _joined(segments) or _kept(ids, texts, found, False)


def _replanned(segment: _Segment) -> tuple[_Segment, list[Any]]:
    """A pickled segment read again, planned from one copy (kept) when it can be; and a copy to hand out."""
    objects = unpickled(cast("bytes", segment.blob))
    plan = planned(objects)
    if plan is None:
        return dataclasses.replace(segment, tried=True), objects
    chars = sum(map(len, segment.texts))
    return _Segment(segment.ids, segment.texts, None, plan, plan.size + chars, True), plan.copy()


def unpickled(blob: bytes) -> list[Any]:
    """``pickle.loads(blob)`` with the garbage collector paused while it runs.

    A copy of 1,000 ADK events makes some 30,000 container objects: with the collector
    on, their allocations started about forty young-generation passes and, every few
    reads, a full pass over the whole process's heap (80-100 ms of a 20 ms read,
    measured). Paused, the new objects are looked at once, by the first pass after.
    The objects and the collector's state after are the same (tests/integrations/test_copies.py).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return cast("list[Any]", pickle.loads(blob))
    finally:
        if enabled:
            gc.enable()


def _unchanged(objects: list[T]) -> list[T]:
    return objects


class KeptCopies(Generic[T]):
    """The histories validated here, per first id, as segments, planned or pickled (at most ``max_bytes``).

    ``validate``: the objects of JSON texts, in order, as one call validates them;
    ``finish``: applied to every list a read hands out (what one validation would have
    shared between objects, shared again across segments); ``plans``: keep a segment
    as a ``Plan`` when its objects allow (False: always pickled, the plain path).
    """

    def __init__(
        self,
        validate: Callable[[Sequence[str]], list[T]],
        finish: Callable[[list[T]], list[T]] = _unchanged,
        max_bytes: int = MAX_BYTES,
        plans: bool = True,
    ) -> None:
        self.validate = validate
        self.finish = finish
        self.max_bytes = max_bytes
        self.plans = plans
        self._lines: OrderedDict[str, list[_Segment]] = OrderedDict()
        self._tails: dict[str, str] = {}  # the last id of each history kept, to its key
        self._proofs: dict[str, object] = {}  # a history's proof (``objects``' ``proof``), by key
        self._proven: dict[object, str] = {}  # the key of the history each proof is of
        self._bytes = 0
        self._lock = threading.Lock()  # reads of PostgreSQL run in worker threads

    def objects(self, chosen: Sequence[tuple[str, str]], proof: object | None = None) -> list[T]:
        """The objects of ``chosen`` (id and JSON text, oldest first), as ``validate`` gives them.

        ``proof``: a hashable value the caller knows ``chosen`` by (decision 0183): kept
        with the history when it keeps all of ``chosen``, for ``proven`` to answer by.
        """
        if not chosen:
            return []
        key = chosen[0][0]
        segments = self._take(key)
        ids = [entry_id for entry_id, _ in chosen]
        texts = [text for _, text in chosen]
        found: list[T] = []
        kept: list[_Segment] = []
        for segment in segments:
            end = len(found) + len(segment.ids)
            if segment.ids != tuple(ids[len(found) : end]) or segment.texts != tuple(
                texts[len(found) : end]
            ):
                break
            found.extend(self._copied(segment, kept))
        start = len(found)
        if start < len(chosen):
            new = self.validate(texts[start:])
            made = _kept(ids[start:], texts[start:], new, False)  # planned if it is read again
            found.extend(new)
            if made is None:
                return self.finish(found)
            kept.append(made)
        if len(kept) > MAX_SEGMENTS:
            merged = _merged(kept, ids, texts, found)
            kept = [] if merged is None else [merged]
        self._keep(key, kept, proof)  # every one of ``chosen`` is kept here
        return self.finish(found)

    def _copied(self, segment: _Segment, kept: list[_Segment]) -> list[Any]:
        """A fresh copy of a kept segment's objects; the segment (planned now when read again) added to ``kept``."""
        if self.plans and not segment.tried:  # read again: planned now (decision 0176)
            segment, copy = _replanned(segment)
        else:
            copy = segment.copy()
        kept.append(segment)
        return copy

    def proven(self, proof: object) -> tuple[list[str], list[T]] | None:
        """The ids and a fresh copy of the objects of the history kept with ``proof``; None when none is (decision 0183).

        What ``objects`` gives for the same ids and texts, without them: the caller
        proved they are the ones the history was kept from (``objects``' or
        ``extend_by``'s ``proof``).
        """
        with self._lock:
            key = self._proven.get(proof)
        if key is None:
            return None
        segments = self._take(key, proof)
        if not segments:
            return None
        kept: list[_Segment] = []
        found: list[T] = []
        for segment in segments:
            found.extend(self._copied(segment, kept))
        self._keep(key, kept, proof)
        return [entry_id for segment in kept for entry_id in segment.ids], self.finish(found)

    def proves(self, proof: object) -> bool:
        """Whether a history is kept with ``proof`` now (``proven`` would answer)."""
        with self._lock:
            return proof in self._proven

    def proof_at(self, parent: str | None) -> object | None:
        """The proof of the history kept ending at ``parent``, if it has one."""
        if parent is None:
            return None
        with self._lock:
            key = self._tails.get(parent)
            return None if key is None else self._proofs.get(key)

    def extend(self, parent: str | None, written: Sequence[tuple[str, str, T | None]]) -> None:
        """Keep objects a write stored after ``parent`` (id, JSON text, what it validates to) as a new segment.

        Only after a kept history ending at ``parent``, and only when every object was
        validated from its very text; a read still matches the segment by ids and texts.
        """
        if self.keeps(parent):
            self.extend_by(parent, self.made(written))

    def keeps(self, parent: str | None) -> bool:
        """Whether a kept history ends at ``parent`` now (a write after it may be kept: ``made``, ``extend_by``)."""
        if parent is None:
            return False
        with self._lock:
            return parent in self._tails

    def made(self, written: Sequence[tuple[str, str, T | None]]) -> Made | None:
        """The segment ``extend`` keeps for ``written``, made now (planned or pickled); None when it keeps none.

        A caller may make it while the write runs and keep it after (``extend_by``,
        decision 0170): it owns the objects, which nothing else reads or changes.
        """
        if not written or any(made is None for _, _, made in written):
            return None
        objects = [made for _, _, made in written if made is not None]
        ids = [entry_id for entry_id, _, _ in written]
        return Made(_kept(ids, [text for _, text, _ in written], objects, self.plans))

    def extend_by(
        self,
        parent: str | None,
        made: Made | None,
        before: object | None = None,
        after: object | None = None,
    ) -> None:
        """``extend`` with its segment made before (``made``): kept after a kept history ending at ``parent``.

        ``after``: the grown history's proof, kept when the history had the proof
        ``before`` and grew by the whole of ``made`` (decision 0183); else it has none.
        """
        if parent is None or made is None:
            return
        with self._lock:
            key = self._tails.get(parent)
        if key is None:
            return
        segments, had = self._taken(key)
        if not segments or segments[-1].ids[-1] != parent:
            self._keep(key, segments)
            return
        segment = made.segment
        grown = segments if segment is None else [*segments, segment]
        if len(grown) > MAX_SEGMENTS:  # joined when all are planned, else not kept (a read merges)
            joined = _joined(grown)
            grown = segments if joined is None else [joined]
        whole = (
            segment is not None and grown is not segments and before is not None and had == before
        )
        self._keep(key, grown, after if whole else None)

    def _take(self, key: str, proof: object | None = None) -> list[_Segment]:
        """Take a history's segments out (its proof forgotten); with ``proof``, only when it has that one."""
        segments, had = self._taken(key)
        if proof is not None and had != proof:
            self._keep(key, segments, had)  # not the one proven: kept as it was
            return []
        return segments

    def _taken(self, key: str) -> tuple[list[_Segment], object | None]:
        """Take a history's segments out, and the proof it had (forgotten)."""
        with self._lock:
            had = self._proofs.get(key)
            segments = self._lines.pop(key, [])
            self._bytes -= sum(segment.size for segment in segments)
            if segments:
                self._untail(key, segments)
        return segments, had

    def _keep(self, key: str, segments: list[_Segment], proof: object | None = None) -> None:
        size = sum(segment.size for segment in segments)
        if not segments or size > self.max_bytes:
            return
        with self._lock:
            replaced = self._lines.pop(key, [])  # a concurrent read of the same history kept it
            self._bytes += size - sum(segment.size for segment in replaced)
            if replaced:
                self._untail(key, replaced)
            self._lines[key] = segments
            self._tails[segments[-1].ids[-1]] = key
            if proof is not None:
                self._proofs[key] = proof
                self._proven[proof] = key
            while self._bytes > self.max_bytes:
                gone, dropped = self._lines.popitem(last=False)
                self._bytes -= sum(segment.size for segment in dropped)
                self._untail(gone, dropped)

    def _untail(self, key: str, segments: list[_Segment]) -> None:
        """Forget where the history ``key`` kept as ``segments`` ended, and its proof (the lock held)."""
        tail = segments[-1].ids[-1]
        if self._tails.get(tail) == key:
            del self._tails[tail]
        proof = self._proofs.pop(key, None)
        if proof is not None and self._proven.get(proof) == key:
            del self._proven[proof]

    @property
    def size(self) -> int:
        """The bytes kept (texts and pickles)."""
        return self._bytes


__all__ = ["MAX_BYTES", "MAX_SEGMENTS", "SETS_STATE", "KeptCopies", "Made", "Plan", "planned", "unpickled"]
