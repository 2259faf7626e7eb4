"""Turns through the HTTP API: the app's ``runner`` is an ``AgentRunner`` on the fake provider."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flowmem.api import create_app
from flowmem.runtime.runner import AgentRunner
from flowmem.store import Address, open_store
from tests.api.helpers import Api, make_tokens
from tests.runtime.fake_provider import FakeProvider, calls, text
from tests.runtime.helpers import counting_tools, executions, make_runner


class Hooks:
    """Tool hooks a test can set after the app is built."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def block(self) -> None:
        self.entered.set()
        self.release.wait(20)


@pytest.fixture
def served(fake_provider: FakeProvider, tmp_path: Path) -> Iterator[tuple[Api, AgentRunner, Hooks]]:
    store = open_store(f"sqlite:///{tmp_path}/api.db")
    hooks = Hooks()
    tokens = make_tokens(store)
    built: list[AgentRunner] = []

    def factory(store: Any, memory: Any) -> AgentRunner:
        runner = make_runner(
            store, fake_provider.base_url, counting_tools(tmp_path, {"clock": hooks.block})
        )
        runner.service = memory
        built.append(runner)
        return runner

    app = create_app(store, runner_factory=factory)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Api(client, store, tokens), built[0], hooks
    hooks.release.set()
    built[0].close()
    store.close()


def messages(api: Api, sid: str, who: str = "alice") -> list[dict[str, Any]]:
    response = api.call("GET", f"/v1/sessions/{sid}/messages?limit=100", who)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def test_send_a_turn_202_then_poll(
    served: tuple[Api, AgentRunner, Hooks], fake_provider: FakeProvider, tmp_path: Path
) -> None:
    api, runner, _ = served
    sid = api.session("alice")
    fake_provider.script(calls(("c1", "add", {"a": 1, "b": 2})), text("3"))
    response = api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "1 + 2?"})
    assert response.status_code == 202, response.text
    turn_id = response.json()["turn_id"]
    assert runner.wait(turn_id, 20)["status"] == "completed"
    session = api.call("GET", f"/v1/sessions/{sid}").json()
    assert session["status"] == "completed"
    rows = messages(api, sid)
    assert [(m["role"], m["content"]) for m in rows] == [
        ("user", "1 + 2?"),
        ("assistant", ""),
        ("tool", "3"),
        ("assistant", "3"),
    ]
    assert executions(tmp_path, "add") == 1


def test_wait_true_returns_the_finished_turn(
    served: tuple[Api, AgentRunner, Hooks], fake_provider: FakeProvider
) -> None:
    api, _, _ = served
    sid = api.session("alice")
    fake_provider.script(text("hi there"))
    response = api.call("POST", f"/v1/sessions/{sid}/turns?wait=true", json={"content": "hi"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed" and body["reply"] == "hi there"


def test_a_concurrent_second_turn_gets_409_and_stop_ends_the_turn(
    served: tuple[Api, AgentRunner, Hooks], fake_provider: FakeProvider
) -> None:
    api, runner, hooks = served
    sid = api.session("alice")
    fake_provider.script(calls(("k1", "clock", {}), ("k2", "add", {"a": 1, "b": 1})))
    first = api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "first"})
    assert first.status_code == 202
    assert hooks.entered.wait(20)
    before = messages(api, sid)
    second = api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "second"})
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "conflict"
    assert messages(api, sid) == before
    stopped = api.call("POST", f"/v1/sessions/{sid}/stop")
    assert stopped.status_code == 200 and stopped.json()["stopped"] is True
    hooks.release.set()
    result = runner.wait(first.json()["turn_id"], 20)
    assert result["reason"] == "stopped"
    assert api.call("GET", f"/v1/sessions/{sid}").json()["status"] == "completed"
    assert [m["role"] for m in messages(api, sid)] == [
        "user",
        "assistant",
        "tool",
    ]  # k2 left for healing


def test_mem_8_an_admin_driving_alices_session_uses_alices_user_memory(
    served: tuple[Api, AgentRunner, Hooks], fake_provider: FakeProvider
) -> None:
    api, _, _ = served
    sid = api.session("alice")
    api.store.put_record(Address("user", "root", "fact"), "admin's own", None)
    fake_provider.script(
        calls(("m1", "remember", {"fact": "alice likes tea"})),
        calls(("m2", "recall", {})),
        text("ok"),
    )
    response = api.call(
        "POST", f"/v1/sessions/{sid}/turns?wait=true", "admin", json={"content": "remember"}
    )
    assert response.status_code == 200, response.text
    assert api.store.get_record(Address("user", "alice", "fact"), 0) == (True, "alice likes tea")
    assert api.store.get_record(Address("user", "root", "fact"), 0) == (True, "admin's own")
    recalled = [m for m in messages(api, sid, "admin") if m["role"] == "tool"][1]
    assert '"value": "alice likes tea"' in recalled["content"]


def test_mem_8_an_unowned_session_driven_by_an_admin_has_no_user_memory(
    served: tuple[Api, AgentRunner, Hooks], fake_provider: FakeProvider
) -> None:
    api, _, _ = served
    sid = api.session("service")
    fake_provider.script(calls(("n1", "remember", {"fact": "x"})), text("ok"))
    response = api.call(
        "POST", f"/v1/sessions/{sid}/turns?wait=true", "admin", json={"content": "remember x"}
    )
    assert response.status_code == 200, response.text
    result = next(m for m in messages(api, sid, "admin") if m["role"] == "tool")
    assert result["content"] == '{"success": false, "scope_id": ""}'
    assert api.store.get_record(Address("user", "root", "fact"), 0) == (False, None)


def test_a_viewer_cannot_drive_a_turn(
    served: tuple[Api, AgentRunner, Hooks], fake_provider: FakeProvider
) -> None:
    api, _, _ = served
    sid = api.session("alice")
    response = api.call("POST", f"/v1/sessions/{sid}/turns", "viewer", json={"content": "hi"})
    assert response.status_code == 403
    assert fake_provider.requests == []
