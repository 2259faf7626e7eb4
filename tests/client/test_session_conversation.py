"""``Client`` and ``AsyncClient`` name a session's conversation, whatever wrote it (issue 37 §1)."""

from __future__ import annotations

import asyncio

from flowmem.client import SessionBuffer, SessionConversation
from flowmem.core import HEALED_CONTENT
from tests.api.langgraph_thread import heal_thread
from tests.client.conftest import Server


def test_a_healed_langgraph_thread_is_named_by_its_head_line_in_both_clients(server: Server) -> None:
    assert server.store is not None
    heal_thread(server.store, "lg-healed", "alice")
    with server.client("alice") as client:
        session = client.get_session("lg-healed")
        assert session.conversation is not None
        head = session.conversation.buffer
        assert head.startswith("langgraph#")
        assert session.conversation == SessionConversation(head, 5, "latest_checkpoint")
        assert session.buffers == [
            SessionBuffer("langgraph", 3, stale=True),
            SessionBuffer(head, 5, stale=False),
        ]
        assert not session.buffers_more
        listed = client.list_sessions()
        assert [s.conversation for s in listed.data] == [session.conversation]
        assert listed.data[0].buffers is None  # a list names the conversation only
        # the key the docs give for a thread's messages reads its head, never the stale line
        read = client.load_buffer("session", "langgraph", session_id="lg-healed")
        assert read.count == 5
        placeholder = read.messages[2]  # MEM-3's, as FlowmemHealing wrote it back to the thread
        assert (placeholder["role"], placeholder["content"]) == ("tool", HEALED_CONTENT)

    async def main() -> None:
        async with server.async_client("alice") as client:
            again = await client.get_session("lg-healed")
            assert again.conversation == session.conversation
            assert again.buffers == session.buffers
            assert [s.conversation async for s in client.iter_sessions()] == [session.conversation]

    asyncio.run(main())


def test_a_new_session_names_chat_history_with_no_message(server: Server) -> None:
    with server.client("alice") as client:
        created = client.create_session("empty")
        assert created.conversation == SessionConversation("chat_history", 0, "default")
        client.send_turn(created.id, "hello", wait=True)
        assert client.get_session(created.id).conversation == SessionConversation(
            "chat_history", 1, "newest_buffer"
        )
