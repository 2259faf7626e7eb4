"""LangGraph integration (the ``langgraph`` extra): a checkpointer, a long-term store, healing.

``from flowmem.integrations.langgraph import FlowmemSaver, FlowmemStore``, as LangGraph's
own packages export theirs; without the extra the import raises an ``ImportError``
naming it. The submodules stay importable on their own:

- ``saver.FlowmemSaver``: a ``BaseCheckpointSaver`` whose threads are flowmem sessions
  and whose message channels are stored once, row by row, in the session's buffers
  (docs/integrations.md, decision 0040).
- ``store.FlowmemStore``: a ``BaseStore`` over flowmem memory records.
- ``healing``: MEM-3 for ``create_agent`` (``FlowmemHealing``) and the prebuilt ReAct
  agent (``heal_hook``), at the model call; ``heal_messages`` for a graph of your own.
- ``writeahead``: a model or a tool runs only once its input checkpoint is stored,
  with LangGraph's default ``"async"`` durability (decision 0097).
- ``window``: token windows (issue 28) for ``create_agent`` and the ReAct agent.
"""

from __future__ import annotations

from flowmem.integrations import require

require("langgraph", "langgraph")
require("langchain.agents", "langgraph")

from flowmem.integrations.langgraph.healing import (  # noqa: E402
    FlowmemHealing,
    aheal_hook,
    heal_hook,
    heal_messages,
)
from flowmem.integrations.langgraph.saver import FlowmemSaver  # noqa: E402
from flowmem.integrations.langgraph.store import FlowmemStore  # noqa: E402
from flowmem.integrations.langgraph.window import (  # noqa: E402
    FlowmemWindow,
    window_hook,
    window_messages,
)
from flowmem.integrations.langgraph.writeahead import (  # noqa: E402
    awrite_ahead,
    awrite_ahead_tool,
    write_ahead,
    write_ahead_tool,
)

__all__ = [
    "FlowmemHealing",
    "FlowmemSaver",
    "FlowmemStore",
    "FlowmemWindow",
    "aheal_hook",
    "awrite_ahead",
    "awrite_ahead_tool",
    "heal_hook",
    "heal_messages",
    "window_hook",
    "window_messages",
    "write_ahead",
    "write_ahead_tool",
]
