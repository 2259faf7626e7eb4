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
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from flowmem.core.tokens import estimate_tokens
from flowmem.errors import BufferChangedError
from flowmem.store.base import TAIL_BATCH_MAX, TAIL_FIRST_MAX, Address, Tail, TailRow
from flowmem.store.rows import stored_json

Run = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
_HEAD, _SYSTEM, _ROW, _COUNTED, _UNCOUNTED = range(5)
_BUDGET_MAX = 2**31  # a budget beyond any buffer: the first batch's arithmetic stays in 64 bits


def read_tail(run: Run, address: Address, batch: int, budget: int = 0) -> Tail:
    """Read ``address`` from its end with ``run`` (one statement per call, by name)."""
    found = run("tail_first", (batch, TAIL_FIRST_MAX, min(budget, _BUDGET_MAX), *address))
    head = _head(found)
    if head is None:
        return Tail(0, 0, [], iter(()))
    count, total, stamp, size = int(head[1]), head[3], (head[4], head[5]), int(head[6])
    systems = sorted(_rows_of(found, _SYSTEM), key=lambda r: r.cursor)
    first = [r for r in found if r[0] == _ROW]
    if total is None:
        total = _counted(run, address, stamp)
    version = (int(stamp[0]), int(stamp[1]))
    return Tail(count, int(total), systems, _newest(run, address, stamp, first, size), version)


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
) -> Iterator[TailRow]:
    """The rows newest first: the first batch's, then a batch below the last cursor at a time."""
    found = first
    while True:
        found.sort(key=lambda r: r[1], reverse=True)
        yield from _rows_of(found, _ROW)
        if len(found) < size:
            return
        low = int(found[-1][1])
        # the tail is denser than the buffer's average: half the first batch again, then doubling
        size = max(size // 2, 64) if first is found else min(size * 2, TAIL_BATCH_MAX)
        more = run("tail_more", (*address, low, size))
        _check(address, more, stamp)
        found = [r for r in more if r[0] == _ROW]
