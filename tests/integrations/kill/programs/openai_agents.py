"""The kill matrix's Agents SDK program: the ``Runner`` block of ``docs/integrations.md``.

``turn`` runs the documented block itself, extracted from the doc, with a scripted model
(``script.reply``) in place of the hosted one and a scripted ``weather`` tool in place of
the doc's; on ``FLOWMEM`` it runs as written on the given database, with the session
owned by "ana"; on ``CONTROL`` the same block runs on the SDK's own ``SQLiteSession`` (a
file in ``place``), without flowmem's run hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents import SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from openai.types.shared.reasoning import Reasoning

import flowmem.integrations.openai_agents  # noqa: F401  (the fork server preloads it)
from flowmem.core import entry_id, result_id
from flowmem.core.messages import raw_tool_calls
from flowmem.formats import from_responses
from flowmem.scope import ExecutionContext
from tests.integrations.kill.harness import CONTROL, FLOWMEM, said_list
from tests.integrations.kill.points import Killer
from tests.integrations.kill.script import QUESTION, TOOL, Said, reply
from tests.integrations.kill.warm import warm

# what a turn would complete on first use, once in the fork server
warm(
    models=(
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        InputTokensDetails,
        OutputTokensDetails,
        # completed lazily by a turn when nothing in the server did it first (seen in CI)
        Reasoning,
    )
)

CONTROL_STORE = "the SDK's `SQLiteSession` on a file"
DOC = Path(__file__).resolve().parents[4] / "docs" / "integrations.md"
OWNER = "ana"
set_tracing_disabled(True)  # no trace export from a child (the network is loopback only)


def block() -> str:
    """The documented ``Runner`` program of the Agents SDK section (its one local block with a tool)."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    found = [
        b
        for b in blocks
        if "FlowmemSession(" in b
        and "Runner.run_sync(" in b
        and "@function_tool" in b
        and "Client()" not in b
    ]
    if len(found) != 1:
        raise LookupError(
            f"docs/integrations.md has {len(found)} Agents SDK Runner blocks with a tool"
        )
    return found[0]


def _swap(text: str, old: str, new: str) -> str:
    if old not in text:
        raise LookupError(f"the Agents SDK block no longer contains {old!r}")
    return text.replace(old, new)


def program(store: str) -> str:
    """The block with the model and the tool swapped (and, for the control, the SDK's store)."""
    code = block()
    tool = re.search(r"@function_tool\ndef weather\(.*?\n    return [^\n]*\n", code, re.S)
    if tool is None:
        raise LookupError("the Agents SDK block no longer defines its weather tool")
    code = code.replace(tool.group(0), "weather = TOOL\n")
    code = _swap(code, 'instructions="Be brief.")', 'instructions="Be brief.", model=MODEL)')
    code = _swap(code, '"Hi, I\'m Ana"', "TEXT")
    code = _swap(code, 'open_store("sqlite:///agents.db")', "open_store(PLACE)")
    if store == FLOWMEM:
        return _swap(
            code,
            'FlowmemSession("ana-1", memory',
            "FlowmemSession(THREAD, memory, context=ExecutionContext(session_id=THREAD, user_id=OWNER)",
        )
    session_line = re.search(r"session = FlowmemSession\(.*\)\n", code)
    if session_line is None:
        raise LookupError("the Agents SDK block no longer makes its FlowmemSession")
    code = code.replace(session_line.group(0), "session = SQLiteSession(THREAD, PLACE)\n")
    code = re.sub(r"memory = MemoryService\(.*\)\n", "", code)
    return re.sub(r", hooks=FlowmemRunHooks\(session\)", "", code)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def said_of_rows(rows: Sequence[dict[str, Any]]) -> list[Said]:
    """flowmem rows (stored, or read from Responses items) as the matrix judges them."""
    said = []
    for row in rows:
        role = str(row.get("role"))
        calls = tuple(str(entry_id(c)) for c in raw_tool_calls(row)) if role == "assistant" else ()
        answers = result_id(row) if role == "tool" else None
        said.append(Said(role, _text(row.get("content")), calls=calls, answers=answers))
    return said


def said_of_items(items: Sequence[Any]) -> list[Said]:
    """Responses items (a model input, a session's items) as the matrix judges them."""
    return said_of_rows(from_responses([dict(i) for i in items], ignore_types={"reasoning"}))


class ScriptedModel(Model):
    """Answers by ``script.reply``, calls the killer's model hooks, and records each request."""

    def __init__(self, killer: Killer, turn: str) -> None:
        self.killer = killer
        self.turn = turn
        self.requests: list[list[Said]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        """The scripted answer to ``input``: a call of the tool, or a text."""
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        history = said_of_items(items)
        self.requests.append(history)
        n = len(self.requests)
        self.killer.model_start(n)
        answer = reply(history)
        output: list[Any]
        if answer.call_id:
            output = [
                ResponseFunctionToolCall(
                    id=f"fc_{self.turn}_{n}",
                    type="function_call",
                    call_id=answer.call_id,
                    name=TOOL,
                    arguments=json.dumps(answer.args),
                    status="completed",
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text=answer.text, annotations=[])
            output = [
                ResponseOutputMessage(
                    id=f"msg_{self.turn}_{n}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        self.killer.model_end(n, bool(answer.call_id))
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """The documented program does not stream."""
        raise NotImplementedError("the kill program runs Runner.run_sync")


def scripted_tool(killer: Killer) -> Any:
    """The ``weather`` tool, as the SDK's ``function_tool``, calling the killer's tool hooks."""

    def weather(city: str) -> str:
        return killer.tool()

    return function_tool(weather, name_override=TOOL)


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the documented ``Runner`` program on ``place`` (``harness.Program``)."""
    if store not in (FLOWMEM, CONTROL):
        raise ValueError(f"unknown store {store!r}: {FLOWMEM!r} or {CONTROL!r}")
    model = ScriptedModel(killer, thread + ("" if text == QUESTION else "-again"))
    namespace: dict[str, Any] = {
        "MODEL": model,
        "TOOL": scripted_tool(killer),
        "TEXT": text,
        "THREAD": thread,
        "OWNER": OWNER,
        "ExecutionContext": ExecutionContext,
        "SQLiteSession": SQLiteSession,
        "PLACE": place if store == FLOWMEM else str(Path(place) / "agents.db"),
    }
    with contextlib.redirect_stdout(io.StringIO()):  # the block prints its answer
        exec(compile(program(store), str(DOC), "exec"), namespace)
    session = namespace["session"]
    if store == FLOWMEM:
        memory = namespace["memory"]
        rows = memory.load(session.scope, session.key, session.context).messages
        memory.store.close()
        stored = said_of_rows(rows)
    else:
        stored = said_of_items(asyncio.run(session.get_items()))
        session.close()
    return {"requests": [said_list(r) for r in model.requests], "stored": said_list(stored)}


__all__ = ["CONTROL_STORE", "ScriptedModel", "block", "program", "said_of_items", "turn"]
