"""MEM-3 for LangGraph agents: a crashed thread's unanswered tool calls healed at the model call.

A run killed between the model's tool call and the tool's result leaves the thread's
last checkpoint with an ``AIMessage`` whose calls have no ``ToolMessage``. When a new
user message arrives, LangGraph appends it after that turn and the next model call is
rejected by the provider (``INVALID_CHAT_HISTORY``, ``unexpected tool_use_id``).

``heal_messages`` applies flowmem's own healing (``flowmem.core.append.heal``, the one
implementation of MEM-3) to the messages before the latest user turn: every call that
has no result anywhere gets the interrupted placeholder right after its turn's results.
Calls after the latest user turn are left alone: they are the ones LangGraph runs or
resumes (an interrupt's ``Command(resume=…)``, an ``invoke(None)``), never healed.

Where it lives (decision 0040): at the model call, not in the checkpointer, because only
there is it known that a user turn follows the unanswered call; the checkpointer stores
what LangGraph hands it, exactly. ``FlowmemHealing`` is the ``create_agent`` middleware;
``heal_hook`` is the prebuilt ReAct agent's ``pre_model_hook``. Both write the healed list
back into the state, so the thread's stored history becomes sendable for every reader.

Both also wait, before the model call, for the checkpoint holding the question to be
stored (``writeahead``, decision 0097); ``FlowmemHealing`` waits before each tool too
(its ``wrap_tool_call``), so ``create_agent`` with it is write-ahead under LangGraph's
default durability. The ReAct agent's tools wait through
``ToolNode(tools, wrap_tool_call=write_ahead_tool, awrap_tool_call=awrite_ahead_tool)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Optional

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from flowmem.core import prepare
from flowmem.core.append import ListEditor, heal
from flowmem.core.messages import result_id
from flowmem.integrations.langchain import message_to_row, row_to_message
from flowmem.integrations.langgraph.durable import HEALED_ID_PREFIX
from flowmem.integrations.langgraph.writeahead import awrite_ahead, write_ahead


def heal_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage] | None:
    """The messages with MEM-3's placeholders before the latest user turn; None when none is needed.

    Implements MEM-3 (through ``flowmem.core.append.heal``): every tool call declared
    before the latest ``HumanMessage`` with no result anywhere is answered by a healed
    placeholder ``ToolMessage`` right after its turn's results. Every other message is
    the very object it was.
    """
    last_user = max(
        (i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None
    )
    if last_user is None:
        return None
    before = list(messages[:last_user])
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    if not any(
        call.get("id") and call["id"] not in answered
        for m in before
        for call in getattr(m, "tool_calls", None) or ()
    ):
        return None  # the common case: nothing to convert
    rows = prepare([message_to_row(m) for m in before], 0)
    originals = {id(row): message for row, message in zip(rows, before, strict=True)}
    later = {cid for m in messages[last_user:] if (cid := getattr(m, "tool_call_id", None))}
    editor = ListEditor(rows)
    heal(editor)
    healed: list[BaseMessage] = []
    for row in editor.rows:
        if id(row) in originals:
            healed.append(originals[id(row)])
            continue
        call_id = result_id(row)
        if call_id in later:
            continue  # answered after the user turn (a late result): not interrupted
        placeholder = row_to_message(row)
        placeholder.id = f"{HEALED_ID_PREFIX}{call_id}"
        healed.append(placeholder)
    if len(healed) == len(before):
        return None
    return [*healed, *messages[last_user:]]


def _update(messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
    healed = heal_messages(messages)
    if healed is None:
        return None
    # a placeholder goes in the middle of the list: replace it whole (one full copy)
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *healed]}


class WriteAheadTools(AgentMiddleware):
    """``create_agent`` middleware base: each tool starts once the checkpoint holding its call is stored."""

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Start the tool once the checkpoint holding its call is stored (``write_ahead``)."""
        write_ahead(getattr(request.runtime, "config", None))
        return handler(request)

    async def awrap_tool_call(
        self, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """``wrap_tool_call`` for async runs."""
        await awrite_ahead(getattr(request.runtime, "config", None))
        return await handler(request)


class FlowmemHealing(WriteAheadTools):
    """``create_agent`` middleware: MEM-3 before the model call, write-ahead before model and tools."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Write the healed messages into the state when a user turn follows an unanswered call (MEM-3)."""
        return _update(state["messages"])

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """``before_model`` for async runs (no I/O: the same work)."""
        return _update(state["messages"])

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Ask the model once the checkpoint holding its input (the question) is stored."""
        write_ahead()
        return handler(request)

    async def awrap_model_call(
        self, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """``wrap_model_call`` for async runs."""
        await awrite_ahead()
        return await handler(request)


def _hook_update(state: Any) -> dict[str, Any]:
    messages = state["messages"] if isinstance(state, dict) else state.messages
    update = _update(messages)
    if update is None:
        return {"llm_input_messages": list(messages)}
    # the model is given the healed list itself (the state's is the reducer's to make)
    return {**update, "llm_input_messages": update["messages"][1:]}


def heal_hook(
    state: Any,
    config: Optional[RunnableConfig] = None,  # noqa: UP045  (LangGraph matches this text)
) -> dict[str, Any]:
    """The prebuilt ReAct agent's ``pre_model_hook``: MEM-3's healed messages, after the write-ahead.

    Waits until the checkpoint holding the question is stored (``write_ahead``; in an
    ``ainvoke`` run use ``aheal_hook``, which awaits instead), then heals unanswered
    calls before the latest user turn into the state and gives the model that list.
    """
    write_ahead(config)
    return _hook_update(state)


async def aheal_hook(
    state: Any,
    config: Optional[RunnableConfig] = None,  # noqa: UP045  (LangGraph matches this text)
) -> dict[str, Any]:
    """``heal_hook`` for async runs (``agent.ainvoke``): the write-ahead is awaited."""
    await awrite_ahead(config)
    return _hook_update(state)


__all__ = [
    "HEALED_ID_PREFIX",
    "FlowmemHealing",
    "WriteAheadTools",
    "aheal_hook",
    "heal_hook",
    "heal_messages",
]
