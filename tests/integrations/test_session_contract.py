"""The SDK's ``Session`` contract, run on ``SQLiteSession`` and ``FlowmemSession`` side by side.

``session_memory`` is each store backend in process, a ``Client`` of a real
``flowmem serve`` (``remote``) and an ``AsyncClient`` of it (``async-remote``, awaited
without a thread): the contract holds over HTTP too, either way.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory.session import Session
from agents.memory.session_settings import SessionSettings
from openai.types.responses import ResponseFunctionWebSearch, ResponseReasoningItem
from openai.types.responses.response_function_web_search import ActionSearch
from openai.types.responses.response_reasoning_item import Summary
from pydantic import ValidationError

from flowmem.integrations.openai_agents import FlowmemSession
from flowmem.memory import AsyncMemory, Memory
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations import session_contract as contract
from tests.integrations.scripted_model import ScriptedModel, call, text

set_tracing_disabled(True)


def _sdk_maker(tmp_path: Path) -> contract.Make:
    db = str(tmp_path / "sdk.db")  # one file, so sessions of different ids share it

    def make(session_id: str, settings: Any) -> Any:
        return SQLiteSession(session_id, db, session_settings=settings)

    return make


def _flowmem_maker(service: Memory | AsyncMemory) -> contract.Make:
    def make(session_id: str, settings: Any) -> Any:
        return FlowmemSession(session_id, service, session_settings=settings)

    return make


@pytest.mark.parametrize("scenario", contract.SCENARIOS, ids=lambda s: s.__name__)
def test_contract_same_results_as_the_sdk_sqlite_session(
    scenario: contract.Scenario, session_memory: Memory | AsyncMemory, tmp_path: Path
) -> None:
    sdk = asyncio.run(scenario(_sdk_maker(tmp_path)))
    ours = asyncio.run(scenario(_flowmem_maker(session_memory)))
    assert sdk == contract.EXPECTED[scenario.__name__]  # the contract, as the SDK keeps it
    assert ours == sdk


def test_both_satisfy_the_protocol(session_memory: Memory | AsyncMemory) -> None:
    assert isinstance(FlowmemSession("s", session_memory), Session)
    assert isinstance(SQLiteSession("s"), Session)


CORPUS = sorted((Path(__file__).resolve().parents[1] / "corpus" / "responses").glob("*.json"))
HEALED = {"unanswered_function_call.json"}  # MEM-3: the next user turn heals the open call


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_every_documented_item_history_comes_back_as_added(
    path: Path, session_memory: Memory | AsyncMemory, tmp_path: Path
) -> None:
    items = json.loads(path.read_text(encoding="utf-8"))["payload"]["input"]

    async def scenario(session: Any) -> list[Any]:
        await session.add_items(items)
        got = contract.as_json(await session.get_items())
        popped = [await session.pop_item() for _ in range(len(got) + 1)]
        return [got, contract.as_json(popped)]

    sdk = asyncio.run(scenario(SQLiteSession("s", str(tmp_path / "sdk.db"))))
    ours = asyncio.run(scenario(FlowmemSession("s", session_memory)))
    assert sdk[0] == items
    if path.name in HEALED:
        # the healed placeholder answers the open call right after its turn
        assert [i.get("type") for i in ours[0]].count("function_call_output") == 1 + [
            i.get("type") for i in items
        ].count("function_call_output")
        assert [i for i in ours[0] if i.get("output") != "Tool call was interrupted; no result."] == items
    else:
        assert ours == sdk


# --- under the Runner: the model sees the same input either way --------------------------


def _weather(city: str) -> str:
    return {"Lisbon": "18C"}.get(city, "unknown")


def _reasoning(n: int) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=f"rs_{n}",
        type="reasoning",
        summary=[Summary(type="summary_text", text="Check the weather tool.")],
        encrypted_content=f"gAAAA-{n}",
    )


def _search(n: int) -> ResponseFunctionWebSearch:
    return ResponseFunctionWebSearch(
        id=f"ws_{n}",
        type="web_search_call",
        status="completed",
        action=ActionSearch(type="search", query="Lisbon weather"),
    )


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            [_reasoning(1), _search(1), call("c1", "weather", city="Lisbon")],
            [_reasoning(2), text("18C in Lisbon.", 2)],
            [text("You asked about Lisbon.", 3)],
            [text("Still Lisbon.", 4)],
        ]
    )


async def _run(session: Any) -> tuple[list[Any], list[Any]]:
    model = _script()
    agent = Agent(
        name="helper",
        instructions="be brief",
        model=model,
        tools=[function_tool(_weather, name_override="weather")],
    )
    hooks = contract.hooks_of(session)
    await Runner.run(agent, "weather in Lisbon?", session=session, hooks=hooks)
    await Runner.run(agent, "what did I ask?", session=session, hooks=hooks)
    limited = RunConfig(session_settings=SessionSettings(limit=3))
    await Runner.run(agent, "and now?", session=session, run_config=limited, hooks=hooks)
    return contract.as_json(model.inputs), contract.as_json(await session.get_items())


def test_runner_with_reasoning_and_hosted_tools_matches_the_sdk_session(
    session_memory: Memory | AsyncMemory, tmp_path: Path
) -> None:
    """The issue's case: a run with web search raised and kept only the user message."""
    sdk_inputs, sdk_items = asyncio.run(_run(SQLiteSession("s", str(tmp_path / "sdk.db"))))
    inputs, items = asyncio.run(_run(FlowmemSession("s", session_memory)))
    assert items == sdk_items
    assert inputs == sdk_inputs
    types = [i.get("type", "message") for i in items]
    assert types.count("reasoning") == 2 and "web_search_call" in types
    assert len(inputs[-1]) == 3 + 1  # RunConfig's session limit, then the new input


