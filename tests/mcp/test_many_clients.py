"""8 client processes writing one user's memory, sessions and graph at once lose nothing and store nothing twice.

Each client is its own ``flowmem mcp`` process over one database (SQLite, then
PostgreSQL), as eight agents of one user would be. Every write is sent twice, as a
client retries a call it did not see answered: with the same ``request_id`` for a
record or a plain message, as is for a tool call and its result (MEM-1, MEM-2). The
graph's writes go to one shared entity. Afterwards every write is there exactly once:
read by the first client once all eight have written (its process reads what the
database holds: the others' writes are in no memory of its own). The eight processes
are forked from a server that imported flowmem's CLI and the MCP SDK once
(``tests/mcp/forked.py``, decision 0200): each is still its own process with its own
connections, spoken to over its stdio by the SDK's client.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from flowmem.store import open_store
from tests.conftest import fresh_schema
from tests.mcp.conftest import answer, stdio_env, stdio_session
from tests.mcp.forked import ForkServer

CLIENTS = 8
ROUNDS = 4


class Written:
    """How many clients have made every write; set once all have."""

    def __init__(self) -> None:
        self.count = 0
        self.all = anyio.Event()

    def one_more(self) -> None:
        """A client has made its writes."""
        self.count += 1
        if self.count == CLIENTS:
            self.all.set()


async def _client(
    database: str,
    n: int,
    replays: list[bool],
    founders: list[int],
    written: Written,
    seen: dict[str, Any],
    forks: ForkServer,
) -> None:
    async with stdio_session(database, "ana", env=stdio_env(database), forks=forks) as session:
        call = session.call_tool
        created = answer(await call("create_entities", {"entities": [
            {"name": "Team", "entityType": "group", "observations": [f"founded by {n}"]}]}))  # fmt: skip
        if created:  # the entity was not there yet: this client's create made it (with others racing)
            founders.append(n)
        for j in range(ROUNDS):
            for _ in range(2):  # sent, then retried
                done = answer(await call("remember", {
                    "key": f"note-{n}-{j}", "value": {"by": n, "round": j}, "request_id": f"rem-{n}-{j}"}))  # fmt: skip
                replays.append(bool(done.get("replayed")))
                said = {"role": "user", "content": f"client {n} says {j}"}
                done = answer(await call("append_messages", {
                    "session": "team", "messages": [said], "request_id": f"app-{n}-{j}"}))  # fmt: skip
                replays.append(bool(done.get("replayed")))
                pair = [
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": f"call_{n}_{j}", "name": "lookup", "arguments": "{}"}]},
                    {"role": "tool", "tool_call_id": f"call_{n}_{j}", "content": f"result {n}-{j}"},
                ]  # fmt: skip
                answer(await call("append_messages", {"session": "team", "messages": pair}))
                answer(await call("add_observations", {"observations": [
                    {"entityName": "Team", "contents": [f"seen by {n} in round {j}"]}]}))  # fmt: skip
            answer(await call("create_relations", {"relations": [
                {"from": f"member-{n}", "to": "Team", "relationType": f"joined in round {j}"}]}))  # fmt: skip
        written.one_more()
        if n == 0:  # the first client reads, once every client's writes were answered
            await written.all.wait()
            seen.update(await _read(call))


async def _read(call: Any) -> dict[str, Any]:
    """Everything the clients wrote, read through the tools."""
    seen = {
        "memories": answer(await call("list_memories", {"limit": 100})),
        "session": answer(await call("read_session", {"session": "team", "max_tokens": 1_000_000})),
        "sessions": answer(await call("list_sessions", {})),
        "graph": answer(await call("read_graph", {})),
    }
    seen["check"] = answer(await call("check_messages", {"messages": seen["session"]["messages"]}))
    return seen


async def _all(database: str, forks: ForkServer) -> tuple[dict[str, Any], list[bool], list[int]]:
    replays: list[bool] = []
    founders: list[int] = []
    written = Written()
    seen: dict[str, Any] = {}
    async with anyio.create_task_group() as clients:
        for n in range(CLIENTS):
            clients.start_soon(_client, database, n, replays, founders, written, seen, forks)
    assert written.count == CLIENTS
    return seen, replays, founders


def _check(seen: dict[str, Any], replays: list[bool], founders: list[int]) -> None:
    keys = [m["key"] for m in seen["memories"]["memories"]]
    assert sorted(keys) == sorted(f"note-{n}-{j}" for n in range(CLIENTS) for j in range(ROUNDS))
    messages = seen["session"]["messages"]
    users = Counter(m["content"] for m in messages if m["role"] == "user")
    assert users == Counter({f"client {n} says {j}": 1 for n in range(CLIENTS) for j in range(ROUNDS)})
    calls = Counter(
        c["id"] for m in messages if m["role"] == "assistant" for c in m["metadata"].get("tool_calls", [])
    )
    results = Counter(m["metadata"]["tool_call_id"] for m in messages if m["role"] == "tool")
    assert not [m for m in messages if m["metadata"].get("healed")]  # every placeholder was replaced
    expected = Counter({f"call_{n}_{j}": 1 for n in range(CLIENTS) for j in range(ROUNDS)})
    assert calls == expected
    # each result once, and with its call (a call left unanswered by a racing user turn is
    # healed, MEM-3, and its real result then replaces the placeholder)
    assert results == expected
    assert seen["check"]["sendable"] is True, seen["check"]
    assert seen["session"]["count"] == len(messages) == 3 * CLIENTS * ROUNDS
    assert [s["id"] for s in seen["sessions"]["sessions"]] == ["team"]
    [team] = seen["graph"]["entities"]
    # as the reference server: creating an entity that exists changes nothing, so the
    # first observations are those of every create that found no entity (racing ones too)
    assert founders
    expected_obs = {f"founded by {n}" for n in founders} | {
        f"seen by {n} in round {j}" for n in range(CLIENTS) for j in range(ROUNDS)
    }
    assert sorted(team["observations"]) == sorted(expected_obs)
    assert len(seen["graph"]["relations"]) == CLIENTS * ROUNDS
    # each record and plain message was sent twice: the second answer is the first one's
    assert replays.count(True) == replays.count(False) == 2 * CLIENTS * ROUNDS


def _prepare(database: str) -> None:
    """The database made and migrated once, before the clients open it together."""
    open_store(database, create=True).close()


def test_eight_clients_on_sqlite_lose_nothing_and_store_nothing_twice(tmp_path: Path, forks: ForkServer) -> None:
    database = f"sqlite:///{tmp_path}/many.db"
    _prepare(database)
    _check(*anyio.run(_all, database, forks))


@pytest.mark.postgres
def test_eight_clients_on_postgres_lose_nothing_and_store_nothing_twice(postgres_url: str, forks: ForkServer) -> None:
    with fresh_schema(postgres_url) as database:
        _prepare(database)
        _check(*anyio.run(_all, database, forks))
