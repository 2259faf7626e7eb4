"""pydantic-ai integration (the ``pydantic-ai`` extra): a ``ConversationStore`` over flowmem.

``FlowmemConversationStore`` is a ``pydantic_ai.conversation_store.ConversationStore``:
``FlowmemConversationStore.from_url("sqlite:///app.db")`` (also ``postgresql://…``,
``memory://``) or ``FlowmemConversationStore(memory_service)``. Conversations are flowmem
sessions, their entries rows of the session's buffers, saved through the buffer rules
(MEM-1, MEM-2, MEM-3; decision 0051); ``store.run(agent, prompt, conversation=…)`` stores
the prompt and each call before its tool runs (``WriteAhead``, decision 0099).
``rows`` holds a message as rows and back, exactly (docs/integrations.md).
"""

from __future__ import annotations

from flowmem.integrations import require

require("pydantic_ai.conversation_store", "pydantic-ai")

from flowmem.integrations.pydantic_ai.ahead import WriteAhead  # noqa: E402
from flowmem.integrations.pydantic_ai.store import (  # noqa: E402
    ConversationOwnedElsewhere,
    FlowmemConversationStore,
)

__all__ = ["ConversationOwnedElsewhere", "FlowmemConversationStore", "WriteAhead"]
