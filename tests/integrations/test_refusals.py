"""integrations.refusals: an adapter's write through a session id the session scope refuses (MEM-13)."""

from __future__ import annotations

import pytest

from flowmem.errors import ScopeRefusedError
from flowmem.integrations.refusals import usable_session
from flowmem.scope import Refusal

REFUSED = Refusal("session", "no_id", "The session scope needs a session id.")


def test_mem_13_a_resolved_session_id_is_given_back() -> None:
    assert usable_session("s-1", "LangGraph put", "thread", "thread_id") == "s-1"


def test_mem_13_a_refusal_raises_naming_the_call_the_holder_and_where_to_set_the_id() -> None:
    with pytest.raises(ScopeRefusedError) as refused:
        usable_session(REFUSED, "LangGraph put", "thread", "thread_id", "config['configurable']['thread_id']")
    assert str(refused.value) == (
        "LangGraph put refused: The session scope needs a session id. Give the thread a usable "
        "session id (config['configurable']['thread_id']); nothing was stored"
    )
    assert refused.value.details == {"rule": "MEM-13", "argument": "thread_id"}


def test_mem_13_where_defaults_to_the_argument_name() -> None:
    with pytest.raises(ScopeRefusedError, match=r"usable session id \(conversation_id\); nothing was stored"):
        usable_session(REFUSED, "pydantic-ai save", "conversation", "conversation_id")
