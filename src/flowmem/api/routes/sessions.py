"""Sessions, their transcripts and turns: ``/v1/sessions``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Body, Path, Query, Response

from flowmem.access import Principal
from flowmem.api.deps import CALLER, Caller
from flowmem.api.idempotency import OPENAPI, Answer, Keyed, claimed_once
from flowmem.api.messages import MessageIn
from flowmem.api.models import (
    MessagePage,
    Pagination,
    ResetResult,
    Session,
    SessionCreate,
    SessionDetail,
    SessionList,
    StopResult,
    TranscriptRow,
    TurnCreate,
    TurnResult,
)
from flowmem.api.query import KnownQueryRoute
from flowmem.api.routes.common import AUTH_ERRORS, BODY_ERRORS, PAGE_SIZE, clamp_limit, errors
from flowmem.service.conversation import Conversation, conversations, session_buffers
from flowmem.sessions import SessionPage, SessionService, session_dict, transcript_dict
from flowmem.store.base import Idempotency, SessionRecord, WriteGuard


def _no_content(_result: Any) -> Response:
    """The answer of a delete: 204, no body (a keyed answer stores none either)."""
    return Response(status_code=204)


router = APIRouter(prefix="/v1/sessions", tags=["sessions"], route_class=KnownQueryRoute)

SessionId = Path(
    description="The session id: a UUID from `POST /v1/sessions`, or an id a write chose "
    "(an id that is not a usable identity is 404).",
    max_length=255,
)
MESSAGE_BODY = Body(description="The replacement message (role, content…).")
Seq = Path(ge=1, le=2**62, description="The message's sequence number in its session.")


def session_read(**declared: Any) -> dict[str, Any]:
    """The declaration of a read of one session the caller may view: its errors (the token's, 404, 422) and the ``declared`` rest."""
    return {"responses": errors(*AUTH_ERRORS, 404, 422), **declared}


def session_write(*statuses: int, **declared: Any) -> dict[str, Any]:
    """The declaration of a keyed write to one session: its errors (the token's, the access rules',
    404, 409 and ``statuses``), the ``Idempotency-Key`` header (``OPENAPI``) and the ``declared`` rest."""
    return {"responses": errors(*AUTH_ERRORS, 403, 404, 409, *statuses), "openapi_extra": OPENAPI, **declared}


@router.post(
    "",
    status_code=201,
    response_model=Session,
    responses=errors(*AUTH_ERRORS, 403, 409, *BODY_ERRORS),
    openapi_extra=OPENAPI,
)
async def create_session(
    body: SessionCreate,
    caller: Caller = CALLER,
) -> dict[str, Any] | Response:
    """Create a session owned by the caller (unowned for a service token). Needs `sessions:create`."""
    services = caller.services
    keyed = Keyed.of(caller.request)

    def create(principal: Principal, idem: Idempotency | None = None) -> SessionRecord:
        # stored only while the caller's token is valid (docs/decisions/0014)
        guard = WriteGuard(token_id=principal.token_id)
        since = services.recent_sessions.generation
        record = services.sessions.create(
            principal, body.name, body.agent, body.metadata, guard=guard, idempotency=idem
        )
        # the session as stored: this worker's next write to it need not look it up (0034)
        services.recent_sessions.put(record.id, record, since)
        return record

    if keyed is None:
        return session_dict(await caller.in_store_thread(create))

    def job(principal: Principal) -> Answer:
        return keyed.fused(principal, lambda idem: create(principal, idem), session_dict, 201)

    return (await caller.in_store_thread(job)).response()


@router.get("", response_model=SessionList, responses=errors(*AUTH_ERRORS, 403, 422))
async def list_sessions(
    limit: int = PAGE_SIZE,
    offset: int = Query(0, ge=0, le=2**62),
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """List the sessions the caller may view, newest first, with the total under the same filter."""
    services = caller.services
    size = clamp_limit(limit)
    page, found = await caller.in_store_thread(_page_with_conversations, services.sessions, size, offset)
    return {
        "data": [session_dict(s, found.get(s.id)) for s in page.sessions],
        "pagination": Pagination(
            total=page.total, limit=size, offset=offset, has_more=offset + size < page.total
        ).model_dump(),
    }


def _page_with_conversations(
    principal: Principal, sessions: SessionService, size: int, offset: int
) -> tuple[SessionPage, dict[str, Conversation]]:
    """A page of sessions and each one's conversation (a few reads for the page, none per session)."""
    page = sessions.list_sessions(principal, size, offset)
    return page, conversations(sessions.store, [s.id for s in page.sessions])


def _detail(principal: Principal, sessions: SessionService, session_id: str) -> dict[str, Any]:
    """One session the caller may view, its conversation and its buffers."""
    session = sessions.get(principal, session_id)
    view = session_buffers(sessions.store, session.id)
    return {
        **session_dict(session, view.conversation),
        "buffers": [b.to_dict() for b in view.buffers],
        "buffers_more": view.more,
    }


@router.get("/{session_id}", **session_read(response_model=SessionDetail))
async def get_session(
    session_id: str = SessionId,
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Read one session: where its conversation is (`conversation`) and every buffer it has (`buffers`)."""
    services = caller.services
    return await caller.in_store_thread(_detail, services.sessions, session_id)


@router.delete("/{session_id}", **session_write(422, status_code=204))
async def delete_session(
    session_id: str = SessionId,
    caller: Caller = CALLER,
) -> Response:
    """Delete a session with its transcript and its whole `session` scope (owner or admin)."""
    services = caller.services

    def delete(principal: Principal) -> None:
        services.sessions.delete(principal, session_id)
        services.forget()  # no write of this process goes by the deleted session (decision 0034)

    deleted: Response = await claimed_once(caller, delete, _no_content, 204)
    return deleted


@router.get("/{session_id}/messages", **session_read(response_model=MessagePage))
async def list_messages(
    session_id: str = SessionId,
    since: int | None = Query(None, ge=0, le=2**62, description="Only messages with seq > since."),
    before: int | None = Query(
        None, ge=0, le=2**62, description="Only messages with seq < before."
    ),
    limit: int = PAGE_SIZE,
    newest_first: bool = Query(False),
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Poll a session's transcript by sequence cursor."""
    services = caller.services
    size = clamp_limit(limit)
    items, has_more = await caller.in_store_thread(
        services.sessions.messages, session_id, since, before, size, newest_first
    )
    data = [transcript_dict(item) for item in items]
    last = items[-1].seq if items else None
    return {
        "data": data,
        "has_more": has_more,
        "next_since": last if has_more and not newest_first else None,
        "next_before": last if has_more and newest_first else None,
    }


@router.post(
    "/{session_id}/turns",
    status_code=202,
    response_model=TurnResult,
    responses={
        200: {"model": TurnResult, "description": "With `wait=true`: the turn has finished."},
        **errors(*AUTH_ERRORS, 403, 404, 409, *BODY_ERRORS),
    },
    openapi_extra=OPENAPI,
)
async def send_turn(
    body: TurnCreate,
    response: Response,
    session_id: str = SessionId,
    wait: bool = Query(False, description="Wait for the turn to finish (200) instead of 202."),
    caller: Caller = CALLER,
) -> dict[str, Any] | Response:
    """Send a user turn: a drive action (MEM-9), run under the session owner's identity (MEM-8)."""
    services = caller.services

    def turn(principal: Principal) -> dict[str, Any]:
        # its writes commit only while the caller's token is valid (docs/decisions/0014)
        guard = WriteGuard(token_id=principal.token_id)
        return services.sessions.send_turn(
            principal, session_id, body.content, wait=wait, guard=guard
        )

    if wait:
        response.status_code = 200  # a keyed answer is a Response with its own status
    # a turn may wait for a model: the general thread pool, not the bounded store pool
    result: dict[str, Any] | Response = await claimed_once(
        caller, turn, status=200 if wait else 202, long=True
    )
    return result


DriveAction = Callable[[SessionService, Principal, str], dict[str, Any]]


def _drive_route(action: str, method: DriveAction, model: type, doc: str) -> None:
    """Declare ``POST /{session_id}/{action}``: a drive action with no body, ``method`` of the session service."""

    async def endpoint(session_id: str = SessionId, caller: Caller = CALLER) -> dict[str, Any] | Response:
        sessions = caller.services.sessions
        done: dict[str, Any] | Response = await claimed_once(caller, lambda p: method(sessions, p, session_id))
        return done

    endpoint.__doc__ = doc  # the operation's description
    # the operation's id and summary are made from its name
    declared = session_write(422, name=f"{action}_session", response_model=model)
    router.add_api_route(f"/{{session_id}}/{action}", endpoint, methods=["POST"], **declared)


DRIVE_ROUTES: tuple[tuple[str, DriveAction, type, str], ...] = (
    ("stop", SessionService.stop, StopResult, "Stop the running turn (a drive action)."),
    (
        "reset",
        SessionService.reset,
        ResetResult,
        "Clear the session's conversation buffer (a drive action); the transcript stays.",
    ),
)
for _route in DRIVE_ROUTES:
    _drive_route(*_route)


@router.patch("/{session_id}/messages/{seq}", **session_write(*BODY_ERRORS, response_model=TranscriptRow))
async def edit_message(
    session_id: str = SessionId,
    seq: int = Seq,
    message: MessageIn = MESSAGE_BODY,
    caller: Caller = CALLER,
) -> dict[str, Any] | Response:
    """Replace one transcript message. Admin only (MEM-15); anyone else gets 403."""
    services = caller.services

    def edit(p: Principal) -> Any:
        return services.sessions.edit_message(p, session_id, seq, message)

    edited: dict[str, Any] | Response = await claimed_once(caller, edit, transcript_dict)
    return edited


@router.delete("/{session_id}/messages/{seq}", **session_write(422, status_code=204))
async def delete_message(
    session_id: str = SessionId,
    seq: int = Seq,
    caller: Caller = CALLER,
) -> Response:
    """Delete one transcript message. Admin only (MEM-15); anyone else gets 403."""
    services = caller.services

    def delete(p: Principal) -> Any:
        return services.sessions.delete_message(p, session_id, seq)

    deleted: Response = await claimed_once(caller, delete, _no_content, 204)
    return deleted
