"""Conversation buffers (``/v1/buffers``) and memory records (``/v1/memory``).

The scope id comes from the caller, never from the request (``flowmem.api.scopes``);
a refused identity scope returns the neutral result with ``resolved_scope_id: ""``
and touches no storage (MEM-6, MEM-7, MEM-13).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, Path, Query

from flowmem.access import Principal
from flowmem.api.deps import CALLER, Caller
from flowmem.api.models import BufferAppend, BufferResult, MemoryWrite, ReadResult, WriteResult
from flowmem.api.routes.common import AUTH_ERRORS, BODY_ERRORS, errors
from flowmem.api.scopes import scope_context
from flowmem.errors import PayloadTooLargeError

router = APIRouter(prefix="/v1", tags=["memory"])

MAX_BATCH = 1000  # messages per append request

ScopeName = Literal["global", "workflow", "pipeline", "execution", "session", "user"]
ScopePath = Path(description="The memory scope.")
KeyPath = Path(min_length=1, max_length=255, description="The buffer or record key.")
SessionQuery = Query(
    None, max_length=64, description="For scope `session`: a session the caller may view/drive."
)
WorkflowQuery = Query(None, max_length=255, description="For scope `workflow`.")
PipelineQuery = Query(None, max_length=255, description="For scope `pipeline`.")
ExecutionQuery = Query(None, max_length=255, description="For scope `execution`.")

SCOPE_ERRORS = (*AUTH_ERRORS, 403, 404, 422)


@router.get("/buffers/{scope}/{key}", response_model=BufferResult, responses=errors(*SCOPE_ERRORS))
async def load_buffer(
    scope: ScopeName = ScopePath,
    key: str = KeyPath,
    last: int | None = Query(None, ge=0, le=2**62, description="Only the last N messages."),
    session_id: str | None = SessionQuery,
    workflow_id: str | None = WorkflowQuery,
    pipeline_id: str | None = PipelineQuery,
    execution_id: str | None = ExecutionQuery,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Load a conversation buffer (optionally only its last N messages)."""
    services = caller.services

    def work(principal: Principal) -> dict[str, Any]:
        context = scope_context(
            services.sessions,
            principal,
            scope,
            write=False,
            session_id=session_id,
            workflow_id=workflow_id,
            pipeline_id=pipeline_id,
            execution_id=execution_id,
        )
        return services.memory.load(scope, key, context, last=last).to_dict()

    done: dict[str, Any] = await caller.run(work)
    return done


