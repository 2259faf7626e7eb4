"""Over /mcp every tool acts as the Bearer token's user: one user's client never sees another's memory.

MEM-8, MEM-9: ``bob`` reads, finds, lists and writes nothing of ``ana``'s records,
sessions or graph, and writing to her session's id is refused without a change; a
request without a valid token is refused by the gate before any work (401).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.mcp.conftest import (
    TOOLS,
    Served,
    answer,
    error_text,
    http_session,
    stdio_env,
    stdio_session,
)
from tests.mcp.forked import ForkServer

HISTORY = [{"role": "user", "content": "ana's secret plan"}]


async def _ana_then_bob(served: Served) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with http_session(served.url, served.tokens["ana"]) as ana:
        await ana.call_tool("remember", {"key": "plan", "value": "ana's secret plan"})
        answer(await ana.call_tool("append_messages", {"session": "ana-private", "messages": HISTORY}))
        await ana.call_tool("create_entities", {"entities": [
            {"name": "Plan", "entityType": "secret", "observations": ["ana's"]}]})  # fmt: skip
    async with http_session(served.url, served.tokens["bob"]) as bob:
        call = bob.call_tool
        seen["recall"] = answer(await call("recall", {"key": "plan"}))
        seen["find"] = answer(await call("recall", {"query": "secret"}))
        seen["list"] = answer(await call("list_memories", {}))
        seen["sessions"] = answer(await call("list_sessions", {}))
        seen["search"] = answer(await call("search_sessions", {"query": "secret"}))
        seen["read"] = error_text(await call("read_session", {"session": "ana-private"}))
        seen["append"] = error_text(
            await call("append_messages", {"session": "ana-private", "messages": [{"role": "user", "content": "hi"}]})
        )
        seen["remember_there"] = error_text(
            await call("remember", {"key": "x", "value": 1, "session": "ana-private"})
        )
        seen["graph"] = answer(await call("read_graph", {}))
        seen["resources"] = [str(r.uri) for r in (await bob.list_resources()).resources]
        seen["forget"] = answer(await call("forget", {"key": "plan"}))
    async with http_session(served.url, served.tokens["ana"]) as ana:
        seen["ana_after"] = answer(await ana.call_tool("read_session", {"session": "ana-private"}))
        seen["ana_plan"] = answer(await ana.call_tool("recall", {"key": "plan"}))
    async with http_session(served.url, served.tokens["svc"]) as svc:
        seen["service"] = error_text(await svc.call_tool("remember", {"key": "k", "value": 1}))
    return seen


def test_mem_9_one_users_client_never_sees_anothers_memory_over_http(served: Served) -> None:
    seen = anyio.run(_ana_then_bob, served)
    assert seen["recall"] == {"found": False, "memories": []}
    assert seen["find"] == {"found": False, "memories": []}
    assert seen["list"]["memories"] == []
    assert seen["sessions"]["sessions"] == [] and seen["search"]["sessions"] == []
    assert seen["read"].startswith("not_found:")  # not even that it exists (MEM-15)
    assert seen["append"].startswith("not_found:")
    assert seen["remember_there"].startswith("not_found:")
    assert seen["graph"] == {"entities": [], "relations": []}
    assert seen["resources"] == []
    assert seen["forget"] == {"key": "plan", "removed": False}
    assert [m["content"] for m in seen["ana_after"]["messages"]] == ["ana's secret plan"]
    assert seen["ana_plan"]["found"] is True
    assert seen["service"].startswith("unauthenticated:") and "--user" in seen["service"]


def test_a_request_without_a_valid_token_is_refused_before_any_work(served: Served) -> None:
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}},
    }  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream"}
    for token in (None, "fm_not-a-real-token"):
        sent = headers if token is None else {**headers, "Authorization": f"Bearer {token}"}
        refused = httpx.post(f"{served.url}/mcp", json=initialize, headers=sent, timeout=10)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "unauthenticated"
    ok = httpx.post(
        f"{served.url}/mcp",
        json=initialize,
        headers={**headers, "Authorization": f"Bearer {served.tokens['ana']}"},
        timeout=10,
    )
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "flowmem"


async def _bridged(served: Served, database: str, forks: ForkServer) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    env = stdio_env(database, FLOWMEM_URL=served.url, FLOWMEM_TOKEN=served.tokens["bob"])
    async with stdio_session(database, env=env, user="", forks=forks) as bridge:
        seen["tools"] = {t.name for t in (await bridge.list_tools()).tools}
        seen["remember"] = answer(await bridge.call_tool("remember", {"key": "via", "value": "bridge"}))
        seen["error"] = error_text(await bridge.call_tool("read_session", {"session": "ana-private"}))
    async with http_session(served.url, served.tokens["bob"]) as bob:
        seen["bob"] = answer(await bob.call_tool("recall", {"key": "via"}))
    async with http_session(served.url, served.tokens["ana"]) as ana:
        seen["ana"] = answer(await ana.call_tool("recall", {"key": "via"}))
    return seen


def test_flowmem_mcp_with_a_server_url_acts_as_its_tokens_user_there(
    served: Served, tmp_path: Path, forks: ForkServer
) -> None:
    seen = anyio.run(_bridged, served, f"sqlite:///{tmp_path}/unused.db", forks)
    assert seen["tools"] == TOOLS
    assert seen["remember"]["stored"] is True
    assert seen["error"].startswith("not_found:")  # ana's session, seen from bob's token
    assert seen["bob"]["memories"] == [{"key": "via", "value": "bridge"}]
    assert seen["ana"]["found"] is False
    assert not (tmp_path / "unused.db").exists()  # the bridge stores nothing locally