# --- session settings: checked as the SDK's own sessions check them ----------------------

BAD_SETTINGS = {
    "unknown-field": {"limitt": 1},
    "unknown-beside-known": {"limit": 1, "max_turns": 2},
    "not-a-dict": 5,
    "a-string": "limit=1",
    "limit-not-a-number": {"limit": "x"},
    "limit-a-fraction": {"limit": 1.5},
}


def _refusal(make: Any) -> BaseException:
    with pytest.raises(Exception) as refused:
        make()
    return refused.value


@pytest.mark.parametrize("bad", BAD_SETTINGS.values(), ids=BAD_SETTINGS.keys())
def test_bad_session_settings_are_refused_as_sqlite_session_refuses_them(
    bad: Any, tmp_path: Path
) -> None:
    """The issue's case: ``{"limitt": 1}`` raised ``TypeError`` in the SDK and nothing in flowmem."""
    memory = MemoryService(MemoryStore())
    sdk = _refusal(lambda: SQLiteSession("s", str(tmp_path / "sdk.db"), session_settings=bad))
    ours = _refusal(lambda: FlowmemSession("s", memory, session_settings=bad))
    assert type(ours) is type(sdk)
    if isinstance(sdk, ValidationError):
        assert isinstance(ours, ValidationError)
        assert [(e["type"], e["loc"]) for e in ours.errors()] == [
            (e["type"], e["loc"]) for e in sdk.errors()
        ]
    else:
        assert str(ours).startswith(str(sdk))  # flowmem adds which fields there are
    assert asyncio.run(FlowmemSession("s", memory).get_items()) == []  # nothing was written


def test_unknown_session_setting_names_the_fields_a_flowmem_session_takes() -> None:
    with pytest.raises(TypeError, match=r"^Unknown session settings: limitt \(a FlowmemSession takes limit, max_tokens\)$"):
        FlowmemSession("s", MemoryService(MemoryStore()), session_settings={"limitt": 1})


@pytest.mark.parametrize("good", [{"limit": True}, {"limit": -1}, {}, SessionSettings(limit=4)])
def test_settings_the_sdk_accepts_give_the_same_limit(good: Any, tmp_path: Path) -> None:
    sdk = SQLiteSession("s", str(tmp_path / "sdk.db"), session_settings=good)
    ours = FlowmemSession("s", MemoryService(MemoryStore()), session_settings=good)
    assert ours.session_settings.limit == sdk.session_settings.limit
