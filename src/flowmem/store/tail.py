"""A buffer read from its end in SQL (``BufferStore.read_tail``, issue 28): the backends' shared half.

Three statements, by name in each backend's ``queries.py``: ``tail_first`` (the
header, the system rows and the newest rows, one snapshot; it sizes its own batch
from the header's count and tokens: the rows ``budget`` tokens make at the
buffer's average, an eighth more and 8; the next batch is half as large, then
each twice the last), ``tail_more`` (older rows below a cursor, with the header
again) and ``tail_uncounted`` (a buffer stored before migration 13: its
counted tokens and the rows without a count). Each result row is ``(kind, pos or
count, body, tokens, buffer stamp, version, first batch size)``; a batch whose
header stamp or version differs from the first's raises BufferChangedError.

``read_tail_facts`` (issue 38 §2) reads the same rows with ``cut_first`` and
``cut_more`` for a window's cut (``store.window.read_cut``): each row's window facts
(``core.window.RowFacts``) from stored columns — its ``role``, its token count, the
call ids (on SQLite the row's own ``calls`` column since its migration 23, on
PostgreSQL ``buffer_calls``) — so most rows need no JSON parse in Python
(the interpreter lock the event loop waits for). A row comes with its text, parsed as
``read_tail``'s, when SQL cannot give its facts: a tool row (its answered id, which
``buffer_answers`` does not index by position), a row without a stored count, and a
text that is not valid JSON (``json_valid``: named ``store_corrupt`` as the plain read
names it). Such a result row is ``(2, pos, body or NULL, tokens, role, calls as a JSON
array or NULL, NULL)``. Oracle: ``plain_facts`` over ``read_tail``
(``tests/store/test_tail_facts.py``, a property on SQLite).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from flowmem.core.fast import fast_row_facts
from flowmem.core.tokens import estimate_tokens
from flowmem.core.window import RowFacts
from flowmem.errors import BufferChangedError
from flowmem.store.base import TAIL_BATCH, TAIL_BATCH_MAX, TAIL_FIRST_MAX, Address, Tail, TailRow
from flowmem.store.rows import stored_json

Run = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
_T = TypeVar("_T")
_R = TypeVar("_R")
_HEAD, _SYSTEM, _ROW, _COUNTED, _UNCOUNTED = range(5)
_BUDGET_MAX = 2**31  # a budget beyond any buffer: the first batch's arithmetic stays in 64 bits


@dataclass(frozen=True)
class _First:
    """What the first statement of a read from the end found: the header, the system rows, the newest rows."""

    count: int
    tokens: int
    systems: list[TailRow]
    rows: list[tuple[Any, ...]]
    stamp: tuple[Any, Any]
    size: int

    @property
    def version(self) -> tuple[int, int]:
        """The buffer's version as a paged read names it."""
        return int(self.stamp[0]), int(self.stamp[1])


def _first(run: Run, name: str, address: Address, batch: int, budget: int) -> _First | None:
    """Run the first statement ``name`` of a read from the end (None: no buffer there)."""
    found = run(name, (batch, TAIL_FIRST_MAX, min(budget, _BUDGET_MAX), *address))
    head = _head(found)
    if head is None:
        return None
    total, stamp = head[3], (head[4], head[5])
    systems = sorted(_rows_of(found, _SYSTEM), key=lambda r: r.cursor)
    first = [r for r in found if r[0] == _ROW]
    if total is None:
        total = _counted(run, address, stamp)
    return _First(int(head[1]), int(total), systems, first, stamp, int(head[6]))


def read_tail(run: Run, address: Address, batch: int, budget: int = 0) -> Tail:
    """Read ``address`` from its end with ``run`` (one statement per call, by name)."""
    return _read(run, ("tail_first", "tail_more"), address, batch, budget, _rows_of, Tail)


def _read(
    run: Run,
    names: tuple[str, str],
    address: Address,
    batch: int,
    budget: int,
    decode: Callable[[list[tuple[Any, ...]], int], list[_T]],
    made: Callable[[int, int, list[TailRow], Iterator[_T], tuple[int, int] | None], _R],
) -> _R:
    """A read from the end: the first statement of ``names``, then the other's batches, ``decode``d."""
    first = _first(run, names[0], address, batch, budget)
    if first is None:
        return made(0, 0, [], iter(()), None)
    rows = _newest(run, address, first.stamp, first.rows, first.size, names[1], decode)
    return made(first.count, first.tokens, first.systems, rows, first.version)


@dataclass(frozen=True)
class FactsTail:
    """A buffer read from its end for a window's cut: ``Tail`` with each row's facts for its row.

    ``facts``: ``(cursor, RowFacts)`` newest first, a batch at a time (``close`` to stop).
    """

    count: int
    tokens: int
    systems: list[TailRow]
    facts: Iterator[tuple[int, RowFacts]]
    version: tuple[int, int] | None = None

    def close(self) -> None:
        """Stop reading rows."""
        close = getattr(self.facts, "close", None)
        if close is not None:
            close()


