"""Embedding vectors kept beside memory records, in recorded embedding spaces (issue 40).

A kind of data of its own over the store's engine (decision 0114): one vector per
(record, field, ordinal), stored as little-endian float32 bytes, in the embedding
*space* that made it. A space is a name (the embedder's, or one the caller gives)
and a number of dimensions; each *collection* (``"langgraph"`` for ``FlowmemStore``)
has at most one ``active`` space and, while ``flowmem reembed`` runs, one ``next``.

- **Written with the record.** ``put`` writes the record and replaces its vectors in
  one transaction, after checking that the collection's active space is the
  caller's (the first put records it): a put or search in another space raises
  ``EmbeddingSpaceError`` naming both, never a silent empty answer. ``write_records``
  (``SupportsRecordWrites``) writes and deletes many records, each with or without
  vectors, in one transaction: all or none.
- **Deleted with the record.** A record deleted (a delete, its TTL purged, its
  session deleted, its user erased) or rewritten with another value loses its
  vectors in the same transaction (SQL triggers; the memory store's record steps).
- **Counted.** A vector's bytes count against its record's owner's ``bytes`` quota
  (a user's namespace is that user's), as the record's own do.
- **Read by scanning.** ``scan`` pages through the live vectors of one scope id
  under a key prefix in key order, whole records per page; ``scoring.Ranking`` scores
  them exactly (numpy, a batch at a time).
- **Moved between spaces.** ``begin`` records a ``next`` space, ``pending`` lists the
  records with active vectors and none in the next space, ``fill`` writes a record's
  next vectors if it still holds the value they were made from, and ``switch``
  makes the next space the active one atomically once nothing is pending (the old
  vectors are deleted in that transaction). Reads use the active space throughout.

The implementation: ``SqlVectors`` (``sql.py``, with the tables and statements of
``sqlite.py`` and ``postgres.py``), which ``flowmem.store.vectorstores.vectors_of``
gives a SQL store (``memory://`` among them: SQLite on a private database, decision 0138).
"""

from __future__ import annotations

import math
import struct
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from flowmem.errors import ConfigurationError, EmbeddingSpaceError, InvalidInputError
from flowmem.store.base import Address, Store
from flowmem.store.rows import check_address

ACTIVE = "active"
NEXT = "next"
SCAN_BYTES = 16 * 2**20
"""Vector bytes one page of a scan reads at most (whole records; at least one)."""
MAX_DIMS = 65_536


@dataclass(frozen=True)
class Space:
    """An embedding space: the embedder's name (or the caller's id for it) and its dimensions."""

    name: str
    dims: int

    def __str__(self) -> str:
        return f"{self.name!r} ({self.dims} dimensions)"


@dataclass(frozen=True)
class Vector:
    """One vector of a record: the field path it embeds, its ordinal there, float32 bytes."""

    field: str
    ord: int
    data: bytes


@dataclass(frozen=True)
class ScanRow:
    """A live vector read by ``scan``: its record's key, the record's value text (when asked) and bytes."""

    key: str
    text: str | None
    data: bytes


@dataclass(frozen=True)
class Pending:
    """A record whose active vectors have none in the next space: its value text and its (field, ord)s."""

    address: Address
    text: str
    fields: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Spaces:
    """A collection's active space and the next one ``flowmem reembed`` is filling (None: none)."""

    active: Space | None
    next: Space | None


class Search(NamedTuple):
    """What one scan or search reads: the live vectors of ``(scope, scope_id)`` under ``prefix`` at ``now``, in ``collection``'s ``space``."""

    scope: str
    scope_id: str
    prefix: str
    now: float
    collection: str
    space: Space


@dataclass(frozen=True)
class Nearest:
    """What a search by meaning ranks by: its query embedding, the distance, how many records it keeps.

    ``accept(key, value_text)``: False drops a record (a filter; None: every record).
    ``ann``: the approximate index the search may read (``pgvector.AnnIndex``; None: exact).
    """

    query: Sequence[float]
    distance: str
    keep: int
    accept: Callable[[str, str | None], bool] | None = None
    ann: Any = None


def check_space(space: object) -> Space:
    """A usable ``Space``: a non-empty name of printable text, 1 to 65,536 dimensions (InvalidInputError)."""
    if not isinstance(space, Space):
        raise InvalidInputError(f"an embedding space must be a Space, got {space!r}")
    if not isinstance(space.name, str) or not space.name or not space.name.isprintable():
        raise InvalidInputError(f"an embedding space's name must be printable text, got {space.name!r}")
    if len(space.name) > 255:
        raise InvalidInputError("an embedding space's name has at most 255 characters")
    dims = space.dims
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= MAX_DIMS:
        raise InvalidInputError(f"dims must be an integer from 1 to {MAX_DIMS}, got {dims!r}")
    return space


def check_search(search: Search, start: str = "") -> Search:
    """``search`` when its scope id and ``start`` (or its prefix) make an address and its space is usable (InvalidInputError)."""
    check_address(Address(search.scope, search.scope_id, start or search.prefix or "_"))
    check_space(search.space)
    return search


def pack(values: Sequence[float], space: Space) -> bytes:
    """``values`` as float32 bytes; EmbeddingSpaceError when their number is not the space's dims."""
    if len(values) != space.dims:
        raise EmbeddingSpaceError(
            f"an embedding of {len(values)} dimensions is not in the space {space}: the embedder "
            f"does not make the vectors the index was configured for (set dims={len(values)} and "
            "run flowmem reembed, or fix the embedder)",
            space=space.name,
            dims=space.dims,
            got=len(values),
        )
    floats = [float(v) for v in values]
    if not all(math.isfinite(v) for v in floats):
        raise InvalidInputError("an embedding holds a NaN or an infinity: nothing was stored")
    return struct.pack(f"<{len(floats)}f", *floats)


