"""The kill matrix's pydantic-ai program: the ``Agent`` block of ``docs/integrations.md``, run for one turn.

The block is executed as the doc shows it, with two swaps: the model (``TestModel``)
becomes a ``FunctionModel`` that answers by ``script.reply`` and names its call
``script.CALL_ID``, and the tool's body calls the killer's hooks and returns
``script.TOOL_RESULT``. The doc's demo (``asyncio.run(main())``) is not run: the
harness calls the block's ``turn`` once per process.

The control is the same agent saving its history the way pydantic-ai's persistence
docs show, as ``ModelMessagesTypeAdapter`` JSON in a file written after ``agent.run``:
pydantic-ai ships no persistent ``ConversationStore`` (only ``InMemoryConversationStore``).
"""

from __future__ import annotations

import asyncio
import importlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from flowmem.integrations.pydantic_ai import FlowmemConversationStore
from tests.integrations.kill.harness import CONTROL, said_list
from tests.integrations.kill.points import Killer
from tests.integrations.kill.script import CALL_ID, TOOL, Said, reply

# What every turn builds or imports first, done once in the fork server rather than in
# each child: pydantic's deferred schemas of the messages and of a record, and the
# modules a run and a store import lazily.
ModelMessagesTypeAdapter.dump_python([])
importlib.import_module("pydantic_ai.models.test")
importlib.import_module("flowmem.store.sqlite")
importlib.import_module("flowmem.store.postgres")
importlib.import_module("anyio._backends._asyncio")

CONTROL_STORE = (
    "pydantic-ai's history as `ModelMessagesTypeAdapter` JSON in a file, written after `agent.run`"
)

DOC = Path(__file__).resolve().parents[4] / "docs" / "integrations.md"
SWAPS = {
    "Agent(TestModel())": "Agent(FunctionModel(scripted_model))",
    'return f"sunny in {city}"': "return scripted_tool(city)",
    "asyncio.run(main())": "",
}
"""What the program changes in the doc's block: the model, the tool's body, and the demo not run."""


def doc_block() -> str:
    """The pydantic-ai block of ``docs/integrations.md`` (the one defining the agent and its tool)."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if "FlowmemConversationStore" in b and "@agent.tool_plain" in b]
    if len(found) != 1:
        raise LookupError(f"docs/integrations.md has {len(found)} pydantic-ai agent blocks, not 1")
    return found[0]


def said(messages: Sequence[ModelMessage]) -> list[Said]:
    """pydantic-ai messages as the matrix judges them (a request's parts in their order)."""
    out: list[Said] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = tuple(p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart))
            out.append(Said("assistant", text, calls=calls))
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                out.append(Said("user", part.content if isinstance(part.content, str) else ""))
            elif isinstance(part, ToolReturnPart) or (
                isinstance(part, RetryPromptPart) and part.tool_name is not None
            ):
                out.append(Said("tool", str(part.content), answers=part.tool_call_id))
    return out


class _Turn:
    """One process's turn: its killer, the model calls so far and the requests the model was given."""

    def __init__(self, killer: Killer) -> None:
        self.killer = killer
        self.calls = 0
        self.requests: list[list[Said]] = []

    def model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """The scripted model: ``script.reply`` to the request, the killer's hooks around it."""
        self.calls += 1
        self.killer.model_start(self.calls)
        given = said(messages)
        self.requests.append(given)
        answer = reply(given)
        if answer.call_id is not None:
            response = ModelResponse(
                parts=[ToolCallPart(TOOL, dict(answer.args), tool_call_id=CALL_ID)]
            )
        else:
            response = ModelResponse(parts=[TextPart(answer.text)])
        self.killer.model_end(self.calls, answer.call_id is not None)
        return response

    def tool(self, city: str) -> str:
        """The scripted tool: the killer's hooks, then ``script.TOOL_RESULT``."""
        return self.killer.tool()


def _program(current: _Turn) -> dict[str, Any]:
    """The doc's block executed with the swaps: its names (``agent``, ``turn`` …)."""
    block = doc_block()
    for old, new in SWAPS.items():
        if old not in block:
            raise LookupError(f"the pydantic-ai block no longer contains {old!r}")
        block = block.replace(old, new)
    namespace: dict[str, Any] = {
        "__name__": "kill_pydantic_ai",
        "FunctionModel": FunctionModel,
        "scripted_model": current.model,
        "scripted_tool": current.tool,
    }
    exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


async def _flowmem_turn(
    names: dict[str, Any], url: str, thread: str, text: str
) -> list[ModelMessage]:
    store = FlowmemConversationStore.from_url(url)
    try:
        await names["turn"](store, thread, text)
        entries = await store.load_entries(thread) or []
        return [entry.message for entry in entries]
    finally:
        store.close()


async def _control_turn(
    agent: Agent[Any, Any], directory: str, thread: str, text: str
) -> list[ModelMessage]:
    path = Path(directory) / f"{thread}.json"
    history = ModelMessagesTypeAdapter.validate_json(path.read_bytes()) if path.exists() else []
    result = await agent.run(text, message_history=history)
    path.write_bytes(result.all_messages_json())
    return list(ModelMessagesTypeAdapter.validate_json(path.read_bytes()))


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the docs' pydantic-ai program on ``place``: flowmem's store or the control's file."""
    current = _Turn(killer)
    names = _program(current)
    if store == CONTROL:
        stored = asyncio.run(_control_turn(names["agent"], place, thread, text))
    else:
        stored = asyncio.run(_flowmem_turn(names, place, thread, text))
    return {"requests": [said_list(r) for r in current.requests], "stored": said_list(said(stored))}
