"""Sessions written by each framework adapter, in process, for the tests that read them back.

Each builder writes through the real adapter on ``store`` (the database a served app
or a ``TestClient`` app reads), owned by ``user_id``, with a call left unanswered and
healed by the next user turn (MEM-3), so every conversation holds one placeholder.
What each writes (the buffer, its rows) is in the builder's docstring.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Store


def agents_session(store: Store, session_id: str, user_id: str) -> None:
    """An Agents SDK ``FlowmemSession``: buffer ``agent_items``, 4 rows.

    ``user, assistant(call_a1), placeholder, user``: the second ``add_items`` heals
    ``call_a1``.
    """
    from flowmem.integrations.openai_agents import FlowmemSession

    context = ExecutionContext(session_id=session_id, user_id=user_id)
    session = FlowmemSession(session_id, MemoryService(store), context=context)
    call = {
        "type": "function_call",
        "call_id": "call_a1",
        "name": "weather",
        "arguments": '{"city": "Lisbon"}',
    }

    async def write() -> None:
        await session.add_items([{"role": "user", "content": "Weather in Lisbon?"}, call])
        await session.add_items([{"role": "user", "content": "Still there?"}])

    asyncio.run(write())


def pydantic_session(store: Store, session_id: str, user_id: str) -> None:
    """A pydantic-ai conversation: buffer ``pydantic_ai``, 4 rows.

    ``user, assistant(call_p1), placeholder, user``: the second save's prompt heals
    ``call_p1``.
    """
    from pydantic_ai.conversation import Conversation

    from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
    from tests.integrations.pydantic_ai.messages import call, prompt

    conversations = FlowmemConversationStore(MemoryService(store))
    first = Conversation(conversation_id=session_id, messages=[prompt("Weather in Lisbon?"), call("call_p1")])

    async def write() -> None:
        await conversations.save(first, scope=user_id)
        loaded: Any = await conversations.load(session_id, scope=user_id)
        loaded.messages.append(prompt("Still there?", t=3, run="r2"))
        await conversations.save(loaded, scope=user_id)

    asyncio.run(write())


def adk_session(store: Store, session_id: str, user_id: str) -> None:
    """A Google ADK session: buffer ``adk``, 5 rows.

    ``user, assistant(c1), placeholder, assistant, user``: the last user event heals ``c1``.
    """
    from flowmem.integrations.adk import FlowmemSessionService
    from tests.integrations.adk.events import answer, call, user

    service = FlowmemSessionService(MemoryService(store))

    async def write() -> None:
        session = await service.create_session(app_name="app", user_id=user_id, session_id=session_id)
        for event in [user("Weather in Lisbon?", 1), call("c1", 2), answer("Let me check.", 3), user("Still there?", 4)]:
            await service.append_event(session, event)

    asyncio.run(write())
