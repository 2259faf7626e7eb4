"""pydantic-ai integration (the ``pydantic-ai`` extra): a ``ConversationStore`` over flowmem.

- ``flowmem.integrations.pydantic_ai.store.FlowmemConversationStore``: conversations are
  flowmem sessions, their entries rows of the session's buffers, saved through the buffer
  rules (MEM-1, MEM-2, MEM-3; docs/integrations.md, decision 0051).
- ``flowmem.integrations.pydantic_ai.rows``: a message as rows and back, exactly.

Import the submodules; this package imports neither, so importing it never needs the extra.
"""
