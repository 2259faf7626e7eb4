"""Listing a scope's memory records with their expiry: ``GET /v1/memory/{scope}`` (the inspector's).

The scope id comes from the caller, as for every memory route
(``flowmem.api.fast.route.scope_context``): the caller's own user id, a session it
may view, or the shared scopes with ``memory:shared``. A refused scope lists nothing
and says why (``refused``, MEM-6, MEM-13). Keys only: a value is read with
``GET /v1/memory/{scope}/{key}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from flowmem.access import Principal
from flowmem.api.deps import CALLER, Caller
from flowmem.api.fast.route import Target, scope_context
from flowmem.api.models import NO_NUL
from flowmem.api.query import KnownQueryRoute
from flowmem.api.routes.common import PAGE_SIZE, QUERY_TARGET, clamp_limit, scoped
from flowmem.api.services import Services
from flowmem.scope import NAME_MAX, Refusal
from flowmem.store.listing import ListPage, listing_of
from flowmem.store.listing.records import successor

router = APIRouter(prefix="/v1/memory", tags=["memory"], route_class=KnownQueryRoute)


class ListedKey(BaseModel):
    """One live record: its key and when it expires (null: never)."""

    key: str
    expires_at: float | None


class RecordList(BaseModel):
    """A page of a scope's live records in key order; `next_start` continues it."""

    data: list[ListedKey]
    next_start: str | None
    resolved_scope_id: str
    refused: str | None = None


def list_keys(
    principal: Principal, services: Services, target: Target, prefix: str, start: str, limit: int
) -> dict[str, Any]:
    """A page of the live records of the caller's scope id under ``target.scope``."""
    context = scope_context(services.sessions, principal, target, write=False)
    resolved = services.memory.resolve("list", target.scope, prefix, context)
    if isinstance(resolved, Refusal):
        return {"data": [], "next_start": None, "resolved_scope_id": "", "refused": resolved.code}
    now = float(services.memory.clock())
    found = listing_of(services.store).list_records(
        ListPage(target.scope, resolved, prefix, now, max(start, prefix), limit + 1, values=False)
    )
    page = found[:limit]
    return {
        "data": [{"key": r.key, "expires_at": r.expires_at} for r in page],
        "next_start": successor(page[-1].key) if len(found) > limit else None,
        "resolved_scope_id": resolved,
    }


@router.get(
    "/{scope}",
    **scoped(RecordList),
)
async def list_records(
    target: Target = QUERY_TARGET,
    prefix: str = Query(
        "", max_length=NAME_MAX, pattern=NO_NUL, description="Only keys starting with this."
    ),
    start: str = Query(
        "", max_length=NAME_MAX + 1, pattern=NO_NUL, description="A `next_start`: continue there."
    ),
    limit: int = PAGE_SIZE,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """List the live memory records of a scope the caller may read: keys and expiry, in key order.

    The scope id is resolved as for a read of one record (`session_id` for
    `session`, the shared scopes' ids and `memory:shared` for those); a refused
    scope lists nothing and names the refusal in `refused`.
    """
    return await caller.in_store_thread(
        list_keys, caller.services, target, prefix, start, clamp_limit(limit)
    )
