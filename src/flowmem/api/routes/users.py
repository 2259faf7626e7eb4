"""Users: ``/v1/users`` (erasing everything stored for one user id)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Path, Response

from flowmem.access import Principal
from flowmem.api.deps import CALLER, Caller
from flowmem.api.idempotency import OPENAPI, claimed_once
from flowmem.api.models import UserErasure
from flowmem.api.query import KnownQueryRoute
from flowmem.api.routes.common import AUTH_ERRORS, errors
from flowmem.scope import NAME_MAX

router = APIRouter(prefix="/v1/users", tags=["users"], route_class=KnownQueryRoute)

UserId = Path(description="The user id whose data is erased.", min_length=1, max_length=NAME_MAX)


@router.delete(
    "/{user_id}",
    response_model=UserErasure,
    responses=errors(*AUTH_ERRORS, 403, 409, 422),
    openapi_extra=OPENAPI,
)
async def erase_user(
    user_id: str = UserId,
    caller: Caller = CALLER,
) -> dict[str, Any] | Response:
    """Erase everything stored for a user (admin only).

    Every session the user owns (with its transcript and `session` scope), the
    user's `user` scope and its API tokens are deleted in one transaction. 409,
    and nothing deleted, while one of its sessions is running a turn. An id that
    is not a usable identity owns nothing: `user_id` null, every count 0 — except
    the data stored before decision 0016 under a spelling now refused (a
    placeholder such as `None`), which is erased too (`user_id` stays null).
    """
    services = caller.services

    def erase(principal: Principal) -> dict[str, Any]:
        canonical, erased = services.sessions.erase_user(principal, user_id)
        services.forget()  # this process serves no token or session it erased (decision 0034)
        return {"user_id": canonical, **asdict(erased)}

    # an erasure of the caller's own user deletes its key too (nothing is kept)
    erased: dict[str, Any] | Response = await claimed_once(caller, erase)
    return erased
