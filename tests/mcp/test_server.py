"""An SDK client drives every tool and the session resources, over stdio and over streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
from mcp.client.session import ClientSession

from tests.mcp.conftest import TOOLS, Served, answer, error_text, http_session, stdio_session
from tests.mcp.forked import ForkServer

Opener = Callable[[], AbstractAsyncContextManager[ClientSession]]


async def scenario(session: ClientSession) -> dict[str, Any]:
    """Every tool once or more, as a model would call them; what each answered."""
    call = session.call_tool
    seen: dict[str, Any] = {}
    tools = await session.list_tools()
    seen["tools"] = {t.name: t for t in tools.tools}
    seen["remember"] = answer(
        await call("remember", {"key": "color", "value": {"favourite": "teal"}})
    )
    await call("remember", {"key": "city", "value": "Lisbon", "session": "trip-1"})
    seen["recall_key"] = answer(await call("recall", {"key": "color"}))
    seen["recall_text"] = answer(await call("recall", {"query": "TEAL"}))
    seen["recall_session"] = answer(await call("recall", {"key": "city", "session": "trip-1"}))
    seen["list"] = answer(await call("list_memories", {}))
    seen["forget"] = answer(await call("forget", {"key": "color", "request_id": "forget-1"}))
    seen["forget_again"] = answer(await call("forget", {"key": "color", "request_id": "forget-1"}))
    seen["forget_session"] = answer(await call("forget", {"key": "nothing", "session": "trip-1"}))
    seen["forget_unknown"] = error_text(await call("forget", {"key": "k", "session": "never-made"}))
    seen["recall_gone"] = answer(await call("recall", {"key": "color"}))
    history = [
        {"role": "user", "content": "what is the weather in Lisbon?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "name": "weather", "arguments": "{}"}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 degrees"},
        {"role": "assistant", "content": "It is sunny in Lisbon."},
    ]
    seen["append"] = answer(
        await call("append_messages", {"session": "trip-1", "messages": history})
    )
    seen["append_again"] = answer(
        await call("append_messages", {"session": "trip-1", "messages": history[1:3]})
    )
    seen["sessions"] = answer(await call("list_sessions", {}))
    seen["search"] = answer(await call("search_sessions", {"query": "sunny"}))
    seen["search_none"] = answer(await call("search_sessions", {"query": "snow in Oslo"}))
    seen["read"] = answer(await call("read_session", {"session": "trip-1", "max_tokens": 4000}))
    seen["read_small"] = answer(await call("read_session", {"session": "trip-1", "max_tokens": 25}))
    seen["check"] = answer(await call("check_messages", {"messages": [*history[:2], history[0]]}))
    seen["created"] = answer(await call("create_entities", {"entities": [
        {"name": "Ana", "entityType": "person", "observations": ["lives in Lisbon"]},
        {"name": "Lisbon", "entityType": "city", "observations": []},
    ]}))  # fmt: skip
    seen["related"] = answer(await call("create_relations", {"relations": [
        {"from": "Ana", "to": "Lisbon", "relationType": "lives in"}]}))  # fmt: skip
    seen["observed"] = answer(await call("add_observations", {"observations": [
        {"entityName": "Ana", "contents": ["likes teal", "lives in Lisbon"]}]}))  # fmt: skip
    seen["searched"] = answer(await call("search_nodes", {"query": "TEAL"}))
    seen["opened"] = answer(await call("open_nodes", {"names": ["Lisbon"]}))
    await call(
        "delete_observations",
        {"deletions": [{"entityName": "Ana", "observations": ["likes teal"]}]},
    )
    await call(
        "delete_relations",
        {"relations": [{"from": "Ana", "to": "Lisbon", "relationType": "lives in"}]},
    )
    seen["graph"] = answer(await call("read_graph", {}))
    deleted = await call("delete_entities", {"entityNames": ["Lisbon"]})
    seen["deleted"] = (deleted.content[0].text, deleted.structured_content)  # type: ignore[union-attr]
    seen["graph_after"] = answer(await call("read_graph", {}))
    resources = await session.list_resources()
    seen["resources"] = [str(r.uri) for r in resources.resources]
    templates = await session.list_resource_templates()
    seen["templates"] = [t.uri_template for t in templates.resource_templates]
    read = await session.read_resource("flowmem://sessions/trip-1")
    seen["resource"] = read.contents[0].text  # type: ignore[union-attr]
    seen["unknown"] = error_text(await call("read_session", {"session": "never-made"}))
    return seen


async def _run(opener: Opener) -> dict[str, Any]:
    async with opener() as session:
        return await scenario(session)


def test_every_tool_and_the_session_resource_answer_over_stdio(
    database: str, forks: ForkServer
) -> None:
    """``flowmem mcp`` as a client's child process (forked, decision 0200), on SQLite and PostgreSQL."""
    _check(anyio.run(_run, lambda: stdio_session(database, "ana", forks=forks)))