@runtime_checkable
class SupportsTailFacts(Protocol):
    """A store that reads a window's facts in SQL (``read_tail_facts``): SQLite's."""

    def read_tail_facts(self, address: Address, batch: int = TAIL_BATCH, budget: int = 0) -> FactsTail:
        """``read_tail``'s rows as their window facts (``flowmem.store.tail.read_tail_facts``)."""
        ...


def plain_facts(tail: Tail) -> FactsTail:
    """The facts of ``tail``'s rows, each parsed (the oracle of ``read_tail_facts``, and its fallback)."""

    def facts() -> Iterator[tuple[int, RowFacts]]:
        try:
            for cursor, row, tokens in tail.rows:
                yield cursor, fast_row_facts(row, tokens)
        finally:
            tail.close()

    return FactsTail(tail.count, tail.tokens, tail.systems, facts(), tail.version)


def read_tail_facts(run: Run, address: Address, batch: int, budget: int = 0) -> FactsTail:
    """``read_tail`` with ``cut_first`` and ``cut_more``: the rows' facts, most from stored columns."""
    return _read(run, ("cut_first", "cut_more"), address, batch, budget, _facts_of, FactsTail)


def _facts_of(found: list[tuple[Any, ...]], kind: int) -> list[tuple[int, RowFacts]]:
    """The facts of the rows of one kind in a ``cut_*`` result (a text parsed only when given)."""
    facts: list[tuple[int, RowFacts]] = []
    add = facts.append
    for r in found:
        if r[0] != kind:
            continue
        if r[2] is not None:  # a tool row, an uncounted row or a text SQL found not JSON
            row = stored_json(r[2])
            add((r[1], fast_row_facts(row, estimate_tokens(row) if r[3] is None else r[3])))
        elif r[5] is None or r[5] == "[]":
            add((r[1], _row_facts((r[4], r[3], (), None))))
        else:
            add((r[1], _row_facts((r[4], r[3], tuple(json.loads(r[5])), None))))
    return facts


_row_facts: Callable[[tuple[str, int, tuple[str, ...], str | None]], RowFacts] = functools.partial(
    tuple.__new__, RowFacts
)


def _head(found: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    return next((r for r in found if r[0] == _HEAD), None)


def _rows_of(found: list[tuple[Any, ...]], kind: int) -> list[TailRow]:
    """The rows of one kind in a result, parsed together (one JSON array: faster than one by one)."""
    picked = [r for r in found if r[0] == kind]
    if not picked:
        return []
    rows = stored_json("[" + ",".join(r[2] for r in picked) + "]")
    counts = [r[3] for r in picked]  # the drivers give ints
    if None in counts:  # rows stored before their counts were (migration 13)
        counts = [estimate_tokens(row) if c is None else c for c, row in zip(counts, rows, strict=True)]
    return list(map(_tail_row, zip([r[1] for r in picked], rows, counts, strict=True)))


# a TailRow built in C (no call of its Python __new__): a window reads hundreds a call
_tail_row: Callable[[tuple[int, Any, int]], TailRow] = functools.partial(tuple.__new__, TailRow)


def _check(address: Address, found: list[tuple[Any, ...]], stamp: tuple[Any, Any]) -> None:
    head = _head(found)
    if head is None or (head[4], head[5]) != stamp:
        raise BufferChangedError(
            f"buffer {address.scope}/{address.scope_id}/{address.key} was written "
            "while it was read from its end: read it again"
        )


def _counted(run: Run, address: Address, stamp: tuple[Any, Any]) -> int:
    """The tokens of a buffer whose total was not kept: the stored counts, and the others counted."""
    found = run("tail_uncounted", tuple(address))
    _check(address, found, stamp)
    stored = next((r[3] for r in found if r[0] == _COUNTED), None)
    return int(stored or 0) + sum(r.tokens for r in _rows_of(found, _UNCOUNTED))


def _newest(
    run: Run,
    address: Address,
    stamp: tuple[Any, Any],
    first: list[tuple[Any, ...]],
    size: int,
    more_name: str,
    decode: Callable[[list[tuple[Any, ...]], int], list[_T]],
) -> Iterator[_T]:
    """The rows newest first (``decode``d): the first batch's, then a batch below the last cursor at a time."""
    found = first
    while True:
        found.sort(key=lambda r: r[1], reverse=True)
        yield from decode(found, _ROW)
        if len(found) < size:
            return
        low = int(found[-1][1])
        # the tail is denser than the buffer's average: half the first batch again, then doubling
        size = max(size // 2, 64) if first is found else min(size * 2, TAIL_BATCH_MAX)
        # give the interpreter lock away between batches: a long cut runs in a store thread
        # while the event loop waits for the lock (issue 38 §2, measured in docs/performance.md)
        time.sleep(0)
        more = run(more_name, (*address, low, size))
        _check(address, more, stamp)
        found = [r for r in more if r[0] == _ROW]
