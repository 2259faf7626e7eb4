"""``Client`` and ``AsyncClient`` against a real ``flowmem serve`` on loopback (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from flowmem.client import RetryPolicy, ServerUnreachableError
from flowmem.errors import (
    AccessDeniedError,
    IdempotencyKeyReusedError,
    NotFoundError,
    RateLimitedError,
    UnknownRoleError,
)
from flowmem.scope import ExecutionContext
from tests.client.conftest import Server, serve
from tests.served import free_port

pytestmark = pytest.mark.slow

USER = {"role": "user", "content": "remember the blue door"}


def _key_subset(server: Server) -> None:
    """The calls an agent makes, through both clients, against ``server``."""
    with server.client("alice") as client:
        session = client.create_session("e2e", metadata={"n": 1})
        assert client.get_session(session.id).owner == "alice"
        context = ExecutionContext(session_id=session.id, user_id="alice")
        assert client.append("session", "chat_history", [USER], context).appended == 1
        client.send_turn(session.id, "and the red key", wait=True)
        assert [r.content for r in client.iter_messages(session.id)] == ["and the red key"]
        history = client.load("session", "chat_history", context)
        assert [m["content"] for m in history.messages] == [USER["content"], "and the red key"]
        assert client.pop_last("session", "chat_history", context).removed == 1
        assert client.write("user", "profile", {"name": "Ada"}, context, ttl=60).success
        assert client.read("user", "profile", context).value == {"name": "Ada"}
        assert client.delete("user", "profile", context).removed == 1
        assert client.clear("session", "chat_history", context).removed == 1
        assert [s.id for s in client.iter_sessions(page_size=1)] == [session.id]
        assert client.check([USER]).sendable
        with pytest.raises(UnknownRoleError):
            client.append_buffer("user", "k", {"role": "robot", "content": "x"})
        with pytest.raises(NotFoundError):
            client.get_session("00000000-0000-0000-0000-000000000000")
        with pytest.raises(AccessDeniedError):
            client.erase_user("bob")

    async def twin() -> None:
        async with server.async_client("bob") as bob:
            await bob.append_buffer("user", "notes", [USER])
            assert (await bob.load_buffer("user", "notes")).count == 1
            assert (await bob.user_id()) == "bob"
            assert (await bob.read("user", "missing", ExecutionContext(user_id="bob"), 5)).value == 5

    asyncio.run(twin())
    with server.client("admin") as admin:
        erased = admin.erase_user("bob")
        assert erased.buffers == 1 and erased.tokens == 1
        admin.delete_session(session.id)


def _callers_keys(server: Server) -> None:
    """A caller's ``idempotency_key``: a repeat is the first answer, replayed; another body is refused."""
    key = uuid.uuid4().hex  # the server may be shared by several tests: keys of this call only
    note = {"role": "user", "content": "stored once"}
    with server.client("alice") as client:
        first = client.append_buffer("user", key, note, idempotency_key=key)
        again = client.append_buffer("user", key, note, idempotency_key=key)
        assert (first.appended, first.count, first.replayed) == (1, 1, False)
        assert (again.appended, again.count, again.replayed) == (1, 1, True)
        with pytest.raises(IdempotencyKeyReusedError) as reused:
            client.append_buffer("user", key, {"role": "user", "content": "other"}, idempotency_key=key)
        assert reused.value.details["http_status"] == 422
        assert client.load_buffer("user", key).count == 1  # nothing appended twice
        context = ExecutionContext(user_id="alice")  # the Memory protocol's append
        for _ in range(2):
            kept = client.append("user", key, [note], context, idempotency_key=f"{key}-memory")
        assert kept.replayed and client.load("user", key, context).count == 2
        made = client.create_session("keyed", idempotency_key=f"{key}-session")
        remade = client.create_session("keyed", idempotency_key=f"{key}-session")
        assert remade.id == made.id and remade.replayed and not made.replayed
        client.delete_session(made.id)

    async def twin() -> None:
        async with server.async_client("alice") as client:
            wrote = await client.write_record("user", key, 1, idempotency_key=f"{key}-record")
            rewrote = await client.write_record("user", key, 1, idempotency_key=f"{key}-record")
            assert not wrote.replayed and rewrote.replayed
            with pytest.raises(IdempotencyKeyReusedError):
                await client.write_record("user", key, 2, idempotency_key=f"{key}-record")
            assert (await client.read_record("user", key)).value == 1

    asyncio.run(twin())


def test_a_callers_idempotency_key_on_a_real_server_over_sqlite(real_server: Server) -> None:
    _callers_keys(real_server)


def test_the_key_calls_on_a_real_server_over_sqlite(real_server: Server) -> None:
    _key_subset(real_server)
    with real_server.client(None) as anonymous:
        assert anonymous.health().status == "ok"
        assert anonymous.store_health().status == "ok"


def test_429_retry_after_from_a_real_server(tmp_path: Path) -> None:
    args = ("--rate-limit", "1", "--rate-burst", "2")
    with serve(f"sqlite:///{tmp_path}/rate.db", tmp_path, *args) as server:
        with server.client("alice", retry=RetryPolicy.never()) as strict:
            strict.list_sessions()
            strict.list_sessions()
            with pytest.raises(RateLimitedError) as limited:
                strict.list_sessions()
            assert limited.value.retry_after >= 1
        time.sleep(2.1)  # the bucket refills
        with server.client("alice", retry=RetryPolicy(max_attempts=3, base_delay=0.01)) as patient:
            started = time.monotonic()
            for _ in range(3):
                patient.list_sessions()  # the third waits the Retry-After, then succeeds
            assert time.monotonic() - started >= 0.9


def test_a_server_that_is_not_there_is_unreachable() -> None:
    port = free_port()
    server = Server(f"http://127.0.0.1:{port}", {"alice": "fm_x"})
    policy = RetryPolicy(max_attempts=2, base_delay=0.01)
    with server.client("alice", retry=policy) as client, pytest.raises(ServerUnreachableError):
        client.health()


@pytest.mark.postgres
def test_the_key_calls_on_a_real_server_over_postgres(postgres_db_url: str, tmp_path: Path) -> None:
    with serve(postgres_db_url, tmp_path, "--workers", "2") as server:
        _key_subset(server)
        _callers_keys(server)
