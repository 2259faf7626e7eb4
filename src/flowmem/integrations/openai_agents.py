"""OpenAI Agents SDK session backed by a flowmem buffer (``pip install 'flowmem[openai-agents]'``).

``FlowmemSession`` implements the SDK's ``Session`` protocol. Items are stored as
flowmem rows (``flowmem.formats.from_responses``), so every write goes through
``MemoryService.append``: a re-delivered ``function_call_output`` is stored once
(MEM-1), a re-delivered model turn once (MEM-2), a ``function_call`` left without
output by an aborted run is answered by a placeholder when the next user message
is added (MEM-3) instead of being dropped from the history, and a ``session``
scope without a real session id refuses (MEM-7, MEM-13).
"""

from __future__ import annotations

from flowmem.integrations import require

require("agents", "openai-agents")

import asyncio  # noqa: E402
import copy  # noqa: E402
from typing import TYPE_CHECKING, Any, cast  # noqa: E402

from flowmem.core import Message, call_ids, entry_id, normalize  # noqa: E402
from flowmem.errors import ConfigurationError  # noqa: E402
from flowmem.formats import from_responses, row_to_items, to_responses  # noqa: E402
from flowmem.scope import ExecutionContext  # noqa: E402
from flowmem.service import BufferResult, MemoryService  # noqa: E402
from flowmem.store.base import Address, SupportsPopLast  # noqa: E402

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

# Items the SDK may store that carry nothing a later turn needs: a reasoning item
# is optional model input, so it is left out rather than refused.
IGNORED_ITEM_TYPES = frozenset({"reasoning"})


def items_of(rows: list[Message], limit: int | None = None) -> list[dict[str, Any]]:
    """Return rows as sendable Responses items (MEM-5), the last ``limit`` items when given.

    A cut that would start on a ``function_call_output`` is trimmed so the slice
    stays sendable, so fewer than ``limit`` items can come back.
    """
    items = to_responses(rows)
    if limit is None:
        return items
    if limit <= 0:
        return []
    return to_responses(from_responses(items[-limit:]))


def _without_last_call(row: Message) -> Message:
    """Return a copy of an assistant row without its last call that has a usable id."""
    remainder = copy.deepcopy(row)
    meta = remainder.setdefault("metadata", {})
    calls = list(meta.get("tool_calls") or [])
    last_id = call_ids(row)[-1]
    for index in range(len(calls) - 1, -1, -1):
        if entry_id(calls[index]) == last_id:
            del calls[index]
            break
    meta["tool_calls"] = calls
    return remainder


class FlowmemSession:
    """An Agents SDK ``Session`` stored in one flowmem buffer.

    ``session_id`` is also the flowmem ``session`` scope id unless ``context`` is
    given. ``get_items`` returns the buffer normalized (MEM-5): a call whose output
    has not arrived reads as interrupted, while the stored buffer keeps it open for
    the real output. ``last_result`` holds what the last ``add_items`` reported.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        service: MemoryService,
        *,
        context: ExecutionContext | None = None,
        scope: str = "session",
        key: str = "agent_items",
        max_messages: int = 0,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.service = service
        self.context = context if context is not None else ExecutionContext(session_id=session_id)
        self.scope = scope
        self.key = key
        self.max_messages = max_messages
        self.session_settings = session_settings
        self.last_result: BufferResult | None = None

    def _load(self, limit: int | None) -> list[dict[str, Any]]:
        # Each row gives at least one item, so the last ``limit`` rows hold the last
        # ``limit`` items.
        rows = self.service.load(self.scope, self.key, self.context, last=limit).messages
        return items_of(rows, limit)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Return the history as sendable Responses items (the last ``limit`` when given)."""
        items = await asyncio.to_thread(self._load, limit)
        return cast("list[TResponseInputItem]", items)

    def _add(self, items: list[Any]) -> None:
        rows = from_responses(items, ignore_types=IGNORED_ITEM_TYPES)
        self.last_result = self.service.append(
            self.scope, self.key, rows, self.context, self.max_messages, return_messages=False
        )

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items through ``MemoryService.append`` (dedup, healing, window, refusal).

        Implements MEM-1, MEM-2 and MEM-3 through the service. Raises
        ``UnsupportedContentError`` (nothing written) for an item flowmem cannot
        carry, e.g. an image or a hosted-tool call.
        """
        await asyncio.to_thread(self._add, list(items))

    def _pop(self) -> dict[str, Any] | None:
        probe = self.service.load(self.scope, self.key, self.context, last=0)
        if probe.refusal is not None:
            return None
        store = self.service.store
        if not isinstance(store, SupportsPopLast):
            raise ConfigurationError(
                f"{type(store).__name__} cannot remove a buffer's last row (pop_last), "
                "which FlowmemSession.pop_item needs"
            )
        address = Address(self.scope, probe.resolved_scope_id, self.key)
        row = store.pop_last(address)
        if row is None:
            return None
        items = row_to_items(row)
        if len(items) > 1:
            # The row was a model turn of several items: put back all but the last call.
            self.service.append_raw(
                self.scope, probe.resolved_scope_id, self.key, [_without_last_call(row)]
            )
        return items[-1]

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item (None when empty or refused).

        The last row is removed in one store call; when it was a model turn holding
        several items (text and calls), the turn without its last call is appended
        back right away — a second write, not one transaction.
        """
        item = await asyncio.to_thread(self._pop)
        return cast("TResponseInputItem | None", item)

    async def clear_session(self) -> None:
        """Delete every item of this session (nothing when the scope refuses)."""
        await asyncio.to_thread(self.service.clear, self.scope, self.key, self.context)

    def normalized_rows(self) -> list[Message]:
        """Return the stored rows normalized (MEM-5), for inspection and tests."""
        return normalize(self.service.load(self.scope, self.key, self.context).messages).messages


__all__ = ["IGNORED_ITEM_TYPES", "FlowmemSession", "items_of"]
