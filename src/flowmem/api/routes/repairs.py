"""A buffer's repair log over HTTP (issue 37 §2): ``GET /v1/buffers/{scope}/{key}/repairs``.

A read under the buffer's own access rules: viewing the session is enough for the
``session`` scope, and a caller who may not view it gets the buffer read's 404. Paged
newest first: ``next_before`` is the ``before`` of the older page.
"""

from __future__ import annotations

from typing import Any

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from flowmem.api.fast.route import TARGET_OPENAPI, MemoryCall, Operation
from flowmem.api.models import REFUSED
from flowmem.api.routes.common import CALL, scoped, scoped_router
from flowmem.store.repairs import PAGE, PAGE_MAX

router = scoped_router()


class RepairEntryRead(BaseModel):
    """One change the memory made to the buffer besides adding rows (docs/memory.md, "The repair log")."""

    seq: int = Field(description="The entry's number in this buffer's log, from 1, never reused.")
    at: float = Field(description="When, in seconds since the epoch (the server's clock).")
    rule: str = Field(
        description="`MEM-3` placeholders inserted for unanswered calls, `MEM-10` placeholders "
        "replaced by their real result, `MEM-1` results refused as duplicates, `MEM-2` "
        "assistant turns refused as duplicates, `window` rows a window evicted, `compaction` "
        "rows a compaction archived, `MEM-5` entries a stored read's normalization dropped, "
        "or the code of a write refused whole that named the buffer (`buffer_full`)."
    )
    kind: str = Field(
        description="What the entry is, for a display: `heal`, `replace`, `duplicate`, `evict`, "
        "`compact`, `normalize` or `refuse`."
    )
    call_ids: list[str] = Field(description="The call ids involved, in order.")
    count: int = Field(description="How many rows were inserted, replaced, refused, removed or dropped.")
    positions: list[int] = Field(
        description="Row indexes: for a heal or a replacement, the indexes in the buffer now of "
        "the rows it wrote (none once they left); for an eviction or a compaction, the indexes "
        "the removed rows had just before it; none for a refusal or a drop."
    )
    archived: list[int] | None = Field(
        None, description="A compaction's archive numbers `[first, last]` (read with `archived=true`)."
    )


class RepairLogRead(BaseModel):
    """A page of a buffer's repair log, newest first."""

    repairs: list[RepairEntryRead]
    next_before: int | None = Field(description="`before` of the older page; null: none.")
    resolved_scope_id: str
    refused: str | None = REFUSED


@router.get(
    "/buffers/{scope}/{key}/repairs",
    **scoped(RepairLogRead, openapi=TARGET_OPENAPI),
)
async def read_repairs(
    before: int | None = Query(
        None, ge=0, le=2**62, description="Only entries numbered below it (the older page)."
    ),
    limit: int = Query(PAGE, ge=0, le=PAGE_MAX, description="Entries in the page."),
    call: MemoryCall = CALL,
) -> dict[str, Any] | Response:
    """Read the buffer's repair log: what the memory changed, and when, newest first.

    Kept: a buffer's newest 1,000 entries, until the buffer is cleared, its
    session deleted or its user erased. A read: viewing the buffer is enough.
    """
    return await call.answer(Operation.REPAIRS, before=before, limit=limit)
