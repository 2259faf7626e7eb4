"""LangGraph integration (the ``langgraph`` extra): a checkpointer and a long-term store.

- ``flowmem.integrations.langgraph.saver.FlowmemSaver``: a ``BaseCheckpointSaver`` whose
  threads are flowmem sessions and whose message channels are stored once, row by row,
  in the session's buffers (docs/integrations.md, decision 0040).
- ``flowmem.integrations.langgraph.store.FlowmemStore``: a ``BaseStore`` over flowmem
  memory records.
- ``flowmem.integrations.langgraph.healing``: MEM-3 for ``create_agent`` and the prebuilt
  ReAct agent, at the model call.
- ``flowmem.integrations.langgraph.window``: token windows (issue 28) for ``create_agent``
  and the prebuilt ReAct agent: the model is sent a window, the thread keeps every message.

Import the submodules; this package imports none of them, so importing it never needs
the extra.
"""
