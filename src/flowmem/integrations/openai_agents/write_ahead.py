"""Write-ahead at tool boundaries for the Agents SDK (DESIGN §5; decision 0098).

The SDK's ``Runner`` saves a turn's model output to its session only after the turn's
tools ran (``save_result_to_session`` at the end of each step): a process killed inside a
tool never stored the call it was running. ``FlowmemRunHooks`` closes that window: its
``on_llm_end`` holds the model's response, and its ``on_tool_start`` stores that response
(the calls with the reasoning and message items beside them) before the first tool of the
step starts. The SDK's own save of the same items later is recognised and not stored again
(``WriteAhead.take``): in memory, item for item, and, after a crash, by the item ids the
stored rows keep. A ``FlowmemSession`` that the ``Runner`` hands a tool call the hooks never
saw warns once (``WriteAheadWarning``): the run was not given the hooks.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents.lifecycle import RunHooks, RunHooksBase
from agents.models.fake_id import FAKE_RESPONSES_ID

LOCAL_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)
"""The call items the SDK answers by running something in this process (a tool, a handoff)."""

MODEL_ITEMS = LOCAL_CALLS | {
    "message",
    "reasoning",
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
}
"""The item types a model response holds: what a write-ahead may have stored."""


class WriteAheadWarning(UserWarning):
    """A ``Runner`` ran a tool whose call was not stored first: the run had no ``FlowmemRunHooks``."""


def item_key(item: dict[str, Any]) -> str:
    """An item's identity for recognising the SDK's copy of a written-ahead one.

    The item as JSON, keys sorted, without a ``status`` of None (the SDK drops it) and
    without a reasoning item's ``id`` (a run's ``reasoning_item_id_policy`` may drop it).
    """
    kept = {k: v for k, v in item.items() if not (k == "status" and v is None)}
    if kept.get("type") == "reasoning":
        kept.pop("id", None)
    return json.dumps(kept, sort_keys=True, default=str)


def has_real_id(item: dict[str, Any]) -> bool:
    """The item is a model item carrying an id its provider made unique (not the SDK's fake one)."""
    kind = item.get("type", "message" if item.get("role") == "assistant" else None)
    given = item.get("id")
    return kind in MODEL_ITEMS and isinstance(given, str) and bool(given) and given != FAKE_RESPONSES_ID


def response_items(response: Any) -> list[dict[str, Any]]:
    """A ``ModelResponse``'s output as the session items the SDK later saves for it."""
    items = []
    for item in response.to_input_items():
        if isinstance(item, dict) and item.get("status", "") is None:
            item = {k: v for k, v in item.items() if k != "status"}
        items.append(dict(item))
    return items


class WriteAhead:
    """A session's write-ahead state: the response held since ``on_llm_end``, the items stored ahead.

    One per ``FlowmemSession`` (one conversation). ``hold`` keeps the model's latest
    response; ``store`` writes it (once, however many tools start in parallel) through
    the session's own append; ``take`` removes from a batch the SDK saves the items
    already stored ahead and says whether a local call in it had been seen by the hooks.
    """

    def __init__(self) -> None:
        self.held: list[dict[str, Any]] = []
        self.written: list[str] = []
        """Keys (``item_key``) of the items stored ahead that the SDK has not saved yet."""
        self.warned = False
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    def hold(self, items: list[dict[str, Any]]) -> None:
        """Keep a model response's items until a tool of its step starts."""
        self.held = list(items)

    def forget_held(self) -> None:
        """A new model call: a response held and never stored (its run stopped before a tool) is not stored later."""
        self.held = []

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {loop: (lock := asyncio.Lock())}  # one loop at a time (run_sync makes one per run)
        return lock

    async def store(self, append: Callable[[list[dict[str, Any]]], Awaitable[None]]) -> None:
        """Store the held response through ``append`` before a tool runs; nothing when none is held.

        Parallel tools of one step wait for the one write: none of them starts before it.
        """
        async with self._lock():
            if not self.held:
                return
            items, self.held = self.held, []
            await append(items)
            self.written.extend(item_key(i) for i in items)

    def take(self, items: Sequence[Any]) -> tuple[list[Any], bool]:
        """Return ``(new, unseen_call)``: the batch without the items stored ahead, and whether
        a local call in it was neither stored ahead nor held (the hooks never saw it).

        A batch that opens a new turn (a user message) also forgets what is left of the
        previous turn's write-ahead.
        """
        written = list(self.written)
        held = {item_key(i) for i in self.held}
        new: list[dict[str, Any]] = []
        unseen_call = False
        for item in items:
            if not isinstance(item, dict):  # malformed: from_responses refuses it
                new.append(item)
                continue
            key = item_key(item)
            if key in written:
                written.remove(key)
                continue
            if key in held:
                self.held = []  # the SDK saves the held response itself: no tool started
            elif item.get("type") in LOCAL_CALLS:
                unseen_call = True
            new.append(item)
        if any(isinstance(i, dict) and i.get("role") == "user" for i in items):
            written = []  # a new turn: the SDK saves nothing more of the last one
        self.written = written
        return new, unseen_call

    def warn_once(self, session_id: str, calls: Sequence[str]) -> None:
        """Warn, once for this session, that the run saved a call its hooks never stored first."""
        if self.warned:
            return
        self.warned = True
        warnings.warn(
            WriteAheadWarning(
                f"FlowmemSession {session_id!r}: the Runner saved tool call(s) "
                f"{', '.join(calls)} only after the tool ran, so a process killed inside the "
                "tool loses the call. Pass the session's hooks to the run: "
                "Runner.run(agent, input, session=session, hooks=FlowmemRunHooks(session)) "
                "(also run_sync and run_streamed; docs/integrations.md, OpenAI Agents SDK)"
            ),
            stacklevel=4,
        )


class FlowmemRunHooks(RunHooks):
    """``RunHooks`` that store the model's output before any tool of its step runs (DESIGN §5).

    Pass them with the session to every run: ``Runner.run(agent, input,
    session=session, hooks=FlowmemRunHooks(session))`` (``session`` a ``FlowmemSession``
    or a session wrapping one as ``underlying_session``, the SDK's
    ``OpenAIResponsesCompactionSession``). ``on_llm_end`` holds the model's
    response; ``on_tool_start`` stores it through the session before the first tool
    starts (MEM-1, MEM-2 then recognise the SDK's own save of it). ``hooks``, your own
    ``RunHooks``, are called as well, for every event, after flowmem's part.
    """

    def __init__(self, session: Any, hooks: RunHooksBase[Any, Any] | None = None) -> None:
        given = session
        if not isinstance(getattr(session, "write_ahead", None), WriteAhead):
            # a session wrapping a FlowmemSession (the SDK's OpenAIResponsesCompactionSession)
            session = getattr(session, "underlying_session", None)
        if not isinstance(getattr(session, "write_ahead", None), WriteAhead):
            raise TypeError(
                "FlowmemRunHooks needs the FlowmemSession the run is given, or a session "
                "wrapping one (Runner.run(..., session=session, hooks=FlowmemRunHooks(session))), "
                f"not {type(given).__name__}"
            )
        if hooks is not None and not isinstance(hooks, RunHooksBase):
            raise TypeError(f"hooks must be the SDK's RunHooks, not {type(hooks).__name__}")
        self.session = session
        self.hooks = hooks if hooks is not None else RunHooks()

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        """Hold the response until a tool of its step starts."""
        self.session.write_ahead.hold(response_items(response))
        await self.hooks.on_llm_end(context, agent, response)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        """Store the held response before the tool runs (DESIGN §5, write-ahead)."""
        await self.session.store_ahead()
        await self.hooks.on_tool_start(context, agent, tool)

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        """Forget a response held since an earlier model call (no tool of it started); your hooks' ``on_llm_start``."""
        self.session.write_ahead.forget_held()
        await self.hooks.on_llm_start(context, agent, system_prompt, input_items)

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        """Your hooks' ``on_agent_start``."""
        await self.hooks.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        """Your hooks' ``on_agent_end``."""
        await self.hooks.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        """Your hooks' ``on_handoff``."""
        await self.hooks.on_handoff(context, from_agent, to_agent)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        """Your hooks' ``on_tool_end``."""
        await self.hooks.on_tool_end(context, agent, tool, result)


__all__ = [
    "LOCAL_CALLS",
    "FlowmemRunHooks",
    "WriteAhead",
    "WriteAheadWarning",
    "has_real_id",
    "item_key",
    "response_items",
]
