"""LangChain chat history backed by a flowmem buffer (the ``langchain`` extra).

For LangChain 0.x apps: langchain-core 1.x deprecates ``BaseChatMessageHistory`` and
``RunnableWithMessageHistory``; a LangChain 1.x agent (``create_agent``) keeps its
conversation in a checkpointer, ``flowmem.integrations.langgraph.saver.FlowmemSaver``.

``FlowmemChatMessageHistory`` is a ``BaseChatMessageHistory``: every write goes
through ``Memory.append``, in process (``MemoryService``) or on a ``flowmem serve``
(``flowmem.client.Client``) with the same rules either way, so LangChain gets
flowmem's guarantees — a re-delivered ``ToolMessage`` is stored once (MEM-1), a
``HumanMessage`` after an interrupted tool call heals it (MEM-3), a late real
result replaces the placeholder (MEM-10), ``max_messages`` windows the buffer, and
a ``session``/``user`` scope without a real identity refuses instead of sharing
one history (MEM-6, 7, 13).

Nothing a LangChain message carries is lost (decision 0021): content blocks become
neutral parts where one exists (text, image, audio, file, reasoning) and
``provider`` parts otherwise; every field flowmem does not model (``id``,
``name``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
``invalid_tool_calls``, ``artifact``, the class …) is kept in
``extra["langchain"]``, so ``row_to_message(message_to_row(m)) == m``.

``FlowmemRunnableWithMessageHistory`` (``runnable.py``, decision 0101) is LangChain's
``RunnableWithMessageHistory`` storing the turn's input before the model runs, so a
crash keeps the user's message; LangChain's own class stores the turn at its end, and
the history says so once when that class reads it.

The history is here; the conversions are ``messages.py`` (messages and rows) over
``blocks.py`` (content blocks and parts).
"""

from __future__ import annotations

from flowmem.integrations import memory_of, require
from flowmem.integrations.in_order import InOrder

require("langchain_core", "langchain")

import logging  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import weakref  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import BaseMessage, RemoveMessage  # noqa: E402

from flowmem.core import Message, normalize  # noqa: E402
from flowmem.integrations.langchain.blocks import block_to_part, part_to_block  # noqa: E402
from flowmem.integrations.langchain.messages import (  # noqa: E402
    CHAT_ROLES,
    edit_refused,
    message_to_row,
    row_to_message,
)
from flowmem.integrations.langchain.runnable import (  # noqa: E402
    PLAIN_RUNNABLE_WARNING,
    FlowmemRunnableWithMessageHistory,
    warn_if_plain_runnable,
)
from flowmem.memory import Memory  # noqa: E402
from flowmem.results import BufferResult, TokenWindow  # noqa: E402
from flowmem.scope import ExecutionContext  # noqa: E402
from flowmem.service.checks import check_context_ids  # noqa: E402

log = logging.getLogger("flowmem")

# --- the history ---------------------------------------------------------------------------

# Batches whose write failed, per memory (service or client) and buffer, waiting to be
# retried (in this process) before the next read or write of the same history. LangChain's
# ``RunnableWithMessageHistory`` writes from a callback that logs and swallows
# exceptions, so without this a failed write would lose the turn silently.
_UNSTORED: weakref.WeakKeyDictionary[Memory, dict[tuple[Any, ...], list[BaseMessage]]] = (
    weakref.WeakKeyDictionary()
)
_UNSTORED_LOCK = threading.Lock()
MAX_UNSTORED_MESSAGES = 1000
"""At most this many messages wait per history; a failed write beyond it is only raised."""

# The async forms' calls of each history, per memory and buffer, in one queue (decision
# 0152): a write whose caller was cancelled goes on in its thread, and the next call of
# the same history, from this object or another made for the same buffer (LangChain's
# ``RunnableWithMessageHistory`` makes one per run), starts after it ended. A queue lives
# while a history holds it or a call of it runs.
_QUEUES: weakref.WeakKeyDictionary[
    Memory, weakref.WeakValueDictionary[tuple[Any, ...], InOrder]
] = weakref.WeakKeyDictionary()


class FlowmemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history stored in one flowmem buffer (scope, key, context).

    ``messages`` is the buffer normalized (MEM-5), i.e. what a provider accepts: a
    call still waiting for its result reads as interrupted, while the stored buffer
    keeps the call open so the real result can still land (``raw_messages`` shows
    the stored rows). Give either ``context`` or ``session_id`` (a shortcut for
    ``ExecutionContext(session_id=..., user_id=...)`` with the optional ``user_id``,
    the session's owner; ``session_id`` is what ``RunnableWithMessageHistory`` passes).
    ``service`` is any ``flowmem.memory.Memory``: a ``MemoryService`` on a local
    database, or a ``flowmem.client.Client`` talking to a ``flowmem serve``.

    A write that fails raises, and its messages are also kept (in this process) and
    written first by the next read or write of the same history; while they cannot
    be, that read or write raises too, so a turn whose write a callback swallowed is
    never lost silently. ``discard_unstored()`` drops them.

    ``max_tokens``: the history read is the longest sendable suffix within that many
    tokens (a call with its results, a reasoning part with its turn; issue 28), and
    ``last_window`` says what the last read cut.
    """

    def __init__(
        self,
        service: Memory,
        *,
        session_id: Any = None,
        user_id: Any = None,
        context: ExecutionContext | None = None,
        scope: str = "session",
        key: str = "chat_history",
        max_messages: int = 0,
        max_tokens: int | None = None,
    ) -> None:
        if context is not None and (session_id is not None or user_id is not None):
            raise TypeError(
                "FlowmemChatMessageHistory takes a context or session_id/user_id, not both: "
                "put the ids in the context (ExecutionContext(session_id=..., user_id=...))"
            )
        if context is None and (session_id is not None or user_id is not None):
            context = ExecutionContext(session_id=session_id, user_id=user_id)
        check_context_ids(context)  # ids the API would refuse raise here (issue 38 §4)
        self.service = memory_of(service, "FlowmemChatMessageHistory")
        self.context = context
        self.scope = scope
        self.key = key
        self.max_messages = max_messages
        self.max_tokens = max_tokens
        self.last_result: BufferResult | None = None
        self.last_window: TokenWindow | None = None
        self._in_order: InOrder | None = None

    def _calls(self) -> InOrder:
        """The queue the async forms run this history's calls in (one per memory and buffer)."""
        address = self._address()
        with _UNSTORED_LOCK:
            queues = _QUEUES.setdefault(self.service, weakref.WeakValueDictionary())
            calls = queues.get(address)
            if calls is None:
                calls = queues[address] = InOrder()
        self._in_order = calls  # held while this history lives
        return calls

    def _address(self) -> tuple[Any, ...]:
        ctx = self.context
        ids = () if ctx is None else tuple(repr(getattr(ctx, f)) for f in _CONTEXT_IDS)
        return (self.scope, self.key, ids)

    def _rows(self) -> list[Message]:
        self._flush_unstored()
        if self.max_tokens is None:
            return self.service.load(self.scope, self.key, self.context).messages
        loaded = self.service.load(self.scope, self.key, self.context, max_tokens=self.max_tokens)
        self.last_window = loaded.window
        return loaded.messages

    @property
    def raw_messages(self) -> list[BaseMessage]:
        """The stored rows as LangChain messages, placeholders and all, not normalized."""
        return [row_to_message(row) for row in self._rows()]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The history as stored, with tool pairing repaired (MEM-5 steps 1, 3, 4), parts kept.

        Nothing is reordered: a system message stays where it was added (LangChain's
        chat models send it there, or join it with the others themselves; DESIGN §5).
        Read by LangChain's own ``RunnableWithMessageHistory``, it logs once per process
        that the turn is stored only at its end (``FlowmemRunnableWithMessageHistory``
        stores the input first).
        """
        warn_if_plain_runnable(sys._getframe(1))
        rows = normalize(self._rows(), keep_content=True, systems_first=False).messages
        return [row_to_message(row) for row in rows]

    def _write(self, messages: Sequence[BaseMessage]) -> None:
        rows = [message_to_row(message) for message in messages]
        self.last_result = self.service.append(
            self.scope, self.key, rows, self.context, self.max_messages, return_messages=False
        )

    def _flush_unstored(self, then: Sequence[BaseMessage] = ()) -> None:
        """Write the messages an earlier failed write left (and ``then``) in one append."""
        address = self._address()
        with _UNSTORED_LOCK:
            # claimed, so a concurrent writer of the same history cannot write them too
            pending = _UNSTORED.get(self.service, {}).pop(address, [])
        if not pending:
            if then:
                self._write(then)
            return
        # A caller retrying the very batch that failed must not store it twice.
        batch = pending if then and list(then) == pending[-len(then) :] else [*pending, *then]
        try:
            self._write(batch)
        except Exception as exc:
            with _UNSTORED_LOCK:
                waiting = _UNSTORED.setdefault(self.service, {})
                waiting[address] = [*pending, *waiting.get(address, [])]
            exc.add_note(
                f"flowmem: {len(pending)} message(s) of an earlier turn of this history "
                "could not be stored and are still pending; "
                "FlowmemChatMessageHistory.discard_unstored() drops them"
            )
            raise
        log.warning(
            "flowmem: %d message(s) whose earlier write failed are now stored", len(pending)
        )

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append through ``Memory.append`` (dedup, healing, window, refusal).

        Implements MEM-1, MEM-3 and MEM-10 through the memory (service or server). All messages are
        converted before anything is written; ``last_result`` holds what the append
        reported (``appended`` 0 and ``refusal`` set when the scope refused). When
        the write fails, the error is raised and logged, and the messages wait to
        be written before the next read or write (see the class docstring). A batch
        holding a ``RemoveMessage`` is refused whole (``InvalidMessageError``) before
        anything is written, and nothing of it waits: it is an edit, not a turn.
        """
        batch = list(messages)
        _refuse_edits(batch)
        try:
            self._flush_unstored(batch)
        except Exception:
            address = self._address()
            with _UNSTORED_LOCK:
                pending = _UNSTORED.setdefault(self.service, {}).setdefault(address, [])
                kept = not batch or pending[-len(batch) :] == batch
                if not kept and len(pending) + len(batch) <= MAX_UNSTORED_MESSAGES:
                    pending.extend(batch)
                    kept = True
            if kept:
                log.exception(
                    "flowmem: a write to history %s/%s failed; its messages will be "
                    "written before the next read or write of it",
                    self.scope,
                    self.key,
                )
            else:
                log.exception(
                    "flowmem: a write to history %s/%s failed and its %d message(s) are "
                    "not kept for a retry: %d already wait (MAX_UNSTORED_MESSAGES)",
                    self.scope,
                    self.key,
                    len(batch),
                    len(pending),
                )
            raise

    def unstored(self) -> list[BaseMessage]:
        """Return the messages whose write failed and that wait to be written."""
        with _UNSTORED_LOCK:
            return list(_UNSTORED.get(self.service, {}).get(self._address(), []))

    def discard_unstored(self) -> list[BaseMessage]:
        """Drop (and return) the messages whose write failed, so reads stop retrying them."""
        with _UNSTORED_LOCK:
            return _UNSTORED.get(self.service, {}).pop(self._address(), [])

    def clear(self) -> None:
        """Delete every row of the buffer and any unstored messages (nothing when refused)."""
        self.discard_unstored()
        self.service.clear(self.scope, self.key, self.context)

    async def aget_messages(self) -> list[BaseMessage]:
        """Async ``messages`` (in a worker thread, after this history's earlier calls ended)."""
        warn_if_plain_runnable(sys._getframe(1))
        messages: list[BaseMessage] = await self._calls().run(lambda: self.messages)
        return messages

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async ``add_messages`` (in a worker thread, after this history's earlier calls ended)."""
        await self._calls().run(self.add_messages, list(messages))

    async def aclear(self) -> None:
        """Async ``clear`` (in a worker thread, after this history's earlier calls ended)."""
        await self._calls().run(self.clear)


def _refuse_edits(batch: Sequence[BaseMessage]) -> None:
    """Raise ``InvalidMessageError`` when ``batch`` holds a ``RemoveMessage`` (an append-only history)."""
    for message in batch:
        if isinstance(message, RemoveMessage):
            raise edit_refused(message)


_CONTEXT_IDS = ("workflow_id", "pipeline_id", "execution_id", "node_id", "session_id", "user_id")

__all__ = [
    "CHAT_ROLES",
    "PLAIN_RUNNABLE_WARNING",
    "FlowmemChatMessageHistory",
    "FlowmemRunnableWithMessageHistory",
    "block_to_part",
    "message_to_row",
    "part_to_block",
    "row_to_message",
]
