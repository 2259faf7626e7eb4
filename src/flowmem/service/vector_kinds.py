"""The records' embedding vectors (``flowmem.store.vectors``), through the memory service (decision 0115).

An adapter (``FlowmemStore``) writes a record with its vectors and scans them here,
from the service it was given: the address is checked as the service checks one,
the value against its ``record_bytes`` limit, a TTL in seconds of its clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from flowmem.errors import ConfigurationError, InvalidInputError
from flowmem.scope import check_scope
from flowmem.service.checks import check_prefixed, check_record, check_ttl, checked_address
from flowmem.store.base import SESSION_SCOPE, Address
from flowmem.store.rows import to_json
from flowmem.store.vectors import (
    Nearest,
    RecordWrite,
    ScanRow,
    Search,
    Space,
    SupportsRecordWrites,
    SupportsVectors,
    Vector,
)
from flowmem.store.vectorstores import vectors_of

if TYPE_CHECKING:
    from flowmem.service import MemoryService


def vectors(memory: MemoryService) -> SupportsVectors:
    """The vectors kept beside ``memory``'s records; ConfigurationError for a store that keeps none."""
    return vectors_of(memory.store)


def put_with_vectors(
    memory: MemoryService,
    address: Address,
    value: object,
    ttl: float | None,
    collection: str,
    space: Space,
    found: Sequence[Vector],
) -> None:
    """Write a record (TTL in seconds) and replace its vectors in one transaction, at a resolved scope id."""
    # a session's data needs its guard: no adapter writes vectors there
    if check_scope(address.scope) == SESSION_SCOPE:
        raise InvalidInputError("vectors are kept for user and shared scopes, not a session's")
    checked = checked_address(*address)
    seconds = check_ttl(ttl)
    check_record(value, memory.limits.record_bytes)
    expires_at = None if seconds is None else float(memory.clock()) + seconds
    vectors(memory).put(checked, to_json(value), expires_at, collection, space, found)


class Put(NamedTuple):
    """A record ``write_records`` writes: its value, TTL in seconds, vectors (None: the record alone)."""

    address: Address
    value: object
    ttl: float | None
    vectors: Sequence[Vector] | None


class Delete(NamedTuple):
    """A record ``write_records`` deletes (its vectors with it)."""

    address: Address


def records_writer(memory: MemoryService) -> SupportsRecordWrites | None:
    """What writes many of ``memory``'s records in one transaction; None where its store has nothing that does."""
    try:
        found = vectors(memory)
    except ConfigurationError:  # a store written outside flowmem, keeping no vectors
        return None
    return found if isinstance(found, SupportsRecordWrites) else None


def write_records(
    memory: MemoryService,
    writer: SupportsRecordWrites,
    writes: Sequence[Put | Delete],
    collection: str,
    space: Space | None,
) -> None:
    """Apply puts and deletes at resolved scope ids in order, in one transaction (``records_writer``'s).

    Each is checked first as ``write_raw``, ``delete_raw`` and ``put_with_vectors`` check
    theirs (nothing is written when one fails); a session's records are refused (their
    writes need the session's guard). All or none.
    """
    now = float(memory.clock())
    checked: list[RecordWrite] = []
    for write in writes:
        if check_scope(write.address.scope) == SESSION_SCOPE:
            raise InvalidInputError("a session's records are written with its guard, not in a batch of records")
        address = checked_address(*write.address)
        if isinstance(write, Delete):
            checked.append(RecordWrite(address, None, None, None))
            continue
        seconds = check_ttl(write.ttl)
        check_record(write.value, memory.limits.record_bytes)
        expires_at = None if seconds is None else now + seconds
        checked.append(RecordWrite(address, to_json(write.value), expires_at, write.vectors))
    writer.write_records(checked, collection, space)


def _checked(search: Search) -> Search:
    """``search`` with its scope, scope id and prefix checked as the service checks them."""
    scope, scope_id, prefix = check_prefixed(search.scope, search.scope_id, search.prefix)
    return search._replace(scope=scope, scope_id=scope_id, prefix=prefix)


def scan_raw(memory: MemoryService, search: Search, *, start: str, values: bool) -> tuple[list[ScanRow], bool]:
    """One page of ``search``'s live vectors (a resolved scope id) from ``start``, whole records, and whether more may follow."""
    checked = _checked(search)
    return vectors(memory).scan(checked, start=start, values=values)


def nearest_raw(
    memory: MemoryService,
    search: Search,
    *,
    query: Sequence[float],
    distance: str,
    keep: int,
    accept: Callable[[str, str | None], bool] | None = None,
    ann: object = None,
) -> tuple[list[tuple[str, float, str | None]], int] | None:
    """``search``'s best ``keep`` records scored by the store's engine (pgvector), and how many; None where it scores none.

    None: the caller runs the exact scan (``scan_raw`` and ``scoring.Ranking``).
    ``ann``: the ``pgvector.AnnIndex`` a search may read (approximate).
    """
    checked = _checked(search)
    nearest = getattr(vectors(memory), "nearest", None)
    if nearest is None:
        return None
    found: tuple[list[tuple[str, float, str | None]], int] | None = nearest(
        checked, Nearest(query, distance, keep, accept, ann)
    )
    return found