class RecordWrite(NamedTuple):
    """One record a ``write_records`` writes or deletes: its JSON ``text`` (None: delete it).

    ``vectors``: None writes the record alone (its vectors go when its value changes, as
    a plain ``put_record``'s); a sequence replaces its vectors as ``put`` does.
    """

    address: Address
    text: str | None
    expires_at: float | None
    vectors: Sequence[Vector] | None


@runtime_checkable
class SupportsRecordWrites(Protocol):
    """A capability: many records written and deleted, with their vectors, in one transaction."""

    def write_records(self, writes: Sequence[RecordWrite], collection: str, space: Space | None) -> None:
        """Apply ``writes`` in order in one transaction: all or none (EmbeddingSpaceError first)."""
        ...


def check_vectors(vectors: Sequence[Vector], space: Space) -> list[Vector]:
    """The vectors, each of ``space``'s size, fields non-empty, ordinals >= 0 (InvalidInputError)."""
    checked = list(vectors)
    size = space.dims * 4
    for vector in checked:
        if not isinstance(vector, Vector) or not isinstance(vector.data, bytes):
            raise InvalidInputError(f"not a Vector of bytes: {vector!r}")
        if len(vector.data) != size:
            raise EmbeddingSpaceError(
                f"a vector of {len(vector.data) // 4} dimensions is not in the space {space}",
                space=space.name,
                dims=space.dims,
                got=len(vector.data) // 4,
            )
        if not isinstance(vector.field, str) or not vector.field or "\x00" in vector.field:
            raise InvalidInputError(f"a vector's field path must be non-empty text, got {vector.field!r}")
        if isinstance(vector.ord, bool) or not isinstance(vector.ord, int) or vector.ord < 0:
            raise InvalidInputError(f"a vector's ordinal must be an integer >= 0, got {vector.ord!r}")
    return checked


def mismatch(collection: str, stored: Space, asked: Space, doing: str) -> EmbeddingSpaceError:
    """The refusal of a put or search in ``asked`` where the collection's vectors are in ``stored``."""
    return EmbeddingSpaceError(
        f"{doing} refused: the {collection!r} vectors are in the embedding space {stored}, this "
        f"index is configured for {asked}; nothing was {'stored' if doing == 'put' else 'read'}. "
        "Configure the index with the stored space, or move the store to the new one with "
        "`flowmem reembed` (docs/langgraph-store.md, Changing the embedding model)",
        collection=collection,
        stored={"name": stored.name, "dims": stored.dims},
        asked={"name": asked.name, "dims": asked.dims},
    )


@runtime_checkable
class SupportsVectors(Protocol):
    """The vectors of a store's records (see the module docstring).

    The back-ends' vectors subclass it: ``scan`` is written here once (its arguments
    checked), over each one's ``_scan``.
    """

    def spaces(self, collection: str) -> Spaces:
        """The collection's active and next spaces."""
        ...

    def put(
        self,
        address: Address,
        text: str,
        expires_at: float | None,
        collection: str,
        space: Space,
        vectors: Sequence[Vector],
    ) -> None:
        """Write the record ``text`` and replace its vectors in one transaction (EmbeddingSpaceError first)."""
        ...

    def scan(
        self, search: Search, *, start: str, values: bool, limit_bytes: int = SCAN_BYTES
    ) -> tuple[list[ScanRow], bool]:
        """One page of ``search``'s live active-space vectors under its prefix from key ``start``, whole records.

        In key order (a record's rows together, in no set order among them: a
        record scores its best), and whether more may follow (ask again
        after the page's last key). EmbeddingSpaceError when the collection's active
        space is not the search's.
        """
        check_search(search, start)
        return self._scan(search, max(start, search.prefix), values, limit_bytes)

    @abstractmethod
    def _scan(self, search: Search, lower: str, values: bool, limit_bytes: int) -> tuple[list[ScanRow], bool]:
        """``scan``'s page from key ``lower``, its arguments checked: the back-end's read."""

    def begin(self, collection: str, space: Space) -> Spaces:
        """Record ``space`` as the collection's next space (kept when it already is; replaced otherwise)."""
        ...

    def pending(self, collection: str, after: Address | None, limit: int) -> list[Pending]:
        """Records after ``after`` with active vectors and none in the next space, in address order."""
        ...

    def fill(self, address: Address, text: str, collection: str, vectors: Sequence[Vector]) -> bool:
        """Write a record's next-space vectors if it still holds ``text``; False when it changed."""
        ...

    def switch(self, collection: str) -> int:
        """Make the next space active if nothing is pending (its old vectors deleted); the pending count."""
        ...


def vectors_of(store: Store) -> SupportsVectors:
    """A store's own ``vectors``: ConfigurationError for a store that keeps none.

    A store written outside flowmem may have its own; ``flowmem.store.vectorstores.vectors_of``
    gives the SQL back-ends (``memory://`` among them) theirs.
    """
    own = getattr(store, "vectors", None)
    if isinstance(own, SupportsVectors):
        return own
    raise ConfigurationError(
        f"{type(store).__name__} keeps no embedding vectors: use a MemoryStore, SqliteStore or "
        "PostgresStore for a FlowmemStore with an index"
    )


__all__ = [
    "ACTIVE",
    "NEXT",
    "SCAN_BYTES",
    "Nearest",
    "Pending",
    "RecordWrite",
    "ScanRow",
    "Search",
    "Space",
    "Spaces",
    "SupportsRecordWrites",
    "SupportsVectors",
    "Vector",
    "check_search",
    "check_space",
    "check_vectors",
    "mismatch",
    "pack",
    "vectors_of",
]
