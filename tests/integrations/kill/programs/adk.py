"""The kill matrix's Google ADK program: the ``Runner`` block of ``docs/integrations.md``, run for one turn.

The block is taken from the doc as written (the one with ``FlowmemSessionService`` and
``run_async``); only its stand-in model (``Echo()``), its tool (``weather``) and its
database are swapped, for the scripted model, the scripted tool and the round's place,
and its closing ``assert`` (the doc's own check) is left out. The control runs the
same block on ADK's ``DatabaseSessionService`` over a SQLite file (aiosqlite).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Iterable
from pathlib import Path
from typing import Any

# What a first run of a Runner imports, so the fork server preloads it (a child's turn
# then costs its turn, not 1.5 s of imports):
import google.adk.flows.llm_flows.auto_flow
import google.adk.runners
import google.adk.telemetry.tracing
import google.adk.tools.agent_tool
import google.adk.workflow._node_runner_utils
import google.adk.workflow._workflow  # noqa: F401
from google.adk.agents import LlmAgent  # noqa: F401  (the block's agent)
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions import DatabaseSessionService
from google.genai import types
from pydantic import PrivateAttr

import flowmem.store.postgres  # the stores the rounds open
import flowmem.store.sqlite  # noqa: F401
from flowmem.integrations.adk import FlowmemSessionService
from tests.integrations.kill.harness import CONTROL, FLOWMEM, said_list
from tests.integrations.kill.points import Killer
from tests.integrations.kill.script import TOOL, Said, reply
from tests.integrations.kill.warm import warm

warm(  # what a turn would import and complete on first use, once in the fork server
    (
        "google.adk.a2a.agent",
        "google.adk.agents._agent_router",
        "google.adk.auth.auth_preprocessor",
        "google.adk.models.gemini_llm_connection",
        "google.adk.models.google_llm",
        "google.adk.tools.google_search_tool",
        "google.adk.tools.vertex_ai_search_tool",
        "google.adk.utils._client_labels_utils",
        "google.adk.utils._gcp_metadata",
        "google.adk.utils._google_client_headers",
        "google.adk.utils.streaming_utils",
        "google.adk.workflow._llm_agent_wrapper",
        "aiosqlite",  # the control's DatabaseSessionService
        "sqlalchemy.dialects.sqlite.aiosqlite",  # the control's DatabaseSessionService
    ),
    (
        types.AudioTranscriptionConfig,
        types.Content,
        types.FunctionCall,
        types.FunctionDeclaration,
        types.FunctionResponse,
        types.GenerateContentConfig,
        types.LiveConnectConfig,
        types.Part,
        types.Tool,
        types.UserContent,
    ),
)

CONTROL_STORE = "ADK `DatabaseSessionService` (SQLite, aiosqlite)"
DOC = Path(__file__).resolve().parents[4] / "docs" / "integrations.md"
APP, USER = "shop", "ana"
SWAPS = {
    "model=Echo()": "model=MODEL",
    "tools=[weather]": "tools=[TOOL]",
    'DATABASE = "sqlite:///adk.db"': "DATABASE = PLACE",
}
"""What the doc's block is run with instead: the scripted model and tool, the round's database."""
CHECK = "\nassert asyncio.run(chat("
"""Where the block's own check starts (left out: it asserts the stand-in's echo)."""


def block() -> str:
    """The doc's ADK ``Runner`` program, with the swaps made and its closing check left out."""
    found = [
        b
        for b in re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
        if "FlowmemSessionService(" in b and "run_async(" in b
    ]
    if len(found) != 1:
        raise LookupError(f"docs/integrations.md has {len(found)} ADK Runner blocks, not 1")
    program: str = found[0]
    for old, new in SWAPS.items():
        if old not in program:
            raise LookupError(f"the ADK block no longer contains {old!r}")
        program = program.replace(old, new)
    return program.split(CHECK, 1)[0]


def said(contents: Iterable[types.Content | None]) -> list[Said]:
    """Contents (a request's or events') as the matrix judges them: one tool message per response."""
    out: list[Said] = []
    for content in contents:
        parts = list(content.parts or []) if content is not None else []
        responses = [p.function_response for p in parts if p.function_response]
        if responses:
            out.extend(Said("tool", str(r.response), answers=r.id) for r in responses)
            continue
        text = "".join(p.text for p in parts if p.text)
        calls = tuple(str(p.function_call.id) for p in parts if p.function_call)
        if content is None or (not text and not calls):
            continue
        role = "user" if content.role == "user" else "assistant"
        out.append(Said(role, text, calls=calls))
    return out


class ScriptedGemini(BaseLlm):
    """The scripted model: answers by ``script.reply``, calls the killer's hooks, keeps each request."""

    model: str = "scripted"
    _killer: Killer = PrivateAttr()
    _requests: list[list[Said]] = PrivateAttr(default_factory=list)

    def __init__(self, killer: Killer) -> None:
        super().__init__(model="scripted")
        self._killer = killer

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """The scripted answer to the request: a call of ``script.TOOL`` (id ``CALL_ID``) or a text."""
        history = said(llm_request.contents)
        self._requests.append(history)
        self._killer.model_start(len(self._requests))
        answer = reply(history)
        if answer.call_id is not None:
            call = types.FunctionCall(id=answer.call_id, name=TOOL, args=dict(answer.args))
            part = types.Part(function_call=call)
        else:
            part = types.Part(text=answer.text)
        self._killer.model_end(len(self._requests), answer.call_id is not None)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def scripted_tool(killer: Killer) -> Any:
    """The scripted ``weather`` tool: the killer's tool hooks around ``TOOL_RESULT``."""

    def weather(city: str) -> str:
        """Today's weather in a city."""
        return killer.tool()

    return weather


def _setup(store: str, place: str) -> tuple[str, dict[str, Any]]:
    """The block to run on ``store`` and its database name."""
    program = block()
    if store == FLOWMEM:
        return program, {"PLACE": place}
    if store == CONTROL:
        program = program.replace("FlowmemSessionService(", "DatabaseSessionService(")
        url = f"sqlite+aiosqlite:///{Path(place) / 'adk-control.db'}"
        return program, {"PLACE": url, "DatabaseSessionService": DatabaseSessionService}
    raise ValueError(f"unknown store {store!r}: {FLOWMEM!r} or {CONTROL!r}")


async def _stored(store: str, url: str, thread: str) -> list[Said]:
    service = FlowmemSessionService(url) if store == FLOWMEM else DatabaseSessionService(url)
    async with service:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=thread)
    return said(e.content for e in session.events) if session is not None else []


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the doc's ADK program on ``thread`` (Ana's session), the scripted model and tool."""
    program, names = _setup(store, place)
    model = ScriptedGemini(killer)
    namespace: dict[str, Any] = {"MODEL": model, "TOOL": scripted_tool(killer), **names}
    exec(compile(program, str(DOC), "exec"), namespace)
    asyncio.run(namespace["chat"](thread, text))
    stored = asyncio.run(_stored(store, names["PLACE"], thread))
    return {"requests": [said_list(r) for r in model._requests], "stored": said_list(stored)}
