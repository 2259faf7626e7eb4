"""Stateless endpoints over the core rules: ``/v1/normalize`` and ``/v1/check``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from flowmem.api.deps import CALLER, Caller
from flowmem.api.models import CheckOut, MessageList, NormalizeOut
from flowmem.api.routes.common import AUTH_ERRORS, BODY_ERRORS, errors
from flowmem.core import check_sendable, check_storable, normalize

router = APIRouter(prefix="/v1", tags=["stateless"])


def _messages(body: MessageList | list[Any]) -> list[Any]:
    """Return the messages of a body; text that cannot be served is ``invalid_text`` (422)."""
    messages = body.messages if isinstance(body, MessageList) else body
    check_storable(messages, "body.messages" if isinstance(body, MessageList) else "body")
    return messages


@router.post(
    "/normalize", response_model=NormalizeOut, responses=errors(*AUTH_ERRORS, *BODY_ERRORS)
)
async def normalize_messages(
    body: MessageList | list[Any],
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """Normalize a message list so a provider accepts it (MEM-5); a bare list or `{messages}`."""
    result = await caller.run_unbounded(lambda principal: normalize(_messages(body)))
    return {"messages": result.messages, "dropped": result.dropped}


@router.post("/check", response_model=CheckOut, responses=errors(*AUTH_ERRORS, *BODY_ERRORS))
async def check_messages(
    body: MessageList | list[Any],
    caller: Caller = CALLER,
) -> dict[str, Any]:
    """List what a provider would reject in a message list; a bare list or `{messages}`."""
    violations = await caller.run_unbounded(lambda principal: check_sendable(_messages(body)))
    return {"sendable": not violations, "violations": [v.to_dict() for v in violations]}
