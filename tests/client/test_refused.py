"""The client reports which refusal a neutral result stands for, sync and async (MEM-7, decision 0047)."""

from __future__ import annotations

import asyncio

from flowmem.scope import ExecutionContext
from tests.client.conftest import Server

ROW = {"role": "user", "content": "hi"}


def test_mem_7_the_servers_refusal_reaches_the_results(server: Server) -> None:
    with server.client("alice") as client:
        assert client.append_buffer("session", "chat", ROW).refused == "no_session_id"
        assert client.load_buffer("session", "chat").refused == "no_session_id"
        assert client.read_record("session", "k", default=2).refused == "no_session_id"
        assert client.write_record("session", "k", 1).refused == "no_session_id"
        assert client.delete_record("session", "k").refused == "no_session_id"
        assert client.clear_buffer("session", "chat").refused == "no_session_id"
        popped = client.pop_buffer("session", "chat")
        assert (popped.success, popped.refused) == (False, "no_session_id")
        assert popped.refusal is not None and popped.refusal.scope == "session"
        assert client.append_buffer("user", "chat", ROW).refused is None
        assert client.load_buffer("user", "chat").refused is None
    with server.client("service") as client:
        read = client.read_record("user", "k", default=2)
        assert (read.value, read.found, read.refused) == (2, False, "no_user_id")


def test_mem_7_the_async_client_reports_the_same_refusals(server: Server) -> None:
    async def calls() -> list[str | None]:
        async with server.async_client("alice") as client:
            return [
                (await client.append_buffer("session", "chat", ROW)).refused,
                (await client.load_buffer("session", "chat")).refused,
                (await client.read_record("session", "k")).refused,
                (await client.write_record("session", "k", 1)).refused,
                (await client.pop_buffer("session", "chat")).refused,
                (await client.append_buffer("user", "chat", ROW)).refused,
            ]

    assert asyncio.run(calls()) == ["no_session_id"] * 5 + [None]


def test_mem_7_a_refusal_the_client_decides_names_itself_too(server: Server) -> None:
    no_session = ExecutionContext(user_id="alice")
    placeholder = ExecutionContext(user_id="alice", session_id="undefined")
    with server.client("alice") as client:
        assert client.append("session", "chat", ROW, no_session).refused == "no_session_id"
        assert client.load("session", "chat", placeholder).refused == "placeholder_session_id"
        assert client.read("user", "k", ExecutionContext(user_id=0)).refused == "no_one_user_id"
        assert client.append("user", "chat", ROW, ExecutionContext(user_id="alice")).refused is None