def test_every_tool_and_the_session_resource_answer_over_http(served: Served) -> None:
    """``/mcp`` of a real ``flowmem serve``, on SQLite and PostgreSQL."""
    _check(anyio.run(_run, lambda: http_session(served.url, served.tokens["ana"])))


def _check(seen: dict[str, Any]) -> None:
    assert set(seen["tools"]) == TOOLS
    for tool in seen["tools"].values():
        assert tool.description and tool.input_schema["type"] == "object", tool.name
    assert seen["remember"] == {"key": "color", "scope": "user", "session": None, "stored": True}
    assert seen["recall_key"] == {
        "found": True,
        "memories": [{"key": "color", "value": {"favourite": "teal"}}],
    }
    assert seen["recall_text"]["memories"] == [{"key": "color", "value": {"favourite": "teal"}}]
    assert seen["recall_session"]["memories"] == [{"key": "city", "value": "Lisbon"}]
    assert [m["key"] for m in seen["list"]["memories"]] == [
        "color"
    ]  # the graph's records are not listed
    assert seen["forget"] == {"key": "color", "removed": True}
    assert seen["forget_again"] == {
        "key": "color",
        "removed": True,
        "replayed": True,
    }  # answered once
    assert seen["forget_session"] == {"key": "nothing", "removed": False}
    assert seen["forget_unknown"].startswith("not_found:")  # nothing created by a delete
    assert seen["recall_gone"] == {"found": False, "memories": []}
    assert seen["append"]["appended"] == 4 and seen["append"]["count"] == 4
    # MEM-1, MEM-2: the call and its result appended again are duplicates
    assert seen["append_again"]["appended"] == 0 and seen["append_again"]["count"] == 4
    assert [s["id"] for s in seen["sessions"]["sessions"]] == ["trip-1"]
    assert seen["sessions"]["sessions"][0]["messages"] == 4
    [hit] = seen["search"]["sessions"]
    assert hit["id"] == "trip-1" and [m["index"] for m in hit["matches"]] == [2, 3]
    assert seen["search_none"]["sessions"] == []
    assert [m["role"] for m in seen["read"]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    # a window too small for the call and its result keeps neither (never one without the other)
    small = [m["role"] for m in seen["read_small"]["messages"]]
    assert small == ["assistant"] and seen["read_small"]["window"]["cut_messages"] == 3
    assert seen["check"]["sendable"] is False
    assert [v["code"] for v in seen["check"]["violations"]] == ["unanswered_call"]
    assert [e["name"] for e in seen["created"]] == ["Ana", "Lisbon"]
    assert seen["related"] == [{"from": "Ana", "to": "Lisbon", "relationType": "lives in"}]
    assert seen["observed"] == [{"entityName": "Ana", "addedObservations": ["likes teal"]}]
    assert [e["name"] for e in seen["searched"]["entities"]] == ["Ana"]
    assert seen["opened"]["relations"] == [
        {"from": "Ana", "to": "Lisbon", "relationType": "lives in"}
    ]
    assert seen["graph"] == {
        "entities": [
            {"name": "Ana", "entityType": "person", "observations": ["lives in Lisbon"]},
            {"name": "Lisbon", "entityType": "city", "observations": []},
        ],
        "relations": [],
    }
    assert seen["deleted"] == (
        "Entities deleted successfully",
        {"success": True, "message": "Entities deleted successfully"},
    )
    assert [e["name"] for e in seen["graph_after"]["entities"]] == ["Ana"]
    assert seen["resources"] == ["flowmem://sessions/trip-1"]
    assert seen["templates"] == ["flowmem://sessions/{session_id}"]
    assert "sunny, 24 degrees" in seen["resource"]
    assert seen["unknown"].startswith("not_found:") and "list_sessions" in seen["unknown"]
