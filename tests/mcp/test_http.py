"""``/mcp`` in the app: served through every run of the app's lifespan, absent without the SDK."""

from __future__ import annotations

import sys

import pytest
from fastapi.testclient import TestClient

from flowmem.api.app import create_app
from flowmem.auth import create_token
from flowmem.store import MemoryStore

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip


def test_mcp_is_served_each_time_the_apps_lifespan_runs() -> None:
    store = MemoryStore()
    token, _ = create_token(store, "ana")
    app = create_app(store, purge_interval=None)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    for _ in range(2):  # a session manager runs once: each lifespan makes its own
        with TestClient(app) as client:
            answered = client.post("/mcp", json=INITIALIZE, headers=headers)
            assert answered.status_code == 200, answered.text
            assert answered.json()["result"]["serverInfo"]["name"] == "flowmem"


def test_without_the_mcp_package_the_app_serves_no_mcp(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "flowmem.mcp"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp…` raises ModuleNotFoundError
    store = MemoryStore()
    token, _ = create_token(store, "ana")
    with TestClient(create_app(store, purge_interval=None)) as client:
        refused = client.post("/mcp", json=INITIALIZE, headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 404


def test_building_the_mcp_server_leaves_the_hosts_logging_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's server calls ``logging.basicConfig``: a root logger without handlers (a plain process) keeps none."""
    import logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as in a process nobody configured (pytest has its own)
    monkeypatch.setattr(root, "level", logging.ERROR)
    store = MemoryStore()
    token, _ = create_token(store, "ana")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    with TestClient(create_app(store, purge_interval=None)) as client:  # the first /mcp request builds it
        assert client.post("/mcp", json=INITIALIZE, headers=headers).status_code == 200
    assert root.handlers == [] and root.level == logging.ERROR


def _call(client: TestClient, token: str, tool: str, arguments: dict[str, object]) -> object:
    """One ``tools/call`` to the app's ``/mcp`` (stateless: no session to open first); its structured answer."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    answered = client.post("/mcp", json=body, headers=headers)
    assert answered.status_code == 200, answered.text
    result = answered.json()["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


def test_two_apps_in_one_process_each_call_their_own_store() -> None:
    """The tools are built once per process (``mcp.server._tools``): a call still acts on its own app's store."""
    first, second = MemoryStore(), MemoryStore()
    (first_token, _), (second_token, _) = create_token(first, "ana"), create_token(second, "ana")
    with (
        TestClient(create_app(first, purge_interval=None)) as one,
        TestClient(create_app(second, purge_interval=None)) as two,
    ):
        _call(one, first_token, "remember", {"key": "city", "value": "Lisbon"})
        _call(two, second_token, "remember", {"key": "city", "value": "Oslo"})
        assert "Lisbon" in str(_call(one, first_token, "recall", {"key": "city"}))
        assert "Oslo" in str(_call(two, second_token, "recall", {"key": "city"}))
        assert "Oslo" not in str(_call(one, first_token, "recall", {"key": "city"}))
        assert "Lisbon" not in str(_call(two, second_token, "recall", {"key": "city"}))
