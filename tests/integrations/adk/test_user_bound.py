"""An ADK service built for a user acts only as that user (issue 38 §3, decision 0109).

ADK's ``list_sessions(user_id=None)`` lists every user's sessions of the app: its
contract, kept for a service built for no user (an operator's). A service built with
``context=ExecutionContext(user_id=…)`` lists that user's sessions only, and a call
naming another user raises ``AccessDeniedError`` (MEM-9) before anything is read or
written. A context whose user id is not usable is refused at construction (MEM-6).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("google.adk")

from flowmem.errors import AccessDeniedError, ScopeRefusedError
from flowmem.integrations.adk import FlowmemSessionService
from flowmem.scope import ExecutionContext
from tests.integrations.adk.events import user

APP = "shop"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _for(service: FlowmemSessionService, who: str) -> FlowmemSessionService:
    """A service over the same database, built for ``who``."""
    return FlowmemSessionService(service.memory, context=ExecutionContext(user_id=who))


def _two_users(service: FlowmemSessionService) -> None:
    for who in ("alice", "bob"):
        created = _run(service.create_session(app_name=APP, user_id=who, session_id=f"{who}-chat"))
        _run(service.append_event(created, user(f"{who} SECRET", 1)))


def test_mem_9_a_service_built_for_a_user_lists_only_its_sessions(flowmem_service: FlowmemSessionService) -> None:
    _two_users(flowmem_service)
    everyone = _run(flowmem_service.list_sessions(app_name=APP)).sessions
    assert sorted(s.user_id for s in everyone) == ["alice", "bob"]  # ADK's contract, for an operator
    bobs = _for(flowmem_service, "bob")
    listed = _run(bobs.list_sessions(app_name=APP)).sessions
    assert [(s.user_id, s.id) for s in listed] == [("bob", "bob-chat")]
    assert [s.id for s in _run(bobs.list_sessions(app_name=APP, user_id="bob")).sessions] == ["bob-chat"]


def test_mem_9_a_service_built_for_a_user_refuses_a_call_naming_another(
    flowmem_service: FlowmemSessionService,
) -> None:
    _two_users(flowmem_service)
    bobs = _for(flowmem_service, "bob")
    alices = _run(flowmem_service.get_session(app_name=APP, user_id="alice", session_id="alice-chat"))
    calls: list[Callable[[], Any]] = [
        lambda: bobs.list_sessions(app_name=APP, user_id="alice"),
        lambda: bobs.get_session(app_name=APP, user_id="alice", session_id="alice-chat"),
        lambda: bobs.get_user_state(app_name=APP, user_id="alice"),
        lambda: bobs.delete_session(app_name=APP, user_id="alice", session_id="alice-chat"),
        lambda: bobs.create_session(app_name=APP, user_id="alice", session_id="bobs-for-alice"),
        lambda: bobs.append_event(alices, user("bob writes", 2)),
    ]
    for call in calls:
        with pytest.raises(AccessDeniedError) as refused:
            _run(call())
        assert refused.value.rule == "MEM-9"
    after = _run(flowmem_service.get_session(app_name=APP, user_id="alice", session_id="alice-chat"))
    assert after is not None and len(after.events) == len(alices.events) == 1
    assert _run(flowmem_service.get_session(app_name=APP, user_id="alice", session_id="bobs-for-alice")) is None


@pytest.mark.parametrize("who", ["None", " ", "0"])
def test_mem_6_a_context_user_that_is_not_usable_is_refused_at_construction(
    flowmem_service: FlowmemSessionService, who: str
) -> None:
    with pytest.raises(ScopeRefusedError) as refused:
        _for(flowmem_service, who)
    assert refused.value.details["rule"] == "MEM-6"
