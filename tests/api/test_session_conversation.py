"""A session names the buffer that holds its conversation, whatever adapter wrote it (issue 37 §1, §2).

``GET /v1/sessions`` and ``GET /v1/sessions/{id}`` say which buffer (``conversation``)
and, for one session, list every buffer (``buffers``); the buffer URL the docs give
for a LangGraph thread or a pydantic-ai conversation reads its head line, never a
stale one (decision 0110). Sessions are written by the real adapters in process.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowmem.core import HEALED_CONTENT
from tests.api.adapter_sessions import adk_session, agents_session, pydantic_session
from tests.api.helpers import Api
from tests.api.langgraph_thread import heal_thread, write_thread


def _session(api: Api, sid: str, who: str = "alice") -> dict[str, Any]:
    answer = api.call("GET", f"/v1/sessions/{sid}", who)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _read(api: Api, sid: str, key: str, **params: Any) -> dict[str, Any]:
    answer = api.call("GET", f"/v1/buffers/session/{key}", params={"session_id": sid, **params})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_each_adapter_session_names_its_conversation_in_the_list_and_alone(any_api: Api) -> None:
    store = any_api.store
    write_thread(store, "lg-plain", "alice", ["plan a trip", "and the budget?"])
    heal_thread(store, "lg-healed", "alice")
    agents_session(store, "agents", "alice")
    pydantic_session(store, "pydantic", "alice")
    adk_session(store, "adk-s", "alice")
    chat = any_api.session("alice")
    any_api.call("POST", "/v1/buffers/session/chat_history", params={"session_id": chat},
                 json={"messages": [{"role": "user", "content": "hi"}]})
    healed_head = _session(any_api, "lg-healed")["conversation"]["buffer"]
    assert healed_head.startswith("langgraph#")
    expected = {
        "lg-plain": {"buffer": "langgraph", "messages": 4, "found_by": "latest_checkpoint"},
        "lg-healed": {"buffer": healed_head, "messages": 5, "found_by": "latest_checkpoint"},
        "agents": {"buffer": "agent_items", "messages": 4, "found_by": "newest_buffer"},
        "pydantic": {"buffer": "pydantic_ai", "messages": 4, "found_by": "head_entry"},
        "adk-s": {"buffer": "adk", "messages": 5, "found_by": "newest_buffer"},
        chat: {"buffer": "chat_history", "messages": 1, "found_by": "newest_buffer"},
    }
    listed = any_api.call("GET", "/v1/sessions", params={"limit": 100}).json()["data"]
    assert {s["id"]: s["conversation"] for s in listed} == expected
    assert all("buffers" not in s for s in listed)  # the list names the conversation only
    for sid, conversation in expected.items():
        alone = _session(any_api, sid)
        assert alone["conversation"] == conversation
        assert conversation["buffer"] in [b["name"] for b in alone["buffers"]]
        # the buffer it names holds that many rows, one of them MEM-3's placeholder
        rows = _read(any_api, sid, conversation["buffer"])
        assert rows["count"] == conversation["messages"]
        if sid not in ("lg-plain", chat):
            assert any(r["content"] == HEALED_CONTENT for r in rows["messages"])


def test_a_healed_thread_lists_its_stale_first_line_beside_its_head(any_api: Api) -> None:
    heal_thread(any_api.store, "lg-healed", "alice")
    found = _session(any_api, "lg-healed")
    head = found["conversation"]["buffer"]
    assert found["buffers"] == [
        {"name": "langgraph", "messages": 3, "stale": True},
        {"name": head, "messages": 5, "stale": False},
    ]
    assert found["buffers_more"] is False


def test_the_docs_url_of_a_healed_thread_reads_its_head_not_the_stale_line(any_api: Api) -> None:
    """Issue 37: ``/v1/buffers/session/langgraph`` gave ``[user, assistant(call_w1), user]``."""
    heal_thread(any_api.store, "lg-healed", "alice")
    head = _session(any_api, "lg-healed")["conversation"]["buffer"]
    read = _read(any_api, "lg-healed", "langgraph")
    assert read["count"] == 5
    assert [r["role"] for r in read["messages"]] == ["user", "assistant", "tool", "user", "assistant"]
    assert read["messages"] == _read(any_api, "lg-healed", head)["messages"]
    check = any_api.call("POST", "/v1/check?format=rows", json=read["messages"]).json()
    assert check["sendable"], check  # the stale line had an unanswered call before a user turn
    as_openai = _read(any_api, "lg-healed", "langgraph", format="openai")
    assert len(as_openai["messages"]) == 5 and as_openai["dropped"] == 0
    last = _read(any_api, "lg-healed", "langgraph", last=2)
    assert (last["count"], len(last["messages"])) == (5, 2)
    window = _read(any_api, "lg-healed", "langgraph", max_tokens=10_000)
    assert window["count"] == 5 and len(window["messages"]) == 5
    # the stale line stays reachable: as the history of the checkpoints before the heal
    page = any_api.call("GET", "/v1/sessions/lg-healed/checkpoints", params={"limit": 100}).json()
    older = [c for c in page["data"] if c["lines"].get("messages") == "langgraph"]
    assert older and max(len(c["messages"]["messages"]) for c in older) == 3


def test_a_rewritten_pydantic_ai_history_is_read_on_its_new_line(any_api: Api) -> None:
    import asyncio

    from pydantic_ai.conversation import Conversation

    from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
    from flowmem.service import MemoryService
    from tests.integrations.pydantic_ai.messages import answer, prompt

    conversations = FlowmemConversationStore(MemoryService(any_api.store))

    async def write() -> None:
        await conversations.save(
            Conversation(conversation_id="pa-r", messages=[prompt("hi"), answer("hello")]), scope="alice"
        )
        loaded: Any = await conversations.load("pa-r", scope="alice")
        loaded.messages[-1] = answer("hello again", t=5)
        await conversations.save(loaded, scope="alice")

    asyncio.run(write())
    found = _session(any_api, "pa-r")
    head = found["conversation"]["buffer"]
    assert head.startswith("pydantic_ai#") and found["conversation"]["found_by"] == "head_entry"
    assert {"name": "pydantic_ai", "messages": 2, "stale": True} in found["buffers"]
    read = _read(any_api, "pa-r", "pydantic_ai")
    assert read["count"] == 2 and read["messages"] == _read(any_api, "pa-r", head)["messages"]
    assert "hello again" in json.dumps(read["messages"][-1])


def test_the_newest_non_empty_buffer_is_the_conversation(any_api: Api) -> None:
    sid = any_api.session("alice")

    def append(key: str, n: int) -> None:
        rows = [{"role": "user", "content": f"{key} {i}"} for i in range(n)]
        answer = any_api.call("POST", f"/v1/buffers/session/{key}", params={"session_id": sid},
                              json={"messages": rows})
        assert answer.status_code == 200, answer.text

    append("chat_history", 2)
    append("agent_items", 3)
    assert _session(any_api, sid)["conversation"] == {
        "buffer": "agent_items", "messages": 3, "found_by": "newest_buffer"
    }
    append("chat_history", 1)  # written to last, but created first: not the newest
    assert _session(any_api, sid)["conversation"]["buffer"] == "agent_items"
    any_api.call("DELETE", "/v1/buffers/session/agent_items", params={"session_id": sid})
    assert _session(any_api, sid)["conversation"] == {
        "buffer": "chat_history", "messages": 3, "found_by": "newest_buffer"
    }


def test_a_session_another_user_owns_is_not_found_with_its_conversation(api: Api) -> None:
    heal_thread(api.store, "lg-healed", "alice")
    assert api.call("GET", "/v1/sessions/lg-healed", "bob").status_code == 404
    assert api.call("GET", "/v1/buffers/session/langgraph", "bob",
                    params={"session_id": "lg-healed"}).status_code == 404
    listed = api.call("GET", "/v1/sessions", "bob").json()
    assert listed["data"] == []


@pytest.mark.parametrize("count", [101])
def test_a_session_lists_at_most_100_buffers_and_says_more_exist(memory_api: Api, count: int) -> None:
    sid = memory_api.session("alice")
    for i in range(count):
        memory_api.call("POST", f"/v1/buffers/session/b{i:03d}", params={"session_id": sid},
                        json={"messages": [{"role": "user", "content": "x"}]})
    found = _session(memory_api, sid)
    assert len(found["buffers"]) == 100 and found["buffers_more"] is True
    assert found["buffers"][0]["name"] == "b000"
    assert found["conversation"]["buffer"] == f"b{count - 1:03d}"  # the newest
