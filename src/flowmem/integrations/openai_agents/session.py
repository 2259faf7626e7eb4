"""``FlowmemSession``: the Agents SDK's ``Session`` stored in one flowmem buffer.

Items are stored as flowmem rows (``flowmem.formats.from_responses``), so every write
goes through ``Memory.append`` — in process (``MemoryService``) or on a ``flowmem serve``
(``flowmem.client.Client``), the same rules either way: a re-delivered
``function_call_output`` is stored once (MEM-1), a re-delivered model turn once
(MEM-2), a ``function_call`` left without output by an aborted run is answered by a
placeholder when the next user message is added (MEM-3) instead of being dropped from
the history, and a ``session`` scope without a real session id refuses (MEM-7, MEM-13).
With ``FlowmemRunHooks`` a run stores each model response before its tools start
(``write_ahead``; decision 0098).

The SDK's session is async. Given a synchronous ``Memory`` (a ``MemoryService``, a
``Client``), every call runs in a worker thread, one at a time in the order made
(``InThread``, decision 0152); given an ``AsyncMemory`` (an ``AsyncClient``), every
call is awaited on the caller's event loop, no thread. Which one is decided once, at construction
(``flowmem.integrations.async_memory_of``); the session's methods have one code
path for both (decision 0036, docs/integrations.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from flowmem.core import Message, normalize
from flowmem.formats import from_responses, row_to_items
from flowmem.integrations import InThread, async_memory_of, is_async_memory
from flowmem.integrations.openai_agents.items import items_of, output_item, repaired_items
from flowmem.integrations.openai_agents.settings import session_settings_of
from flowmem.integrations.openai_agents.write_ahead import (
    LOCAL_CALLS,
    WriteAhead,
    has_real_id,
    item_key,
)
from flowmem.memory import AsyncMemory, Memory
from flowmem.results import BufferResult, TokenWindow
from flowmem.scope import ExecutionContext
from flowmem.service.checks import check_context_ids

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.run_context import RunContextWrapper

TURN_TAIL = 32
"""How many of the newest rows a first save of a process searches for items already stored ahead."""


class FlowmemSession:
    """An Agents SDK ``Session`` stored in one flowmem buffer.

    ``session_id`` is also the flowmem ``session`` scope id unless ``context`` is
    given. ``service`` is a ``flowmem.memory.Memory`` (a ``MemoryService`` on a local
    database, a ``flowmem.client.Client`` talking to a ``flowmem serve``), each call
    run in a worker thread, or an ``flowmem.memory.AsyncMemory`` (a
    ``flowmem.client.AsyncClient``), each call awaited on the caller's loop.
    Items are stored losslessly (``flowmem.formats.from_responses``): every
    item type the SDK's ``SQLiteSession`` stores, with its ids, status,
    annotations and reasoning. ``get_items`` returns the buffer as stored, tool
    pairing repaired (MEM-5 rule 3, nothing reordered): a call whose output has not
    arrived reads as interrupted, while the stored buffer keeps it open for the
    real output. ``close()`` ends the session as ``SQLiteSession.close`` does. ``session_settings`` (a
    ``SessionSettings``, a ``FlowmemSessionSettings`` or a dict of its fields) gives the default
    ``limit`` of ``get_items``, as in the SDK's sessions, and ``max_tokens`` its token budget. ``last_result`` holds what the last
    ``add_items`` reported.

    Run it with its hooks, ``Runner.run(agent, input, session=session,
    hooks=FlowmemRunHooks(session))``: each model response that leads to a tool is then
    stored before the tool starts (``write_ahead``), and the SDK's own save of it later
    is recognised, not stored twice. A run without them warns once
    (``WriteAheadWarning``). Every method takes the SDK's ``wrapper`` (the run's
    context, given by the ``Runner``), as the SDK's context-aware sessions do.
    """

    session_settings: SessionSettings | None = None
    _closed = False

    def __init__(
        self,
        session_id: str,
        service: Memory | AsyncMemory,
        *,
        context: ExecutionContext | None = None,
        scope: str = "session",
        key: str = "agent_items",
        max_messages: int = 0,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.service = service
        self.memory = async_memory_of(service, "FlowmemSession")
        """``service``'s operations, awaited: itself, or each call in a worker thread."""
        self.context = context if context is not None else ExecutionContext(session_id=session_id)
        check_context_ids(self.context)  # ids the API would refuse raise here (issue 38 §4)
        self.scope = scope
        self.key = key
        self.max_messages = max_messages
        self.session_settings = session_settings_of(session_settings)
        self.last_result: BufferResult | None = None
        self.last_window: TokenWindow | None = None
        """What the last ``get_items`` under ``max_tokens`` cut."""
        self.write_ahead = WriteAhead()
        """The model output held by ``FlowmemRunHooks`` and the items stored ahead of the SDK's save."""
        self._turn_seen = False

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """Return the history as Responses items, the last ``limit`` when given.

        Without ``limit``, ``session_settings.limit`` applies (the SDK's
        ``resolve_session_limit``); ``None`` or a negative limit is every item. As
        ``SQLiteSession``'s: the last N items exactly, even when they begin with an
        output whose call comes before them.
        """
        self._check_open()
        resolved = resolve_session_limit(limit, self.session_settings)
        budget = getattr(self.session_settings, "max_tokens", None)
        if budget is not None and limit is None:
            loaded = await self.memory.load(self.scope, self.key, self.context, max_tokens=budget)
            self.last_window = loaded.window
            return cast("list[TResponseInputItem]", items_of(loaded.messages, resolved))
        if resolved is None or resolved < 0:
            loaded = await self.memory.load(self.scope, self.key, self.context)
            return cast("list[TResponseInputItem]", items_of(loaded.messages))
        if resolved == 0:
            return []
        # Each row gives at least one item: the last ``resolved`` rows hold the last
        # ``resolved`` items, unless repairing them alone differs from repairing the
        # whole buffer (the window starts on an output, or holds a late one): then
        # the window doubles, up to the whole buffer.
        window = resolved
        while True:
            loaded = await self.memory.load(self.scope, self.key, self.context, last=window)
            items, dropped = repaired_items(loaded.messages)
            if len(loaded.messages) >= loaded.count or (dropped == 0 and len(items) >= resolved):
                return cast("list[TResponseInputItem]", items[-resolved:])
            window *= 2

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append items through ``Memory.append`` (dedup, healing, window, refusal).

        Implements MEM-1, MEM-2 and MEM-3 through the memory (service or server).
        Every item type is kept (messages with any parts, reasoning, hosted-tool
        items, calls and outputs of every kind); a malformed item raises
        ``InvalidMessageError`` and nothing of the batch is written. Items that
        ``FlowmemRunHooks`` stored ahead are not stored again (recognised in memory,
        and in a process that has not added a user message yet, by their ids in the
        stored rows of the current turn). Given by a ``Runner`` (``wrapper``) a tool
        call the hooks never saw, it warns once (``WriteAheadWarning``).
        """
        self._check_open()
        new, unseen_call = self.write_ahead.take(list(items))
        if wrapper is not None and unseen_call:
            calls = [str(i.get("call_id")) for i in new if isinstance(i, dict) and i.get("type") in LOCAL_CALLS]
            self.write_ahead.warn_once(self.session_id, calls)
        if not self._turn_seen:
            new = await self._not_stored_yet(new)
        if any(isinstance(i, dict) and i.get("role") == "user" for i in items):
            self._turn_seen = True
        if items and not new:
            return  # every item was stored ahead
        await self._append(new)

    async def store_ahead(self) -> None:
        """Store the model response ``FlowmemRunHooks`` hold, before a tool starts (DESIGN §5)."""
        self._check_open()
        await self.write_ahead.store(self._append)

    async def _append(self, items: list[Any]) -> None:
        rows = from_responses(list(items))
        self.last_result = await self.memory.append(
            self.scope, self.key, rows, self.context, self.max_messages, return_messages=False
        )

    async def _not_stored_yet(self, items: list[Any]) -> list[Any]:
        """``items`` without the model items (by provider id) already among the current turn's rows.

        What a process that crashed stored ahead, the SDK may save again from a run
        state it resumes; the turn's rows are those after its last user message among
        the newest ``TURN_TAIL``.
        """
        if not any(isinstance(i, dict) and has_real_id(i) for i in items):
            return items
        rows = (await self.memory.load(self.scope, self.key, self.context, last=TURN_TAIL)).messages
        users = [n for n, row in enumerate(rows) if row.get("role") == "user"]
        turn = rows[users[-1] + 1 :] if users else rows
        stored = {item_key(i) for row in turn for i in row_to_items(row) if has_real_id(i)}
        return [i for i in items if not (isinstance(i, dict) and has_real_id(i) and item_key(i) in stored)]

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove and return the most recent item (None when empty or refused).

        The last row is removed in one call (``Memory.pop_last``); when it was a
        model turn holding several items (reasoning, text, calls), the turn without
        its last item is appended back right away — a second write, not one
        transaction. A ``MemoryService`` whose store cannot remove a row raises
        ``ConfigurationError``.
        """
        self._check_open()
        row = (await self.memory.pop_last(self.scope, self.key, self.context)).message
        if row is None:  # empty, or the scope refused
            return None
        if row.get("role") == "tool":
            rest = await self.memory.load(self.scope, self.key, self.context)
            return cast("TResponseInputItem", output_item(row, rest.messages))
        items = row_to_items(row)
        if len(items) > 1:
            # The row was a model turn of several items: put back all but the last.
            rest_of_turn = from_responses(items[:-1])
            await self.memory.append(self.scope, self.key, rest_of_turn, self.context)
        return cast("TResponseInputItem", items[-1])

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """Replace the history by a compaction's output in one transaction; the old items archived.

        What the SDK's ``OpenAIResponsesCompactionSession`` calls to put the output of
        ``responses.compact`` in place of the history (issue 28 §2): every stored row
        goes to the buffer's archive (``compact_to`` of a ``MemoryService`` or, over
        HTTP, of a ``Client``/``AsyncClient``), readable with
        ``load(..., include_archived=True)``, instead of being cleared.
        CompactionStaleError, nothing changed, when the buffer was written meanwhile.
        False when the memory has no ``compact_to`` (a ``Memory`` of the caller's
        own): the SDK then clears the session and adds the items, as with its own sessions.
        """
        self._check_open()
        compact_to = getattr(self.service, "compact_to", None)
        if compact_to is None:
            return False
        rows = from_responses(list(items))
        if is_async_memory(self.service, "FlowmemSession"):
            done = await compact_to(self.scope, self.key, self.context, rows)
        else:
            # in the session's queue: after a write whose run was cancelled (decision 0152)
            done = await cast("InThread", self.memory).calls.run(
                compact_to, self.scope, self.key, self.context, rows
            )
        return done.refusal is None

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Delete every item of this session (nothing when the scope refuses), and what it held ahead."""
        self._check_open()
        await self.memory.clear(self.scope, self.key, self.context)
        self.write_ahead = WriteAhead()

    def close(self) -> None:
        """Close the session: every later call raises ``RuntimeError``, as ``SQLiteSession``'s do.

        The memory it was given (a service, a client) stays open: it is the caller's,
        and other sessions may share it. Closing twice is fine.
        """
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                f"FlowmemSession {self.session_id!r} is closed: make a new FlowmemSession "
                "for this session id to use it again"
            )

    def normalized_rows(self) -> list[Message]:
        """Return the stored rows repaired as ``get_items`` reads them (parts kept, nothing moved).

        Synchronous, so only over a synchronous ``Memory``: with an ``AsyncMemory``,
        TypeError (``await session.get_items()`` reads the history either way).
        """
        if is_async_memory(self.service, "FlowmemSession.normalized_rows"):
            raise TypeError(
                "FlowmemSession.normalized_rows is synchronous and this session's memory "
                f"({type(self.service).__name__}) is awaited: use await session.get_items()"
            )
        self._check_open()
        rows = cast("Memory", self.service).load(self.scope, self.key, self.context).messages
        return normalize(rows, keep_content=True, systems_first=False).messages


__all__ = ["TURN_TAIL", "FlowmemSession"]
