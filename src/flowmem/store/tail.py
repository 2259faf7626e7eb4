"""A buffer read from its end in SQL (``BufferStore.read_tail``, issue 28): the backends' shared half.

Three statements, by name in each backend's ``queries.py``: ``tail_first`` (the
header, the system rows and the newest ``batch`` rows, one snapshot), ``tail_more``
(older rows below a cursor, with the header again) and ``tail_uncounted`` (a buffer
stored before migration 13: its counted tokens and the rows without a count). Each
result row is ``(kind, pos or count, body, tokens, buffer stamp, version)``; a batch
whose header stamp or version differs from the first's raises BufferChangedError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from flowmem.core.tokens import estimate_tokens
from flowmem.errors import BufferChangedError
from flowmem.store.base import TAIL_BATCH_MAX, Address, Tail, TailRow
from flowmem.store.editor import load_row

Run = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
_HEAD, _SYSTEM, _ROW, _COUNTED, _UNCOUNTED = range(5)


def read_tail(run: Run, address: Address, batch: int) -> Tail:
    """Read ``address`` from its end with ``run`` (one statement per call, by name)."""
    found = run("tail_first", (*address, batch))
    head = _head(found)
    if head is None:
        return Tail(0, 0, [], iter(()))
    count, total, stamp = int(head[1]), head[3], (head[4], head[5])
    systems = sorted((_row(r) for r in found if r[0] == _SYSTEM), key=lambda r: r.cursor)
    first = sorted((r for r in found if r[0] == _ROW), key=lambda r: -int(r[1]))
    if total is None:
        total = _counted(run, address, stamp)
    return Tail(count, int(total), systems, _rows(run, address, stamp, first, batch))


def _head(found: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    return next((r for r in found if r[0] == _HEAD), None)


def _row(found: tuple[Any, ...]) -> TailRow:
    row = load_row(found[2])
    tokens = found[3]
    return TailRow(int(found[1]), row, estimate_tokens(row) if tokens is None else int(tokens))


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
    return int(stored or 0) + sum(_row(r).tokens for r in found if r[0] == _UNCOUNTED)


def _rows(
    run: Run,
    address: Address,
    stamp: tuple[Any, Any],
    first: list[tuple[Any, ...]],
    batch: int,
) -> Iterator[TailRow]:
    found, size = first, batch
    while True:
        yield from (_row(r) for r in found)
        if len(found) < size:
            return
        low = int(found[-1][1])
        size = min(size * 2, TAIL_BATCH_MAX)
        more = run("tail_more", (*address, low, size))
        _check(address, more, stamp)
        found = sorted((r for r in more if r[0] == _ROW), key=lambda r: -int(r[1]))
