"""flowmem's own agent runtime: tools, models and a turn loop that survives crashes.

See ``docs/runtime.md``. The pieces: ``Agent``/``MemorySpec`` (what runs),
``ToolRegistry`` (what it can do), ``OpenAIChatModel``/``ScriptedModel`` (who
answers), ``TurnLoop`` (one turn, through the memory nodes) and ``AgentRunner``
(sessions, status, leases, stop; the ``TurnRunner`` of ``flowmem.sessions``).
"""

from flowmem.runtime.agent import Agent, MemorySpec
from flowmem.runtime.loop import TurnEvent, TurnLoop, TurnResult
from flowmem.runtime.models import (
    Crash,
    Model,
    ModelReply,
    OpenAIChatModel,
    ScriptedModel,
    ToolCall,
)
from flowmem.runtime.runner import AgentRunner
from flowmem.runtime.tools import Tool, ToolContext, ToolOutcome, ToolRegistry

__all__ = [
    "Agent",
    "AgentRunner",
    "Crash",
    "MemorySpec",
    "Model",
    "ModelReply",
    "OpenAIChatModel",
    "ScriptedModel",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "TurnEvent",
    "TurnLoop",
    "TurnResult",
]
