"""OpenAI Agents SDK session backed by a flowmem buffer (the ``openai-agents`` extra).

``FlowmemSession`` implements the SDK's ``Session`` protocol over any
``flowmem.memory.Memory`` or ``AsyncMemory`` (``session``); ``FlowmemRunHooks`` are the
run hooks that store each model response before its tools start, so a process killed
inside a tool keeps the call (``write_ahead``; DESIGN §5, decision 0098);
``FlowmemSessionSettings`` adds a token budget to the SDK's ``SessionSettings``
(``settings``); ``items_of`` reads rows as the SDK's items (``items``).
"""

from __future__ import annotations

from flowmem.integrations import require

require("agents", "openai-agents")

from flowmem.integrations.openai_agents.items import items_of  # noqa: E402
from flowmem.integrations.openai_agents.session import FlowmemSession  # noqa: E402
from flowmem.integrations.openai_agents.settings import (  # noqa: E402
    FlowmemSessionSettings,
    session_settings_of,
)
from flowmem.integrations.openai_agents.write_ahead import (  # noqa: E402
    FlowmemRunHooks,
    WriteAheadWarning,
)

__all__ = [
    "FlowmemRunHooks",
    "FlowmemSession",
    "FlowmemSessionSettings",
    "WriteAheadWarning",
    "items_of",
    "session_settings_of",
]
