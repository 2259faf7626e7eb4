"""Every method of ``Client`` and ``AsyncClient`` against the app in process (memory and SQLite)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from flowmem.client import (
    BufferRead,
    BufferResult,
    CheckResult,
    Client,
    Health,
    NormalizeResult,
    PopResult,
    ReadResult,
    Session,
    SessionPage,
    TranscriptPage,
    TurnResult,
    UserErasure,
    WriteResult,
)
from flowmem.errors import AccessDeniedError, InvalidInputError, NotFoundError
from flowmem.scope import ExecutionContext
from tests.client.conftest import Server

USER = {"role": "user", "content": "hi"}


def test_health_and_store_health_need_no_token(server: Server) -> None:
    with server.client(None) as client:
        assert client.health() == Health("ok", "0.1.0")
        assert client.store_health().status == "ok"


def test_session_lifecycle_create_get_turn_stop_reset_delete(server: Server) -> None:
    with server.client("alice") as client:
        session = client.create_session("chat", metadata={"ticket": 42})
        assert isinstance(session, Session)
        assert (session.name, session.owner, session.status) == ("chat", "alice", "idle")
        assert session.metadata == {"ticket": 42}
        assert dataclasses.replace(client.get_session(session.id), buffers=None) == session
        turn = client.send_turn(session.id, "hello", wait=True)
        assert isinstance(turn, TurnResult) and turn.status == "completed"
        accepted = client.send_turn(session.id, "again")
        assert accepted.turn_id and accepted.turn_id != turn.turn_id
        assert client.stop_session(session.id).stopped is False
        history = client.load_buffer("session", "chat_history", session_id=session.id)
        assert [m["content"] for m in history.messages] == ["hello", "again"]
        reset = client.reset_session(session.id)
        assert reset.reset is True
        assert client.load_buffer("session", "chat_history", session_id=session.id).count == 0
        client.delete_session(session.id)
        with pytest.raises(NotFoundError):
            client.get_session(session.id)


def test_list_sessions_pages_and_iter_sessions_walks_every_page(server: Server) -> None:
    with server.client("alice") as client:
        made = [client.create_session(f"s{n}").id for n in range(5)]
        page = client.list_sessions(limit=2)
        assert isinstance(page, SessionPage)
        assert (page.total, page.limit, page.offset, page.has_more) == (5, 2, 0, True)
        assert len(page.data) == 2
        last = client.list_sessions(limit=2, offset=4)
        assert last.has_more is False and len(last.data) == 1
        walked = [s.id for s in client.iter_sessions(page_size=2)]
        assert sorted(walked) == sorted(made) and len(walked) == 5
    with server.client("bob") as other:
        assert list(other.iter_sessions()) == []


def test_transcript_poll_iter_and_admin_edit_delete(server: Server) -> None:
    with server.client("alice") as client, server.client("admin") as admin:
        session = client.create_session()
        for n in range(5):
            client.send_turn(session.id, f"m{n}", wait=True)
        page = client.messages(session.id, limit=2)
        assert isinstance(page, TranscriptPage)
        assert [r.content for r in page.data] == ["m0", "m1"] and page.next_since == 2
        newest = client.messages(session.id, limit=2, newest_first=True)
        assert [r.seq for r in newest.data] == [5, 4] and newest.next_before == 4
        assert [r.content for r in client.iter_messages(session.id, page_size=2)] == [
            f"m{n}" for n in range(5)
        ]
        assert [r.seq for r in client.iter_messages(session.id, since=3)] == [4, 5]
        with pytest.raises(AccessDeniedError):
            client.edit_message(session.id, 1, {"role": "user", "content": "x"})
        edited = admin.edit_message(session.id, 1, {"role": "user", "content": "edited"})
        assert (edited.seq, edited.content) == (1, "edited")
        admin.delete_message(session.id, 2)
        assert [r.seq for r in client.iter_messages(session.id)] == [1, 3, 4, 5]


def test_buffer_append_window_load_last_before_and_format(server: Server) -> None:
    with server.client("alice") as client:
        rows = [{"role": "user", "content": f"m{n}"} for n in range(6)]
        result = client.append_buffer("user", "notes", rows)
        assert result == BufferResult([], 6, 6, True, "alice")
        windowed = client.append_buffer(
            "user", "notes", {"role": "user", "content": "m6"}, max_messages=5, return_messages=True
        )
        assert windowed.count == 5 and windowed.messages[0]["content"] == "m2"
        page = client.load_buffer("user", "notes", last=2)
        assert isinstance(page, BufferRead)
        assert [m["content"] for m in page.messages] == ["m5", "m6"] and page.count == 5
        assert page.next_before is not None
        older = client.load_buffer("user", "notes", last=2, before=page.next_before)
        assert [m["content"] for m in older.messages] == ["m3", "m4"]
        anthropic = client.load_buffer("user", "notes", format="anthropic")
        assert anthropic.format == "anthropic" and anthropic.system is None
        assert anthropic.dropped == 0 and anthropic.not_carried == {}
        assert client.clear_buffer("user", "notes") == WriteResult(True, "alice", 5)
        assert client.load_buffer("user", "notes").messages == []


def test_buffer_append_in_a_provider_format(server: Server) -> None:
    with server.client("alice") as client:
        messages = [{"role": "user", "content": "weather?"}]
        result = client.append_buffer("user", "a", messages, format="anthropic", system="be brief")
        assert result.appended == 2  # the system prompt becomes a row
        read = client.load_buffer("user", "a", format="anthropic")
        assert read.system == "be brief" and read.messages == messages


def test_pop_buffer_returns_the_last_row_then_none(server: Server) -> None:
    with server.client("alice") as client:
        client.append_buffer("user", "p", [USER, {"role": "assistant", "content": "yo"}])
        popped = client.pop_buffer("user", "p")
        assert isinstance(popped, PopResult)
        assert popped.message is not None and popped.message["content"] == "yo"
        assert (popped.success, popped.removed, popped.resolved_scope_id) == (True, 1, "alice")
        assert client.pop_buffer("user", "p").message is not None
        empty = client.pop_buffer("user", "p")
        assert (empty.message, empty.removed, empty.success) == (None, 0, True)


def test_records_read_default_write_ttl_delete(server: Server) -> None:
    with server.client("alice") as client:
        assert client.read_record("user", "profile") == ReadResult(None, False, "alice")
        assert client.read_record("user", "profile", default={"name": "?"}).value == {"name": "?"}
        assert client.read_record("user", "profile", default="text").value == "text"
        assert client.write_record("user", "profile", {"name": "Ada"}) == WriteResult(
            True, "alice", 0
        )
        assert client.read_record("user", "profile") == ReadResult({"name": "Ada"}, True, "alice")
        client.write_record("user", "short", 1, ttl=0.05)
        time.sleep(0.1)
        assert client.read_record("user", "short", default=0) == ReadResult(0, False, "alice")
        assert client.delete_record("user", "profile").removed == 1
        assert client.delete_record("user", "profile").removed == 0


def test_session_and_shared_scopes_by_query_ids(server: Server) -> None:
    with server.client("alice") as client, server.client("shared") as shared:
        session = client.create_session()
        client.write_record("session", "k", 1, session_id=session.id)
        assert client.read_record("session", "k", session_id=session.id).resolved_scope_id == (
            session.id
        )
        assert client.read_record("session", "k").found is False  # no session_id: refused
        shared.write_record("workflow", "k", "w", workflow_id="wf1")
        assert shared.read_record("workflow", "k", workflow_id="wf1").value == "w"
        assert shared.read_record("global", "k").found is False
        with pytest.raises(AccessDeniedError):
            client.read_record("workflow", "k", workflow_id="wf1")


def test_check_and_normalize(server: Server) -> None:
    history = [{"role": "tool", "content": "x", "tool_call_id": "c1"}, USER]
    with server.client("alice") as client:
        checked = client.check(history)
        assert isinstance(checked, CheckResult)
        assert checked.sendable is False and checked.format == "rows"
        assert checked.violations[0].index == 0
        normalized = client.normalize(history, to="openai")
        assert isinstance(normalized, NormalizeResult)
        assert normalized.to == "openai" and normalized.dropped == 1
        assert normalized.messages == [{"role": "user", "content": "hi"}]
        assert client.check(normalized.messages, format="openai").sendable is True


def test_erase_user_is_admin_only_and_reports_counts(server: Server) -> None:
    with server.client("alice") as alice:
        alice.create_session()
        alice.append_buffer("user", "notes", USER)
    with server.client("admin") as admin:
        erased = admin.erase_user("alice")
    assert erased == UserErasure("alice", 1, 1, 0, 2)  # the revoked token is alice's too
    with server.client("bob") as bob, pytest.raises(AccessDeniedError):
        bob.erase_user("carol")


def test_async_client_is_the_twin(server: Server) -> None:
    async def main() -> None:
        async with server.async_client("alice") as client:
            assert (await client.health()).status == "ok"
            session = await client.create_session("a")
            assert (await client.get_session(session.id)).name == "a"
            await client.send_turn(session.id, "hi", wait=True)
            assert [r.content async for r in client.iter_messages(session.id)] == ["hi"]
            assert [s.id async for s in client.iter_sessions(page_size=1)] == [session.id]
            await client.append_buffer("user", "n", [USER, USER])
            assert len((await client.load_buffer("user", "n", last=1)).messages) == 1
            assert (await client.pop_buffer("user", "n")).removed == 1
            await client.write_record("user", "r", [1], ttl=60)
            assert (await client.read_record("user", "r")).value == [1]
            assert (await client.delete_record("user", "r")).removed == 1
            assert (await client.clear_buffer("user", "n")).removed == 1
            assert (await client.check([USER])).sendable
            assert (await client.normalize([USER])).messages[0]["content"] == "hi"
            assert (await client.reset_session(session.id)).reset
            assert (await client.stop_session(session.id)).stopped is False
            assert (await client.list_sessions()).total == 1
            await client.delete_session(session.id)
            with pytest.raises(NotFoundError):
                await client.get_session(session.id)
        async with server.async_client("admin") as admin:
            assert (await admin.erase_user("nobody")).sessions == 0
            assert (await admin.store_health()).status == "ok"

    asyncio.run(main())


def test_client_reads_url_and_token_from_the_environment(
    memory_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_URL", memory_server.url)
    monkeypatch.setenv("FLOWMEM_TOKEN", memory_server.tokens["bob"])
    with Client(transport=memory_server.transport) as client:
        assert client.settings.base_url == memory_server.url
        assert client.user_id() == "bob"


def test_close_closes_the_pool(memory_server: Server) -> None:
    client = memory_server.client("alice")
    client.health()
    client.close()
    with pytest.raises(RuntimeError):
        client.health()


def test_a_token_window_over_the_client_sync_and_async(server: Server) -> None:
    """Issue 28: ``load_buffer(max_tokens=)`` and ``load(max_tokens=)`` carry what was cut."""
    rows = [{"role": "user", "content": f"message {n} " * 10} for n in range(20)]
    with server.client("alice") as client:
        client.append_buffer("user", "long", rows)
        read = client.load_buffer("user", "long", max_tokens=100)
        assert read.window is not None and read.window.tokens <= 100
        contents = [m["content"] for m in read.messages]
        assert contents == [r["content"] for r in rows[-len(contents) :]]
        assert read.window.cut_messages == 20 - len(contents)
        loaded = client.load("user", "long", ExecutionContext(user_id="alice"), max_tokens=100)
        assert loaded.messages == read.messages and loaded.window == read.window
        with pytest.raises(InvalidInputError) as raised:
            client.load_buffer("user", "long", max_tokens=5)
        assert raised.value.code == "window_too_small"

    async def main() -> None:
        async with server.async_client("alice") as client:
            read = await client.load_buffer("user", "long", max_tokens=100)
            assert read.window == loaded.window
            got = await client.load("user", "long", ExecutionContext(user_id="alice"), max_tokens=100)
            assert got.window == loaded.window

    asyncio.run(main())
