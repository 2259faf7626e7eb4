"""Records written with their vectors and searched by a query vector, for a caller's scope (issue 40 §5).

What the HTTP API (``PUT /v1/memory/{scope}/{key}/vectors``, ``POST
/v1/search/{scope}``) and the client call, decision 0125: the caller brings
the vectors (the server holds no model), in the collection ``"http"`` of the store's
vectors (``flowmem.store.vectors``), whose first write records its embedding space.

- The scope id is resolved from the caller's context as for a record's read or
  write (``MemoryService.resolve``): a refused scope writes nothing and finds
  nothing, and says why (``Refusal``). Vectors are kept for the ``user`` and shared
  scopes, not a session's (the kind of data's own rule): a ``session`` scope is
  ``invalid_input``.
- Every input is checked before anything is stored (``check_space``,
  ``check_request``): the declared space, each vector's field and its number of
  floats, finite floats, at most ``VECTORS_PER_RECORD`` vectors of at most
  ``VECTOR_DIMS`` dimensions. A space other than the collection's stored one is
  ``EmbeddingSpaceError`` (409) naming both, from the kind of data's own check.
- A search is the exact scan of ``FlowmemStore``'s (``scoring.Ranking``), or
  pgvector's exact ranking in SQL where the store has it (``nearest_raw``): the
  best ``offset + limit`` records under a key prefix, best first, ties in key order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowmem.errors import EmbeddingSpaceError, InvalidInputError
from flowmem.limits import SEARCH_LIMIT, SEARCH_OFFSET, VECTOR_DIMS, VECTORS_PER_RECORD
from flowmem.scope import ExecutionContext, Refusal, check_scope
from flowmem.service.checks import check_key
from flowmem.service.vector_kinds import nearest_raw, put_with_vectors, scan_raw
from flowmem.store.base import SESSION_SCOPE, Address
from flowmem.store.listing import successor
from flowmem.store.vectors import Search, Space, Vector, check_space, pack

if TYPE_CHECKING:
    from flowmem.service import MemoryService

COLLECTION = "http"
"""The vectors' collection of records written over HTTP: one embedding space per flowmem store."""
DISTANCES = ("cosine", "inner_product", "l2")


@dataclass(frozen=True)
class Found:
    """One record a search found: its key, its value and its score (higher is closer)."""

    key: str
    value: Any
    score: float


@dataclass(frozen=True)
class Searched:
    """A search's answer: the records found, best first, at the resolved scope id, or a refusal."""

    found: list[Found]
    resolved_scope_id: str
    refusal: Refusal | None = None


def space_of(name: object, dims: object) -> Space:
    """The embedding space a request names, checked: printable name, 1 to ``VECTOR_DIMS`` dimensions."""
    space = check_space(Space(name, dims))  # type: ignore[arg-type]  # checked here
    if space.dims > VECTOR_DIMS:
        raise InvalidInputError(
            f"dims is at most {VECTOR_DIMS} over HTTP, got {space.dims}", field="space.dims"
        )
    return space


def floats(values: object, space: Space, where: str) -> bytes:
    """A list of ``space.dims`` finite numbers as float32 bytes (InvalidInputError otherwise)."""
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise InvalidInputError(f"{where} must be a list of numbers", field=where)
    if len(values) != space.dims:
        raise InvalidInputError(
            f"{where} has {len(values)} numbers, the space {space} has {space.dims}: nothing was "
            "stored (send vectors of the space's size, or name the space that made them)",
            field=where,
            dims=space.dims,
            got=len(values),
        )
    if not all(math.isfinite(float(v)) for v in values):
        raise InvalidInputError(f"{where} holds a NaN or an infinity: nothing was stored", field=where)
    try:
        return pack(values, space)
    except OverflowError:  # a finite float beyond float32's range
        raise InvalidInputError(f"{where} holds a number beyond float32's range", field=where) from None


def check_request(space: Space, vectors: Sequence[Mapping[str, Any]]) -> list[Vector]:
    """The vectors of a write, checked: at most ``VECTORS_PER_RECORD``, each a field and the space's floats.

    A field's vectors are numbered in the order given (their ordinals).
    """
    if len(vectors) > VECTORS_PER_RECORD:
        raise InvalidInputError(
            f"a record has at most {VECTORS_PER_RECORD} vectors, got {len(vectors)}", field="vectors"
        )
    found: list[Vector] = []
    ordinals: dict[str, int] = {}
    for at, item in enumerate(vectors):
        field = item.get("field")
        if not isinstance(field, str) or not field or "\x00" in field or len(field) > 255:
            raise InvalidInputError(
                f"vectors[{at}].field must be 1 to 255 characters of text", field=f"vectors[{at}].field"
            )
        data = floats(item.get("vector"), space, f"vectors[{at}].vector")
        ordinal = ordinals.get(field, 0)
        ordinals[field] = ordinal + 1
        found.append(Vector(field, ordinal, data))
    return found