@router.post(
    "/buffers/{scope}/{key}",
    response_model=BufferResult,
    responses=errors(*SCOPE_ERRORS, *BODY_ERRORS),
)
async def append_buffer(
    body: BufferAppend,
    scope: ScopeName = ScopePath,
    key: str = KeyPath,
    session_id: str | None = SessionQuery,
    workflow_id: str | None = WorkflowQuery,
    pipeline_id: str | None = PipelineQuery,
    execution_id: str | None = ExecutionQuery,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Append one message or a list to a buffer (MEM-1, 2, 3, 10, 12, 14 apply).

    Returns the buffer after the append unless `return_messages` is false. At most
    1000 messages per request (413 beyond).
    """
    services = caller.services
    messages = body.messages if isinstance(body.messages, list) else [body.messages]
    if len(messages) > MAX_BATCH:
        raise PayloadTooLargeError(
            f"at most {MAX_BATCH} messages per append, got {len(messages)}", field="messages"
        )

    def work(principal: Principal) -> dict[str, Any]:
        context = scope_context(
            services.sessions,
            principal,
            scope,
            write=True,
            session_id=session_id,
            workflow_id=workflow_id,
            pipeline_id=pipeline_id,
            execution_id=execution_id,
        )
        result = services.memory.append(
            scope,
            key,
            messages,
            context,
            body.max_messages,
            return_messages=body.return_messages,
        )
        return result.to_dict()

    done: dict[str, Any] = await caller.run(work)
    return done


@router.delete(
    "/buffers/{scope}/{key}", response_model=WriteResult, responses=errors(*SCOPE_ERRORS)
)
async def clear_buffer(
    scope: ScopeName = ScopePath,
    key: str = KeyPath,
    session_id: str | None = SessionQuery,
    workflow_id: str | None = WorkflowQuery,
    pipeline_id: str | None = PipelineQuery,
    execution_id: str | None = ExecutionQuery,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Delete every message of a buffer."""
    services = caller.services

    def work(principal: Principal) -> dict[str, Any]:
        context = scope_context(
            services.sessions,
            principal,
            scope,
            write=True,
            session_id=session_id,
            workflow_id=workflow_id,
            pipeline_id=pipeline_id,
            execution_id=execution_id,
        )
        return services.memory.clear(scope, key, context).to_dict()

    done: dict[str, Any] = await caller.run(work)
    return done


def _parse_default(text: str | None) -> Any:
    """JSON text becomes its value; any other text is the default as a string."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


@router.get("/memory/{scope}/{key}", response_model=ReadResult, responses=errors(*SCOPE_ERRORS))
async def read_record(
    scope: ScopeName = ScopePath,
    key: str = KeyPath,
    default: str | None = Query(
        None,
        max_length=65536,
        description="Returned as `value` when not found: parsed as JSON when it is JSON "
        '(`42`, `"x"`, `[1]`), otherwise the text itself.',
    ),
    session_id: str | None = SessionQuery,
    workflow_id: str | None = WorkflowQuery,
    pipeline_id: str | None = PipelineQuery,
    execution_id: str | None = ExecutionQuery,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Read a memory record; `found: false` and the default when absent, expired or refused."""
    services = caller.services
    fallback = _parse_default(default)

    def work(principal: Principal) -> dict[str, Any]:
        context = scope_context(
            services.sessions,
            principal,
            scope,
            write=False,
            session_id=session_id,
            workflow_id=workflow_id,
            pipeline_id=pipeline_id,
            execution_id=execution_id,
        )
        return services.memory.read(scope, key, context, default=fallback).to_dict()

    done: dict[str, Any] = await caller.run(work)
    return done


@router.put(
    "/memory/{scope}/{key}",
    response_model=WriteResult,
    responses=errors(*SCOPE_ERRORS, *BODY_ERRORS),
)
async def write_record(
    body: MemoryWrite,
    scope: ScopeName = ScopePath,
    key: str = KeyPath,
    session_id: str | None = SessionQuery,
    workflow_id: str | None = WorkflowQuery,
    pipeline_id: str | None = PipelineQuery,
    execution_id: str | None = ExecutionQuery,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Write a memory record (any JSON value) with an optional TTL in seconds."""
    services = caller.services

    def work(principal: Principal) -> dict[str, Any]:
        context = scope_context(
            services.sessions,
            principal,
            scope,
            write=True,
            session_id=session_id,
            workflow_id=workflow_id,
            pipeline_id=pipeline_id,
            execution_id=execution_id,
        )
        return services.memory.write(scope, key, body.value, context, ttl=body.ttl).to_dict()

    done: dict[str, Any] = await caller.run(work)
    return done


@router.delete("/memory/{scope}/{key}", response_model=WriteResult, responses=errors(*SCOPE_ERRORS))
async def delete_record(
    scope: ScopeName = ScopePath,
    key: str = KeyPath,
    session_id: str | None = SessionQuery,
    workflow_id: str | None = WorkflowQuery,
    pipeline_id: str | None = PipelineQuery,
    execution_id: str | None = ExecutionQuery,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Delete a memory record."""
    services = caller.services

    def work(principal: Principal) -> dict[str, Any]:
        context = scope_context(
            services.sessions,
            principal,
            scope,
            write=True,
            session_id=session_id,
            workflow_id=workflow_id,
            pipeline_id=pipeline_id,
            execution_id=execution_id,
        )
        return services.memory.delete(scope, key, context).to_dict()

    done: dict[str, Any] = await caller.run(work)
    return done
