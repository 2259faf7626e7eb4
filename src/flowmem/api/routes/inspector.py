"""The read-only routes the inspector (``/ui``) needs: what the caller may do, a thread's checkpoints.

``GET /v1/sessions/{id}/access`` answers, for a session the caller may view, the
access decisions of ``flowmem.access.decide`` the page uses to show or hide its
actions (MEM-9: viewing never implies driving); the routes that act check again.
``GET /v1/sessions/{id}/checkpoints`` lists a LangGraph thread's checkpoints
(``flowmem.integrations.langgraph``: a thread is a session) newest first, each with
the messages of its message channels, read from the session buffers they reference.
"""

from __future__ import annotations

import json
from itertools import islice
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from flowmem.access import Principal, decide
from flowmem.api.deps import CALLER, Caller
from flowmem.api.models import NO_NUL
from flowmem.api.query import KnownQueryRoute
from flowmem.api.routes.common import PAGE_SIZE, clamp_limit
from flowmem.api.routes.sessions import SessionId, session_read
from flowmem.sessions import SessionService
from flowmem.store.checkpoints import ROWS_TYPE, CheckpointFilter, StoredCheckpoint, checkpoints_of

router = APIRouter(prefix="/v1/sessions", tags=["inspector"], route_class=KnownQueryRoute)

# what the page shows or hides -> the action ``decide`` judges
ACTIONS = {
    "view": "view",
    "drive": "drive",
    "delete": "delete_session",
    "edit_messages": "edit_message",
}


class SessionAccess(BaseModel):
    """What the caller may do to one session it may view."""

    view: bool
    drive: bool
    delete: bool
    edit_messages: bool


class Checkpoint(BaseModel):
    """One checkpoint of a thread and the messages of its message channels."""

    checkpoint_id: str
    parent_id: str | None
    ns: str
    run_id: str | None
    messages: dict[str, list[dict[str, Any]]]
    lines: dict[str, str]
    """Each message channel's session buffer key (read it with ``GET /v1/buffers/session/{key}``)."""


class CheckpointPage(BaseModel):
    """A thread's checkpoints, newest first."""

    data: list[Checkpoint]
    has_more: bool


def session_access(
    principal: Principal, sessions: SessionService, session_id: str
) -> dict[str, bool]:
    """The access decisions on a session the caller may view (404 when it may not)."""
    session = sessions.get(principal, session_id)
    return {name: decide(principal, action, session).allowed for name, action in ACTIONS.items()}


def _checkpoint(store: Any, stored: StoredCheckpoint) -> dict[str, Any]:
    """A checkpoint with the rows of each message channel (the lines its versions reference)."""
    found = checkpoints_of(store)
    versions = {channel: str(v) for channel, v in stored.versions.items()}
    messages: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, str] = {}
    for blob in found.get_blobs(stored.thread_id, stored.ns, versions):
        kind, value = blob.value
        if kind == ROWS_TYPE:
            line = json.loads(value)
            keys[blob.channel] = line["key"]
            messages[blob.channel] = found.line_rows(stored.thread_id, line["key"], line["count"])
    return {
        "checkpoint_id": stored.checkpoint_id,
        "parent_id": stored.parent_id,
        "ns": stored.ns,
        "run_id": stored.run_id,
        "messages": messages,
        "lines": keys,
    }


def thread_checkpoints(
    principal: Principal, sessions: SessionService, session_id: str, limit: int, before: str | None
) -> dict[str, Any]:
    """A page of the thread's checkpoints, newest first (none when the store keeps none)."""
    session = sessions.get(principal, session_id)
    if getattr(sessions.store, "checkpoints", None) is None:
        return {"data": [], "has_more": False}
    asked = CheckpointFilter(session.id, None, None, before)
    listed = checkpoints_of(sessions.store).list_checkpoints(asked)
    page = list(islice(listed, limit + 1))
    data = [_checkpoint(sessions.store, c) for c in page[:limit]]
    return {"data": data, "has_more": len(page) > limit}


@router.get("/{session_id}/access", **session_read(response_model=SessionAccess))
async def get_access(session_id: str = SessionId, caller: Caller = CALLER) -> dict[str, bool]:
    """What the caller may do to a session it may view: `drive` (send a turn, stop, reset), `delete`, `edit_messages`.

    For showing or hiding actions only: each action's route decides again.
    """
    services = caller.services
    return await caller.in_store_thread(session_access, services.sessions, session_id)


@router.get("/{session_id}/checkpoints", **session_read(response_model=CheckpointPage))
async def list_checkpoints(
    session_id: str = SessionId,
    limit: int = PAGE_SIZE,
    before: str | None = Query(
        None,
        max_length=255,
        pattern=NO_NUL,
        description="Only checkpoints older than this checkpoint id.",
    ),
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """A LangGraph thread's checkpoints (the thread is this session), newest first, with their messages.

    Each checkpoint lists the rows of its message channels as they were at that
    checkpoint (time travel); other channel values are LangGraph's serialized
    objects and are not shown. Empty for a session no checkpointer wrote.
    """
    services = caller.services
    size = clamp_limit(limit)
    return await caller.in_store_thread(
        thread_checkpoints, services.sessions, session_id, size, before
    )