def _vector_scope(memory: MemoryService, operation: str, scope: str, key: str, context: ExecutionContext | None) -> str | Refusal:
    """The scope id of a vector write or search; ``invalid_input`` for a session's scope."""
    if check_scope(scope) == SESSION_SCOPE:
        raise InvalidInputError(
            "vectors are kept for the user and shared scopes, not a session's: write the record "
            "to scope user (or a shared scope)",
            field="path.scope",
        )
    return memory.resolve(operation, scope, key, context)


def write_with_vectors(
    memory: MemoryService,
    scope: str,
    key: str,
    value: Any,
    context: ExecutionContext | None,
    *,
    ttl: float | None,
    space: Space,
    vectors: Sequence[Vector],
) -> str | Refusal:
    """Write a record and replace its vectors in one transaction; the scope id written, or the refusal."""
    name = check_key(key)
    resolved = _vector_scope(memory, "write", scope, name, context)
    if isinstance(resolved, Refusal):
        return resolved
    try:
        put_with_vectors(memory, Address(scope, resolved, name), value, ttl, COLLECTION, space, vectors)
    except EmbeddingSpaceError as error:
        raise _refused(error, "write", "stored") from None
    return resolved


def _refused(error: EmbeddingSpaceError, doing: str, nothing: str) -> EmbeddingSpaceError:
    """The kind of data's space refusal, said for a caller over HTTP (both spaces named)."""
    stored, asked = error.details.get("stored"), error.details.get("asked")
    if not isinstance(stored, dict) or not isinstance(asked, dict):
        return error
    return EmbeddingSpaceError(
        f"{doing} refused: this store's vectors are in the embedding space {stored['name']!r} "
        f"({stored['dims']} dimensions), the request's in {asked['name']!r} ({asked['dims']} "
        f"dimensions); nothing was {nothing}. Embed with the stored space's model (and name "
        "it), or use another flowmem store for the new one",
        stored=stored,
        asked=asked,
    )


def search(
    memory: MemoryService,
    scope: str,
    context: ExecutionContext | None,
    *,
    space: Space,
    query: Sequence[float],
    distance: str = "cosine",
    prefix: str = "",
    limit: int = 10,
    offset: int = 0,
) -> Searched:
    """The best ``limit`` records after ``offset`` under ``prefix`` by their vectors' score against ``query``."""
    if distance not in DISTANCES:
        raise InvalidInputError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}", field="distance")
    if not 1 <= limit <= SEARCH_LIMIT or not 0 <= offset <= SEARCH_OFFSET:
        raise InvalidInputError(
            f"limit is 1 to {SEARCH_LIMIT} and offset 0 to {SEARCH_OFFSET}", field="limit"
        )
    floats(list(query), space, "vector")
    resolved = _vector_scope(memory, "search", scope, prefix, context)
    if isinstance(resolved, Refusal):
        return Searched([], "", resolved)
    asked, start = Search(scope, resolved, prefix, float(memory.clock()), COLLECTION, space), prefix
    try:
        scored = nearest_raw(memory, asked, query=query, distance=distance, keep=offset + limit)
    except EmbeddingSpaceError as error:
        raise _refused(error, "search", "read") from None
    if scored is not None:  # the store's engine scored them (pgvector)
        return Searched(_found(scored[0][offset:]), resolved)
    from flowmem.store.vectors.scoring import Ranking  # numpy: only a search needs it

    ranking = Ranking(query, distance, offset + limit)
    while True:
        try:
            page, more = scan_raw(memory, asked, start=start, values=True)
        except EmbeddingSpaceError as error:
            raise _refused(error, "search", "read") from None
        if not page:
            break
        ranking.feed([r.key for r in page], [r.data for r in page], [r.text for r in page])
        if not more:
            break
        start = successor(page[-1].key)
    return Searched(_found(ranking.best()[offset:]), resolved)


def _found(best: Sequence[tuple[str, float, str | None]]) -> list[Found]:
    return [Found(key, None if text is None else json.loads(text), score) for key, score, text in best]
