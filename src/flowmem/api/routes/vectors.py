"""Records with their vectors over HTTP (issue 40 §5; decision 0125): write, and search by a query vector.

``PUT /v1/memory/{scope}/{key}/vectors`` writes a record and replaces its vectors in
one transaction; ``POST /v1/search/{scope}`` ranks the scope's records under
a key prefix by their vectors' score against a query vector (the exact scan of
``FlowmemStore``'s). The caller embeds: the server holds no model and downloads
nothing. The scope id comes from the caller as for every memory route
(``flowmem.api.fast.route.scope_context``): the caller's own user id, or the shared
scopes with ``memory:shared``; a refused scope writes and finds nothing and says why
(``refused``, ``X-Flowmem-Refused``). A session's scope keeps no vectors (422).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from flowmem.access import Principal
from flowmem.api.deps import CALLER, Caller
from flowmem.api.fast.route import (
    TARGET_OPENAPI,
    MemoryCall,
    Target,
    refused_response,
    scope_context,
)
from flowmem.api.models import REFUSED, WriteResult
from flowmem.api.query import KnownQueryRoute
from flowmem.api.routes.common import BODY_ERRORS, CALL, QUERY_TARGET, scoped, scoped_router
from flowmem.api.services import Services
from flowmem.limits import SEARCH_LIMIT, SEARCH_OFFSET, VECTOR_DIMS, VECTORS_PER_RECORD
from flowmem.scope import NAME_MAX, Refusal
from flowmem.service import vector_records

writes = scoped_router()
searches = APIRouter(prefix="/v1/search", tags=["memory"], route_class=KnownQueryRoute)



class SpaceIn(BaseModel):
    """The embedding space the vectors are in: the embedder's name (or the caller's) and its dimensions."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=255, description="E.g. `openai:text-embedding-3-small`.")
    dims: int = Field(ge=1, le=VECTOR_DIMS, description=f"1 to {VECTOR_DIMS}.")


class VectorIn(BaseModel):
    """One vector of the record: the field it embeds and its numbers (the space's `dims` of them)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    field: str = Field(
        min_length=1, max_length=255, description="The field path it embeds (`$` for the whole value)."
    )
    vector: list[float] = Field(max_length=VECTOR_DIMS, description="Finite numbers, as many as the space's `dims`.")


class VectorWrite(BaseModel):
    """A record's value (any JSON), its TTL in seconds, and its vectors in one space."""

    model_config = ConfigDict(extra="forbid", strict=True)

    value: Any = None
    ttl: float | None = Field(default=None, gt=0)
    space: SpaceIn
    vectors: list[VectorIn] = Field(
        max_length=VECTORS_PER_RECORD, description=f"At most {VECTORS_PER_RECORD}; none: the record keeps none."
    )


class VectorSearch(BaseModel):
    """A query vector in one space, and which records to rank: a key prefix, a page."""

    model_config = ConfigDict(extra="forbid", strict=True)

    space: SpaceIn
    vector: list[float] = Field(
        max_length=VECTOR_DIMS, description="The query's embedding: the space's `dims` finite numbers."
    )
    distance: Literal["cosine", "inner_product", "l2"] = "cosine"
    prefix: str = Field(default="", max_length=NAME_MAX, description="Only keys starting with this.")
    limit: int = Field(default=10, ge=1, le=SEARCH_LIMIT, description=f"1 to {SEARCH_LIMIT}.")
    offset: int = Field(default=0, ge=0, le=SEARCH_OFFSET, description=f"Records skipped first: 0 to {SEARCH_OFFSET}.")


class SearchHit(BaseModel):
    """A record found: its key, value and score (higher is closer)."""

    key: str
    value: Any = None
    score: float


class SearchResult(BaseModel):
    """The records found, best first (ties in key order)."""

    data: list[SearchHit]
    resolved_scope_id: str
    refused: str | None = REFUSED


def _written(principal: Principal, services: Services, target: Target, body: VectorWrite) -> dict[str, Any]:
    """Write the record with its vectors at the caller's scope id (in a store thread)."""
    space = vector_records.space_of(body.space.name, body.space.dims)
    found = vector_records.check_request(space, [v.model_dump() for v in body.vectors])
    context = scope_context(services.sessions, principal, target, write=True)
    resolved = vector_records.write_with_vectors(
        services.memory, target.scope, target.key, body.value, context,
        ttl=body.ttl, space=space, vectors=found,
    )
    if isinstance(resolved, Refusal):
        return {"success": False, "resolved_scope_id": "", "refused": resolved.code}
    return {"success": True, "resolved_scope_id": resolved}


@writes.put(
    "/memory/{scope}/{key}/vectors",
    **scoped(WriteResult, *BODY_ERRORS, 409, openapi=TARGET_OPENAPI),
)
async def write_with_vectors(body: VectorWrite, call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Write a memory record with its vectors, replacing the record's vectors, in one transaction.

    The vectors' space must be the store's (recorded by the first such write):
    another is 409 `embedding_space_mismatch` naming both, and nothing changes.
    """
    answer = await call.caller.in_store_thread(_written, call.caller.services, call.target, body)
    if "refused" in answer:
        return refused_response(answer, answer["refused"])
    return answer


def _searched(principal: Principal, services: Services, target: Target, body: VectorSearch) -> dict[str, Any]:
    """Rank the caller's records of ``target.scope`` against the query vector (in a thread)."""
    space = vector_records.space_of(body.space.name, body.space.dims)
    context = scope_context(services.sessions, principal, target, write=False)
    searched = vector_records.search(
        services.memory, target.scope, context, space=space, query=body.vector,
        distance=body.distance, prefix=body.prefix, limit=body.limit, offset=body.offset,
    )
    answer: dict[str, Any] = {
        "data": [{"key": f.key, "value": f.value, "score": f.score} for f in searched.found],
        "resolved_scope_id": searched.resolved_scope_id,
    }
    if searched.refusal is not None:
        answer["refused"] = searched.refusal.code
    return answer


def _search_as(caller: Caller, target: Target, body: VectorSearch) -> dict[str, Any]:
    """``_searched`` for the request's principal (authenticated in the same thread)."""
    return _searched(caller.authenticate(), caller.services, target, body)


@searches.post(
    "/{scope}",
    **scoped(SearchResult, *BODY_ERRORS, 409),
)
async def search_records(
    body: VectorSearch,
    target: Target = QUERY_TARGET,
    caller: Caller = CALLER,
) -> dict[str, Any] | Response:
    """Search the records of a scope the caller may read by a query vector: `[{key, value, score}]`, best first.

    Scores the vectors written with `PUT …/{key}/vectors` exactly (cosine, inner
    product or negated L2 distance; a record scores its best vector). A space other
    than the stored one is 409 `embedding_space_mismatch`; a store with no vectors
    yet finds nothing.
    """
    # a scan that grows with the scope's vectors: the pool's long reads, at most ``long_reads`` at once
    answer = await caller.services.pool.long(_search_as, caller, target, body)
    if "refused" in answer:
        return refused_response(answer, answer["refused"])
    return answer
