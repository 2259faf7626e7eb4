"""Compaction over HTTP in two steps (issue 28 §2; decision 0084): plan, then apply with a summary.

The summary is a model call, which the server does not make: the caller asks for a
plan (``GET …/compact/plan?keep_tokens=N``: the rows beyond the budget and the
plan's id, a read, so viewing the session is enough), summarizes those rows with
its own model, and applies the plan (``POST …/compact`` with the plan's id and the
summary: a write, so the caller must drive a ``session`` scope, MEM-15). The plan
id names the rows it covers by their digest: a plan whose rows changed since
(another compaction, a clear) is refused 409 ``compaction_stale`` and changes
nothing; rows appended since stay live and are not summarized.

A history compacted elsewhere (the output of the Responses API's
``responses.compact``, which the Agents SDK puts in place of a session's history)
replaces the whole buffer in one request (``POST …/compact/replace``): every stored
row moves to the archive, as a planned compaction's do, instead of being cleared.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from flowmem.api import long_reads
from flowmem.api.fast.route import (
    TARGET_OPENAPI,
    WRITE_OPENAPI,
    MemoryCall,
    Operation,
)
from flowmem.api.models import REFUSED, CompactionReplace
from flowmem.api.routes.common import BODY_ERRORS, CALL, scoped, scoped_router
from flowmem.api.routes.incoming import rows_of
from flowmem.results import CompactionPlanResult

router = scoped_router()


class CompactionPlanRead(BaseModel):
    """The rows a compaction would archive, in order, and the id that applies it (null: none)."""

    plan: str | None = Field(description="Pass it to `POST …/compact`; null: nothing to compact.")
    messages: list[dict[str, Any]] = Field(description="The rows to summarize and archive.")
    archived: int = Field(description="How many rows the plan archives.")
    tokens: int = Field(description="Their tokens (the default counter).")
    kept: int = Field(description="The rows left live.")
    kept_tokens: int = Field(description="Their tokens.")
    resolved_scope_id: str
    refused: str | None = REFUSED


class CompactionApply(BaseModel):
    """A plan's id and the summary that replaces its rows: text, or one message (a row)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    plan: str = Field(
        pattern=r"^[0-9]+\.[0-9a-f]{64}$", description="The `plan` of `GET …/compact/plan`."
    )
    summary: Annotated[str, Field(min_length=1)] | dict[str, Any] = Field(
        description="The summary: text (stored as a user message) or one message that is "
        "not a tool result and declares no tool calls."
    )


class CompactionDone(BaseModel):
    """What a compaction did: rows archived (archive numbers `first`..`last`), the summary row."""

    compacted: bool
    archived: int
    tokens: int | None = Field(default=None, description="Counted at the plan: null here.")
    first: int | None
    last: int | None
    summary: dict[str, Any] | None
    count: int = Field(description="The buffer's live rows after.")
    attempts: int
    resolved_scope_id: str
    refused: str | None = REFUSED


@router.get(
    "/buffers/{scope}/{key}/compact/plan",
    **scoped(CompactionPlanRead, openapi=TARGET_OPENAPI),
)
async def compaction_plan(
    keep_tokens: int = Query(
        ge=0, le=2**62, description="Tokens the newest rows may keep (the default counter)."
    ),
    call: MemoryCall = CALL,
) -> dict[str, Any] | Response:
    """Plan a compaction: the oldest rows beyond `keep_tokens`, cut where a window may start.

    A read: nothing changes. 422 `window_too_small` when the newest turn alone passes
    the budget.
    """
    # its work grows with the buffer: off the event loop, its rows page by page (decision 0113)
    then = long_reads.answering(call.caller.services, _NEUTRAL_PLAN)
    return await call.in_thread(Operation.COMPACT_PLAN, then, keep_tokens=keep_tokens, paged=True)


_NEUTRAL_PLAN = long_reads.refused(CompactionPlanResult)
"""A refused plan's answer: no plan, and which refusal (decision 0047)."""


@router.post(
    "/buffers/{scope}/{key}/compact",
    **scoped(CompactionDone, *BODY_ERRORS, 409, openapi=WRITE_OPENAPI),
)
async def apply_compaction(
    body: CompactionApply, call: MemoryCall = CALL
) -> dict[str, Any] | Response:
    """Apply a plan: its rows move to the buffer's archive and `summary` takes their place.

    409 `compaction_stale`, nothing changed, when the plan's rows changed since it
    was made: plan again. The archived rows stay readable with `GET …?archived=true`
    until the buffer is cleared, its session deleted or its user erased.
    """
    return await call.answer(Operation.COMPACT, plan=body.plan, summary=body.summary)


@router.post(
    "/buffers/{scope}/{key}/compact/replace",
    **scoped(CompactionDone, *BODY_ERRORS, 409, openapi=WRITE_OPENAPI),
)
async def replace_compacted(
    body: CompactionReplace, call: MemoryCall = CALL
) -> dict[str, Any] | Response:
    """Replace the whole buffer by a history compacted elsewhere; every stored row is archived.

    For the output of a compaction model (`format` `responses`: the items of
    `responses.compact` as they came). In one transaction the stored rows move to
    the buffer's archive (readable with `GET …?archived=true`) and `messages` take
    their place, the first marked as their summary; an empty buffer just gets
    `messages` appended. 409 `compaction_stale`, nothing changed, when the buffer
    was written while this ran. At most 1000 messages (413).
    """
    return await call.answer(Operation.COMPACT_TO, messages=rows_of(body))
