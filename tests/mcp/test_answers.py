"""Bad input to any tool is a tool error (``isError``) that says what to do, never a crash or a protocol error.

One ``flowmem mcp`` process (forked from the fork server, ``tests/mcp/forked.py``) takes every bad call in turn (with small size limits),
and still answers a good call after them; each refused write stored nothing.
"""

from __future__ import annotations

from typing import Any

import anyio

from tests.mcp.conftest import answer, error_text, stdio_env, stdio_session
from tests.mcp.forked import ForkServer

BIG = "x" * 5000  # past FLOWMEM_MAX_MESSAGE_BYTES and FLOWMEM_MAX_RECORD_BYTES below
USER = {"role": "user", "content": "hello"}

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    # (tool, arguments, what the error text must say)
    ("remember", {}, "invalid_arguments: remember: key: Field required"),  # missing arguments
    ("remember", {"key": 5, "value": 1}, "key: Input should be a valid string"),  # wrong-typed
    ("remember", {"key": "", "value": 1}, "key"),
    ("remember", {"key": "k", "value": BIG}, "record_too_large"),  # oversized content
    ("remember", {"key": "k", "value": 1, "ttl_seconds": -1}, "ttl"),
    ("remember", {"key": "k", "value": 1, "request_id": "has space"}, "request_id"),
    ("recall", {}, "give key"),
    ("recall", {"key": "a", "query": "b"}, "give key"),
    ("recall", {"query": "x", "mode": "meaning"}, "mode must be one of"),
    ("list_memories", {"limit": 0}, "invalid_arguments: list_memories: limit"),
    ("forget", {"key": None}, "invalid_arguments: forget: key"),
    ("read_session", {"session": "never-made"}, "list_sessions"),  # unknown session
    ("read_session", {"session": "two words"}, "session must be a session id"),  # refused scope id
    ("read_session", {"session": "s-1", "max_tokens": "many"}, "invalid_arguments: read_session: max_tokens"),
    ("append_messages", {"session": "s-1", "messages": [{"role": "robot", "content": "x"}]}, "role"),
    ("append_messages", {"session": "s-1", "messages": [{"role": "user", "content": BIG}]}, "message_too_large"),
    ("append_messages", {"session": "s-1", "messages": "hello"}, "invalid_arguments: append_messages: messages"),
    ("append_messages", {"session": "None", "messages": [USER]}, "session must be a session id"),
    ("remember", {"key": "k", "value": 1, "session": "null"}, "session must be a session id"),
    ("list_sessions", {"since": "yesterday"}, "ISO-8601"),
    ("search_sessions", {"query": "   "}, "query"),
    ("check_messages", {"messages": [{"role": "user"}], "format": "klingon"}, "format"),
    ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}, "create_entities"),
    ("create_entities", {"entities": [{"name": "A"}]}, "entities.0.entityType: Field required"),
    ("create_relations", {"relations": [{"to": "B", "relationType": "r"}]}, "relations.0.from: Field required"),
    ("open_nodes", {"names": "A"}, "invalid_arguments: open_nodes: names"),
    ("no_such_tool", {}, "no_such_tool"),
]


async def _calls(database: str, forks: ForkServer) -> dict[str, Any]:
    env = stdio_env(database, FLOWMEM_MAX_MESSAGE_BYTES="1000", FLOWMEM_MAX_RECORD_BYTES="1000")
    seen: dict[str, Any] = {"errors": []}
    async with stdio_session(database, "ana", env=env, forks=forks) as session:
        for tool, arguments, _ in BAD_CALLS:
            result = await session.call_tool(tool, arguments)
            seen["errors"].append((result.is_error, result.content[0].text))  # type: ignore[union-attr]
        # a request_id used again for another call
        first = {"key": "k", "value": 1, "request_id": "r-1"}
        answer(await session.call_tool("remember", first))
        seen["reused"] = error_text(await session.call_tool("remember", {**first, "value": 2}))
        seen["after"] = answer(await session.call_tool("list_memories", {}))
        seen["sessions"] = answer(await session.call_tool("list_sessions", {}))
        seen["graph"] = answer(await session.call_tool("read_graph", {}))
    return seen


def test_every_bad_call_is_a_tool_error_that_says_what_to_do_and_changes_nothing(
    database: str, forks: ForkServer
) -> None:
    seen = anyio.run(_calls, database, forks)
    for (tool, arguments, says), (is_error, text) in zip(BAD_CALLS, seen["errors"], strict=True):
        assert is_error, (tool, arguments, text)
        assert says in text, (tool, arguments, text)
    assert seen["reused"].startswith("idempotency_key_reused:")
    assert seen["after"]["memories"] == [{"key": "k", "value": 1, "expires_at": None}]
    assert seen["sessions"]["sessions"] == []  # no refused append started a session
    assert seen["graph"] == {"entities": [], "relations": []}
