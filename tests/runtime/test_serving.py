"""The server's runner: configured from the environment, used by ``app_from_env`` and ``flowmem serve``."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flowmem.api.app import app_from_env
from flowmem.auth import create_token
from flowmem.runtime.serving import agent_from_env, builtin_tools, runner_from_env
from flowmem.runtime.tools import ToolContext
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, open_store
from flowmem.store.base import Address
from tests.runtime.fake_provider import FakeProvider, calls, text
from tests.runtime.helpers import new_session

ENV_KEYS = (
    "FLOWMEM_MODEL",
    "FLOWMEM_MODEL_BASE_URL",
    "FLOWMEM_API_KEY",
    "FLOWMEM_DATABASE_URL",
    "FLOWMEM_STALE_AFTER",
    "FLOWMEM_MEMORY_WINDOW",
    "FLOWMEM_MAX_STEPS",
    "FLOWMEM_SYSTEM_PROMPT",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)


def test_no_model_configured_means_no_runner() -> None:
    store = MemoryStore()
    assert agent_from_env({}) is None
    assert runner_from_env(store, MemoryService(store), {}) is None


def test_agent_from_env_reads_its_settings() -> None:
    agent = agent_from_env(
        {
            "FLOWMEM_MODEL": "m",
            "FLOWMEM_MODEL_BASE_URL": "http://127.0.0.1:1/v1",
            "FLOWMEM_SYSTEM_PROMPT": "Be terse.",
            "FLOWMEM_MEMORY_WINDOW": "40",
            "FLOWMEM_MAX_STEPS": "3",
        }
    )
    assert agent is not None
    assert (agent.system_prompt, agent.memory.max_messages, agent.max_steps) == ("Be terse.", 40, 3)
    assert agent.tools.names() == ["remember", "recall", "forget", "current_time"]


def test_builtin_memory_tools_use_the_owners_user_scope() -> None:
    store = MemoryStore()
    service = MemoryService(store)
    tools = builtin_tools()
    owned = ToolContext(ExecutionContext(session_id="s1", user_id="alice"), service, "c1")
    nobody = ToolContext(ExecutionContext(session_id="s2", user_id=None), service, "c2")
    assert tools.call("remember", {"key": "tea", "value": "green"}, owned).content == (
        '{"remembered": true, "key": "tea"}'
    )
    assert store.get_record(Address("user", "alice", "note:tea"), 0) == (True, "green")
    assert '"value": "green"' in tools.call("recall", {"key": "tea"}, owned).content
    assert (
        '"remembered": false' in tools.call("remember", {"key": "x", "value": "y"}, nobody).content
    )
    assert '"found": false' in tools.call("recall", {"key": "tea"}, nobody).content
    assert (
        tools.call("forget", {"key": "tea"}, owned).content == '{"forgotten": true, "key": "tea"}'
    )
    assert store.get_record(Address("user", "alice", "note:tea"), 0) == (False, None)
    assert not tools.call("current_time", {}, owned).error


def test_app_from_env_runs_turns_and_releases_stale_sessions_at_start(
    fake_provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/served.db"
    store = open_store(url)
    token, _ = create_token(store, "alice", {"sessions:create"})
    stale = new_session(store, owner="alice", agent="")
    assert store.set_session_status(stale.id, "running", frozenset({"idle"}))  # a dead server's
    monkeypatch.setenv("FLOWMEM_DATABASE_URL", url)
    monkeypatch.setenv("FLOWMEM_MODEL", "fake-model")
    monkeypatch.setenv("FLOWMEM_MODEL_BASE_URL", fake_provider.base_url)
    fake_provider.script(calls(("t1", "current_time", {})), text("It is noon."))
    with TestClient(app_from_env()) as client:
        assert store.get_session(stale.id).status == "failed"  # type: ignore[union-attr]
        auth = {"Authorization": f"Bearer {token}"}
        sid = client.post("/v1/sessions", json={"name": "c"}, headers=auth).json()["id"]
        response = client.post(
            f"/v1/sessions/{sid}/turns?wait=true", json={"content": "time?"}, headers=auth
        )
        assert response.status_code == 200, response.text
        assert response.json()["reply"] == "It is noon."
    sent = fake_provider.accepted()[0].body
    assert {t["function"]["name"] for t in sent["tools"]} == {
        "remember",
        "recall",
        "forget",
        "current_time",
    }
