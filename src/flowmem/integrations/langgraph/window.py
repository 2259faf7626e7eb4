"""Token windows for LangGraph agents (issue 28): the model sees a window, the thread keeps all.

``window_messages`` applies flowmem's window rules (``flowmem.core.window``, the ones
``MemoryService.load(max_tokens=…)`` applies to a stored buffer) to a list of LangChain
messages: the longest sendable suffix within ``max_tokens`` tokens, never a tool result
without the ``AIMessage`` that called it, a reasoning part kept with its turn, system
messages kept and counted (unless ``keep_system`` is False). Each message is counted as
the flowmem row it converts to (``flowmem.integrations.langchain.message_to_row``) with
``counter`` (default ``flowmem.core.tokens.estimate_tokens``, the count flowmem stores).
A budget the newest turn alone does not fit raises ``WindowTooSmallError``
(``window_too_small``): nothing is cut silently.

``FlowmemWindow`` is the ``create_agent`` middleware: it windows the model request
(``wrap_model_call``), never the state, so the checkpointed thread keeps every message.
``window_hook`` is the prebuilt ReAct agent's ``pre_model_hook``: it returns the window as
``llm_input_messages`` (and, like ``heal_hook``, writes MEM-3's placeholders into the state
first, since that agent takes one hook). Both say what the last call cut in ``last_window``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Optional, cast

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from flowmem.core.tokens import Counter, estimate_tokens
from flowmem.core.window import WindowScan, row_facts
from flowmem.integrations.langchain import message_to_row
from flowmem.integrations.langgraph.healing import WriteAheadTools, heal_messages
from flowmem.integrations.langgraph.writeahead import awrite_ahead, write_ahead
from flowmem.results import TokenWindow
from flowmem.service import window_args
from flowmem.store.window import checked_count

log = logging.getLogger(__name__)


def window_messages(
    messages: Sequence[BaseMessage],
    max_tokens: int,
    counter: Counter | None = None,
    keep_system: bool = True,
    first_role: str | None = None,
) -> tuple[list[BaseMessage], TokenWindow]:
    """The longest sendable suffix of ``messages`` within ``max_tokens``, and what was cut.

    The messages kept are the very objects given, in order. Only the system messages and
    the messages scanned from the end (the kept ones and at most one more turn) are
    converted and counted, so ``cut_tokens`` is None when some were cut unread.
    InvalidInputError for bad arguments, WindowTooSmallError when nothing sendable fits.
    """
    budget = window_args(None, max_tokens, counter, first_role)
    assert budget is not None
    count = estimate_tokens if counter is None else counter
    counted = {
        i: checked_count(count, message_to_row(m))
        for i, m in enumerate(messages)
        if isinstance(m, SystemMessage)
    }
    scan = WindowScan(budget, counted, keep_system, first_role)
    for i in range(len(messages) - 1, -1, -1):
        row = message_to_row(messages[i])
        if i not in counted:
            counted[i] = checked_count(count, row)
        scan.feed(i, row_facts(row, counted[i]))
        if scan.done:
            break
    total = sum(counted.values()) if len(counted) == len(messages) else None
    cut = scan.window(len(messages), total)
    window = TokenWindow(budget, cut.tokens, cut.start, cut.cut_messages, cut.cut_tokens)
    return [messages[i] for i in cut.kept], window


class _Windowing:
    """The window settings, and what the last model call's window cut."""

    def __init__(
        self,
        max_tokens: int,
        counter: Counter | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
    ) -> None:
        window_args(None, max_tokens, counter, first_role)  # refuse bad settings at build time
        self.max_tokens = max_tokens
        self.counter = counter
        self.keep_system = keep_system
        self.first_role = first_role
        self.last_window: TokenWindow | None = None

    def window(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The window of ``messages``; ``last_window`` and the log say what was cut."""
        kept, window = window_messages(
            messages, self.max_tokens, self.counter, self.keep_system, self.first_role
        )
        self.last_window = window
        if window.cut_messages:
            log.debug("flowmem window: %s", window.to_dict())
        return kept


class FlowmemWindow(_Windowing, WriteAheadTools):
    """``create_agent`` middleware: the model is sent a token window; the state keeps all.

    Like ``FlowmemHealing`` it writes ahead: the model is asked, and each tool started,
    once the checkpoint holding its input is stored (decision 0097).

    ``max_tokens`` counts the request's system message too (kept unless ``keep_system``
    is False). Put it after ``FlowmemHealing`` so the window is taken of a healed thread.
    ``last_window``: what the last model call's window cut (the latest run's, when one
    middleware serves concurrent runs).
    """

    def _windowed(self, request: ModelRequest) -> ModelRequest:
        system = request.system_message
        messages = [system, *request.messages] if system is not None else list(request.messages)
        kept = cast("list[AnyMessage]", self.window(messages))  # the very messages given
        if system is not None and kept and kept[0] is system:
            return request.override(messages=kept[1:])
        return request.override(messages=kept, system_message=None)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """Call the model with the window of the request's messages, once they are stored."""
        write_ahead()
        return handler(self._windowed(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """``wrap_model_call`` for async runs (the write-ahead awaited)."""
        await awrite_ahead()
        return await handler(self._windowed(request))


class WindowHook(_Windowing):
    """The prebuilt ReAct agent's ``pre_model_hook``: MEM-3 into the state, a window to the model."""

    def __call__(
        self,
        state: Any,
        config: Optional[RunnableConfig] = None,  # noqa: UP045  (LangGraph matches this text)
    ) -> dict[str, Any]:
        """``llm_input_messages``: the window; ``messages``: the healed thread when it needed healing.

        Runs once the checkpoint holding the question is stored (``write_ahead``).
        """
        write_ahead(config)
        messages = state["messages"] if isinstance(state, dict) else state.messages
        healed = heal_messages(messages)
        update: dict[str, Any] = {"llm_input_messages": self.window(healed or messages)}
        if healed is not None:
            update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *healed]
        return update


def window_hook(
    max_tokens: int,
    counter: Counter | None = None,
    keep_system: bool = True,
    first_role: str | None = None,
) -> WindowHook:
    """A ``pre_model_hook`` sending the model a ``max_tokens`` window (its ``last_window``: the cut)."""
    return WindowHook(max_tokens, counter, keep_system, first_role)


__all__ = ["FlowmemWindow", "WindowHook", "window_hook", "window_messages"]
