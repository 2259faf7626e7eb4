"""Conversation buffers (``/v1/buffers``) and memory records (``/v1/memory``).

The scope id comes from the caller, never from the request (``flowmem.api.scopes``);
a refused identity scope returns the neutral result with ``resolved_scope_id: ""``
and touches no storage (MEM-6, MEM-7, MEM-13).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from fastapi import APIRouter, Depends, Path, Query

from flowmem.access import Principal
from flowmem.api.deps import CALLER, Caller
from flowmem.api.models import BufferAppend, BufferResult, MemoryWrite, ReadResult, WriteResult
from flowmem.api.routes.common import AUTH_ERRORS, BODY_ERRORS, errors
from flowmem.api.scopes import scope_context
from flowmem.errors import PayloadTooLargeError
from flowmem.scope import ExecutionContext

router = APIRouter(prefix="/v1", tags=["memory"])

MAX_BATCH = 1000  # messages per append request

ScopeName = Literal["global", "workflow", "pipeline", "execution", "session", "user"]
SCOPE_ERRORS = (*AUTH_ERRORS, 403, 404, 422)


class _Result(Protocol):
    """What the memory service returns: a result with its JSON form."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""


ScopePath = Path(description="The memory scope.")
KeyPath = Path(min_length=1, max_length=255, description="The buffer or record key.")
SessionQuery = Query(
    None, max_length=64, description="For scope `session`: a session the caller may view/drive."
)
WorkflowQuery = Query(None, max_length=255, description="For scope `workflow`.")
PipelineQuery = Query(None, max_length=255, description="For scope `pipeline`.")
ExecutionQuery = Query(None, max_length=255, description="For scope `execution`.")


@dataclass(frozen=True)
class Target:
    """Where a memory request goes: the scope and key of the path, the scope ids of the query."""

    scope: ScopeName
    key: str
    session_id: str | None = None
    workflow_id: str | None = None
    pipeline_id: str | None = None
    execution_id: str | None = None

    def context(self, caller: Caller, principal: Principal, *, write: bool) -> ExecutionContext:
        """Return the execution context ``principal`` works in at this target (blocking)."""
        return scope_context(
            caller.services.sessions,
            principal,
            self.scope,
            write=write,
            session_id=self.session_id,
            workflow_id=self.workflow_id,
            pipeline_id=self.pipeline_id,
            execution_id=self.execution_id,
        )

    async def run(
        self, caller: Caller, work: Callable[[ExecutionContext], _Result], *, write: bool
    ) -> dict[str, Any]:
        """Authenticate, resolve the scope and call ``work(context)`` in one store call.

        Every ``work`` here reads, or changes one record or buffer as its last step,
        so it may run on the event loop (``Caller.run_short``).
        """

        def job(principal: Principal) -> dict[str, Any]:
            return work(self.context(caller, principal, write=write)).to_dict()

        return await caller.run_short(job)


async def request_target(
    scope: ScopeName = ScopePath,
    key: str = KeyPath,
    session_id: str | None = SessionQuery,
    workflow_id: str | None = WorkflowQuery,
    pipeline_id: str | None = PipelineQuery,
    execution_id: str | None = ExecutionQuery,
) -> Target:
    """The dependency every route here declares its path and scope parameters through.

    A coroutine on purpose: FastAPI runs a plain function or a class dependency in
    the thread pool, a thread hop per request for nothing.
    """
    return Target(scope, key, session_id, workflow_id, pipeline_id, execution_id)


TARGET = Depends(request_target)


@router.get("/buffers/{scope}/{key}", response_model=BufferResult, responses=errors(*SCOPE_ERRORS))
async def load_buffer(
    last: int | None = Query(None, ge=0, le=2**62, description="Only the last N messages."),
    target: Target = TARGET,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Load a conversation buffer (optionally only its last N messages)."""
    memory = caller.services.memory
    return await target.run(
        caller,
        lambda context: memory.load(target.scope, target.key, context, last=last),
        write=False,
    )


@router.post(
    "/buffers/{scope}/{key}",
    response_model=BufferResult,
    responses=errors(*SCOPE_ERRORS, *BODY_ERRORS),
)
async def append_buffer(
    body: BufferAppend,
    target: Target = TARGET,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Append one message or a list to a buffer (MEM-1, 2, 3, 10, 12, 14 apply).

    Returns the buffer after the append unless `return_messages` is false. At most
    1000 messages per request (413 beyond).
    """
    memory = caller.services.memory
    messages = body.messages if isinstance(body.messages, list) else [body.messages]
    if len(messages) > MAX_BATCH:
        raise PayloadTooLargeError(
            f"at most {MAX_BATCH} messages per append, got {len(messages)}", field="messages"
        )
    return await target.run(
        caller,
        lambda context: memory.append(
            target.scope,
            target.key,
            messages,
            context,
            body.max_messages,
            return_messages=body.return_messages,
        ),
        write=True,
    )


@router.delete(
    "/buffers/{scope}/{key}", response_model=WriteResult, responses=errors(*SCOPE_ERRORS)
)
async def clear_buffer(target: Target = TARGET, caller: Caller = CALLER) -> dict[str, Any]:
    """Delete every message of a buffer."""
    memory = caller.services.memory
    return await target.run(
        caller, lambda context: memory.clear(target.scope, target.key, context), write=True
    )


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
    default: str | None = Query(
        None,
        max_length=65536,
        description="Returned as `value` when not found: parsed as JSON when it is JSON "
        '(`42`, `"x"`, `[1]`), otherwise the text itself.',
    ),
    target: Target = TARGET,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Read a memory record; `found: false` and the default when absent, expired or refused."""
    memory = caller.services.memory
    fallback = _parse_default(default)
    return await target.run(
        caller,
        lambda context: memory.read(target.scope, target.key, context, default=fallback),
        write=False,
    )


@router.put(
    "/memory/{scope}/{key}",
    response_model=WriteResult,
    responses=errors(*SCOPE_ERRORS, *BODY_ERRORS),
)
async def write_record(
    body: MemoryWrite, target: Target = TARGET, caller: Caller = CALLER
) -> dict[str, Any]:
    """Write a memory record (any JSON value) with an optional TTL in seconds."""
    memory = caller.services.memory
    return await target.run(
        caller,
        lambda context: memory.write(target.scope, target.key, body.value, context, ttl=body.ttl),
        write=True,
    )


@router.delete("/memory/{scope}/{key}", response_model=WriteResult, responses=errors(*SCOPE_ERRORS))
async def delete_record(target: Target = TARGET, caller: Caller = CALLER) -> dict[str, Any]:
    """Delete a memory record."""
    memory = caller.services.memory
    return await target.run(
        caller, lambda context: memory.delete(target.scope, target.key, context), write=True
    )
