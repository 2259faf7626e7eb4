"""Write-ahead for LangChain 0.x: the turn's input is stored before the model runs (decision 0101).

LangChain's ``RunnableWithMessageHistory`` reads the history before the wrapped
runnable (``_enter_history``) and stores the turn's input and output together after it
(``_exit_history``, an ``on_end`` listener): a process killed while the model thinks
loses the user's message. ``FlowmemRunnableWithMessageHistory`` stores the input in
``_enter_history`` and only the output in ``_exit_history``, so the question is durable
before the model is called and is never stored twice (DESIGN §5, "Write-ahead at tool
boundaries"). It works over any ``BaseChatMessageHistory``.

``warn_if_plain_runnable`` lets the flowmem history tell, at its read, that LangChain's
own class is reading it, and say once per process what to use instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from langchain_core._api import suppress_langchain_beta_warning
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.load.load import load
from langchain_core.messages import BaseMessage
from langchain_core.runnables.history import RunnableWithMessageHistory

if TYPE_CHECKING:
    from langchain_core.runnables.config import RunnableConfig
    from langchain_core.tracers.schemas import Run

log = logging.getLogger("flowmem")

PLAIN_RUNNABLE_WARNING = (
    "flowmem: LangChain's RunnableWithMessageHistory stores a turn only after the model "
    "answered: a crash before that loses the user's message (and a tool call the turn "
    "made). Use flowmem.integrations.langchain.FlowmemRunnableWithMessageHistory (same "
    "arguments), which stores the message before the model runs (docs/integrations.md, "
    "LangChain 0.x; decision 0101)"
)
"""What the flowmem history logs, once per process, when the plain class reads it."""


class FlowmemRunnableWithMessageHistory(RunnableWithMessageHistory):
    """``RunnableWithMessageHistory`` that stores the turn's input before the runnable runs.

    Same arguments and behaviour as LangChain's class, except when the messages are
    stored: the input messages (the user's message, or the ``ToolMessage`` results a
    tool loop hands back) are added to the history before the wrapped runnable is
    called, and only the output messages when it ends. A turn killed while the model
    thinks keeps its input; a write that fails before the model raises from
    ``invoke`` before the model is called. The history the runnable gets is read
    after the input was stored, so it is the history as stored (with a flowmem
    history: each call answered once, MEM-1, MEM-3, MEM-5). Invoked again with the
    same input after a turn that stored no output (the model raised), the input
    already ends the history and is not stored again: the model gets it once, as
    with LangChain's class, which had stored nothing.
    """

    def _written_ahead(self, value: Any) -> list[BaseMessage]:
        """The input messages of ``value``: what LangChain's ``_exit_history`` would store as input."""
        if self.history_messages_key:
            # the runnable's input is ``value`` with the history inserted under its key
            return self._get_input_messages({**value, self.history_messages_key: []})
        return self._get_input_messages(
            value[self.input_messages_key] if self.input_messages_key else value
        )

    def _enter_history(self, value: Any, config: RunnableConfig) -> list[BaseMessage]:
        """Store the input ahead of the runnable (write-ahead), then read the history it runs on."""
        hist: BaseChatMessageHistory = config["configurable"]["message_history"]
        new = self._written_ahead(value)
        history = hist.messages
        if new and not _ends_with(history, new):
            hist.add_messages(new)
            history = hist.messages
        return self._runnable_input(history, new)

    async def _aenter_history(self, value: Any, config: RunnableConfig) -> list[BaseMessage]:
        """Async ``_enter_history``."""
        hist: BaseChatMessageHistory = config["configurable"]["message_history"]
        new = self._written_ahead(value)
        history = await hist.aget_messages()
        if new and not _ends_with(history, new):
            await hist.aadd_messages(new)
            history = await hist.aget_messages()
        return self._runnable_input(history, new)

    def _runnable_input(
        self, history: Sequence[BaseMessage], new: Sequence[BaseMessage]
    ) -> list[BaseMessage]:
        """What LangChain's class hands the runnable: the history and the input, each once.

        ``history`` was read after the input was stored, so it holds the input as the
        store keeps it (a ``ToolMessage`` answering the call it stored open, a
        placeholder MEM-3 put before a user message). The input the store did not
        keep (a refused scope) is added as LangChain's class adds it; under a
        ``history_messages_key`` the input goes in its own key, so the history ends
        before it.
        """
        kept = _ends_with(history, new)
        if self.history_messages_key:
            return list(history[: len(history) - len(new)]) if kept else list(history)
        return list(history) if kept else [*history, *new]

    def _outputs(self, run: Run) -> Sequence[BaseMessage]:
        """The run's output messages (its input was stored by ``_enter_history``)."""
        # ``load`` is beta; LangChain's own ``_exit_history`` calls it without the warning
        with suppress_langchain_beta_warning():
            outputs = load(run.outputs, allowed_objects="messages")
        return self._get_output_messages(outputs)

    def _exit_history(self, run: Run, config: RunnableConfig) -> None:
        """Store the output messages only: the input was written ahead."""
        hist: BaseChatMessageHistory = config["configurable"]["message_history"]
        hist.add_messages(self._outputs(run))

    async def _aexit_history(self, run: Run, config: RunnableConfig) -> None:
        """Async ``_exit_history``."""
        hist: BaseChatMessageHistory = config["configurable"]["message_history"]
        await hist.aadd_messages(self._outputs(run))


def _ends_with(history: Sequence[BaseMessage], new: Sequence[BaseMessage]) -> bool:
    """True when ``new`` (not empty) is the end of ``history``."""
    return bool(new) and len(history) >= len(new) and list(history[-len(new) :]) == list(new)


_PLAIN_READERS = frozenset(
    {
        RunnableWithMessageHistory._enter_history.__code__,
        RunnableWithMessageHistory._aenter_history.__code__,
    }
)
_warned = threading.Event()


def warn_if_plain_runnable(reader: FrameType | None) -> None:
    """Log ``PLAIN_RUNNABLE_WARNING`` once per process when ``reader`` is LangChain's own history read."""
    if reader is None or reader.f_code not in _PLAIN_READERS or _warned.is_set():
        return
    _warned.set()
    log.warning(PLAIN_RUNNABLE_WARNING)
