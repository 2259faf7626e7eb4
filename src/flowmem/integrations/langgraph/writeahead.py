"""Write-ahead for LangGraph runs: a model is asked, or a tool started, only once its input is stored.

With LangGraph's default durability (``"async"``) a step's checkpoint is saved in the
background while the next step's tasks run, so a kill inside a tool can leave the
database without the model's call, or without the user's question (issue 36). These
functions make a task wait for the checkpoint it started from, through the
``FlowmemSaver`` that LangGraph hands every task in its config (decision 0097):

- ``write_ahead(config)`` / ``awrite_ahead(config)``: in a node of your own, before the
  model call (the question is stored before the model is asked);
- ``write_ahead_tool`` / ``awrite_ahead_tool``: a ``ToolNode``'s ``wrap_tool_call`` and
  ``awrap_tool_call`` (the call is stored before its tool starts), for a ``StateGraph``
  with a ``ToolNode`` and for the prebuilt ReAct agent
  (``create_react_agent(model, ToolNode(tools, wrap_tool_call=…, awrap_tool_call=…))``).

``FlowmemHealing`` (``create_agent``) and ``heal_hook`` (the ReAct agent's
``pre_model_hook``) call them themselves. With another checkpointer, or none, they do
nothing; with ``durability="sync"`` the checkpoint is stored already and they return
at once; with ``durability="exit"`` nothing is stored before the run ends, so nothing
is waited for (that mode is not crash-safe, by LangGraph's design).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from flowmem.integrations.langgraph.saver import FlowmemSaver

CHECKPOINTER = "__pregel_checkpointer"
"""LangGraph's config key of a task's checkpointer (``langgraph._internal._constants``)."""


def _saver(config: RunnableConfig | None) -> tuple[FlowmemSaver, RunnableConfig] | None:
    if config is None:
        try:
            config = get_config()
        except RuntimeError:
            return None  # not inside a LangGraph run: nothing to wait for
    saver = (config.get("configurable") or {}).get(CHECKPOINTER)
    return (saver, config) if isinstance(saver, FlowmemSaver) else None


def write_ahead(config: RunnableConfig | None = None) -> bool:
    """Wait until the checkpoint this task started from is stored (``FlowmemSaver.write_ahead``).

    ``config``: the task's config (a node's ``config`` argument); None: the running
    task's (``langgraph.config.get_config``). False when there is nothing to wait for,
    and on an event loop's thread (a sync node of an ``ainvoke`` run), where blocking
    would stall the very save it waits for: there, use ``awrite_ahead``.
    """
    found = _saver(config)
    if found is None or _on_event_loop():
        return False
    return found[0].write_ahead(found[1])


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def awrite_ahead(config: RunnableConfig | None = None) -> bool:
    """``write_ahead`` for async nodes: awaits, the event loop keeps running."""
    found = _saver(config)
    return False if found is None else await found[0].awrite_ahead(found[1])


def write_ahead_tool(request: Any, execute: Callable[[Any], Any]) -> Any:
    """A ``ToolNode`` ``wrap_tool_call``: the tool starts once the call that asked for it is stored."""
    write_ahead(getattr(request.runtime, "config", None))
    return execute(request)


async def awrite_ahead_tool(request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
    """A ``ToolNode`` ``awrap_tool_call``: ``write_ahead_tool`` for async runs."""
    await awrite_ahead(getattr(request.runtime, "config", None))
    return await execute(request)


__all__ = ["awrite_ahead", "awrite_ahead_tool", "write_ahead", "write_ahead_tool"]
