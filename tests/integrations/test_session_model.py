"""One session model (issue 16 §4, decision 0032): a session an adapter writes is the server's.

The reproduction: a LangChain history with ``session_id="s-weather"`` written through
the adapter was invisible to the server (404 ``no such session``, an empty
``GET /v1/sessions``, untouched by ``flowmem user erase``), because its scope data had
no session record and no owner. The last tests repeat it through a ``Client`` of a
real ``flowmem serve``: the adapter on a remote memory is a session of the token's user.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage, HumanMessage

from flowmem.api import create_app
from flowmem.errors import NotFoundError
from flowmem.integrations.langchain import FlowmemChatMessageHistory
from flowmem.integrations.openai_agents import FlowmemSession
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, Store, open_store
from tests.api.helpers import Api, make_tokens
from tests.integrations.backends import remote_memory, user_of

WEATHER = Address("session", "s-weather", "chat_history")


@pytest.fixture(params=["memory", "sqlite"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """An API over a store that an in-process adapter writes to as well."""
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/api.db"
    store: Store = open_store(url)
    tokens = make_tokens(store)
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        yield Api(client, store, tokens)
    store.close()


def _weather_history(store: Store, user: str | None) -> FlowmemChatMessageHistory:
    context = ExecutionContext(session_id="s-weather", user_id=user)
    history = FlowmemChatMessageHistory(MemoryService(store), context=context)
    history.add_messages([HumanMessage("weather in Lisbon?"), AIMessage("sunny")])
    return history


def test_mem_8_a_langchain_history_is_a_session_of_its_context_user_on_the_server(
    served: Api,
) -> None:
    _weather_history(served.store, "alice")
    read = served.call("GET", "/v1/buffers/session/chat_history?session_id=s-weather")
    assert read.status_code == 200, read.text
    assert [m["content"] for m in read.json()["messages"]] == ["weather in Lisbon?", "sunny"]
    listed = served.call("GET", "/v1/sessions").json()["data"]
    assert [(s["id"], s["owner"]) for s in listed] == [("s-weather", "alice")]
    assert served.call("GET", "/v1/sessions/s-weather").json()["owner"] == "alice"
    # drivable by its owner under the access rules; bob may not even see it (MEM-9)
    turn = served.call("POST", "/v1/sessions/s-weather/turns", json={"content": "and Porto?"})
    assert turn.status_code == 202, turn.text
    assert served.store.count(WEATHER) == 3
    assert served.call("GET", "/v1/sessions/s-weather", "bob").status_code == 404
    assert served.call("GET", "/v1/sessions", "bob").json()["data"] == []


def test_erasing_the_user_removes_the_session_an_adapter_wrote(served: Api) -> None:
    _weather_history(served.store, "alice")
    erased = served.call("DELETE", "/v1/users/alice", "admin")
    assert erased.status_code == 200, erased.text
    assert erased.json()["sessions"] == 1
    assert served.store.get_session("s-weather") is None
    assert served.store.load(WEATHER) == []


def test_deleting_the_session_removes_what_the_adapter_wrote(served: Api) -> None:
    _weather_history(served.store, "alice")
    assert served.call("DELETE", "/v1/sessions/s-weather").status_code == 204
    assert served.store.load(WEATHER) == []
    assert served.call("GET", "/v1/sessions").json()["data"] == []


def test_mem_9_an_adapter_without_a_user_makes_a_session_owned_by_nobody(served: Api) -> None:
    _weather_history(served.store, None)
    session = served.store.get_session("s-weather")
    assert session is not None and session.owner is None
    # owned by nobody rather than by everybody: only the view_any tiers see it
    assert served.call("GET", "/v1/sessions", "alice").json()["data"] == []
    assert served.call("GET", "/v1/sessions", "service").json()["data"] == []
    assert [s["id"] for s in served.call("GET", "/v1/sessions", "admin").json()["data"]] == [
        "s-weather"
    ]
    assert served.call("DELETE", "/v1/sessions/s-weather", "admin").status_code == 204
    assert served.store.load(WEATHER) == []


def test_openai_agents_session_is_a_session_of_its_context_user(served: Api) -> None:
    context = ExecutionContext(session_id="s-agents", user_id="alice")
    session = FlowmemSession("s-agents", MemoryService(served.store), context=context)

    import asyncio

    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    listed = served.call("GET", "/v1/sessions").json()["data"]
    assert [(s["id"], s["owner"]) for s in listed] == [("s-agents", "alice")]


def test_a_history_with_an_unusable_session_id_creates_no_session(served: Api) -> None:
    for unusable in ("None", "", "0", "a b"):
        history = FlowmemChatMessageHistory(MemoryService(served.store), session_id=unusable)
        history.add_messages([HumanMessage("hello")])
    assert served.store.list_sessions(None, True, 100, 0) == ([], 0)


# --- the same through a Client of a real flowmem serve (issue 16 §3) -------------------


def test_mem_8_a_history_through_a_client_is_a_session_of_the_token_user(
    request: pytest.FixtureRequest,
) -> None:
    """The issue's reproduction, remote: the server lists, serves and erases the history."""
    client = remote_memory(request)
    user = user_of(client, None)
    history = FlowmemChatMessageHistory(client, session_id="s-weather")
    assert history.messages == []  # the first read, before any write: empty, not a 404
    history.add_messages([HumanMessage("weather in Lisbon?"), AIMessage("sunny")])
    read = client.load_buffer("session", "chat_history", session_id="s-weather")
    assert [m["content"] for m in read.messages] == ["weather in Lisbon?", "sunny"]
    assert [(s.id, s.owner) for s in client.iter_sessions()] == [("s-weather", user)]
    server = request.getfixturevalue("adapter_server").server
    with server.client("bob") as bob:
        with pytest.raises(NotFoundError):  # another user does not even see it (MEM-9)
            bob.get_session("s-weather")
        assert FlowmemChatMessageHistory(bob, session_id="s-weather").messages == []
    with server.client("admin") as admin:
        assert admin.erase_user(user).sessions == 1
        with pytest.raises(NotFoundError):
            admin.get_session("s-weather")


def test_an_agents_session_through_a_client_is_a_session_of_the_token_user(
    request: pytest.FixtureRequest,
) -> None:
    import asyncio

    client = remote_memory(request)
    session = FlowmemSession("s-agents", client)
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    assert client.get_session("s-agents").owner == user_of(client, None)
    assert asyncio.run(session.pop_item()) == {"role": "user", "content": "hi"}
    assert client.load_buffer("session", "agent_items", session_id="s-agents").count == 0
