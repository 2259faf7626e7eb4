"""Issue 23, "A crashed thread continues": MEM-3 for LangGraph agents after a SIGKILL.

A ``create_agent`` run (``tests.integrations.langgraph.crash_agent``) is killed with
SIGKILL inside its tool, so the thread's latest checkpoint holds the model's tool call
and no result. The next process sends a new user message on the same database and
thread: with ``FlowmemSaver`` and ``FlowmemHealing`` the model is given the call
answered by the healed placeholder (MEM-3) and answers; with LangGraph's own
``SqliteSaver`` the strict model rejects the history, as a provider would.

A pending call that LangGraph itself runs or resumes is not healed: ``invoke(None)``
after the crash runs the tool again, and a human-in-the-loop pause resumed with
``Command(resume=…)`` runs it once; the real result follows the call and no placeholder
appears anywhere. The prebuilt ReAct agent heals the same way through ``heal_hook``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command, interrupt

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.langgraph.healing import HEALED_ID_PREFIX, FlowmemHealing, heal_hook
from flowmem.integrations.langgraph.saver import FlowmemSaver
from tests.integrations import forkserver
from tests.integrations.langgraph import crash_agent
from tests.integrations.langgraph.crash_agent import (
    ANSWER_AFTER_CRASH,
    ANSWER_WITH_RESULT,
    CALL_ID,
    TOOL_RESULT,
)
from tests.integrations.langgraph.strict_model import ProviderRejected, StrictScriptedModel

pytest.importorskip("langgraph.checkpoint.sqlite")

THREAD = "chat-1"
ASKED = "What's the weather in Lisbon?"
AGAIN = "Are you still there?"
PLACEHOLDER = {
    "type": "tool",
    "id": f"{HEALED_ID_PREFIX}{CALL_ID}",
    "content": HEALED_CONTENT,
    "tool_call_id": CALL_ID,
    "tool_calls": [],
}


# The agent's processes are forked from a clean interpreter that imported LangChain,
# LangGraph and flowmem once (multiprocessing's fork server: nothing of pytest's process,
# no open connection, is inherited), so a process costs its run, not their import.
PRELOAD = [
    "tests.integrations.langgraph.crash_agent",
    "flowmem.integrations.langgraph.saver",
    "flowmem.integrations.langgraph.healing",
    "flowmem.store.sqlite",
    "flowmem.store.postgres",
    "langgraph.checkpoint.sqlite",
]


@pytest.fixture(scope="module", autouse=True)
def _forkserver() -> Iterator[None]:
    forkserver.context(PRELOAD)  # kept for the process's next tests that fork (decision 0185)
    yield


def agent_process(
    saver: str, url: str, state: Path, *action: str
) -> subprocess.CompletedProcess[str]:
    """Run ``crash_agent`` in a new process on ``url``'s thread (60 s at most)."""
    argv = [saver, url, THREAD, str(state), *action]
    with tempfile.TemporaryDirectory(prefix="crash-agent-") as files:
        out, err = Path(files, "out"), Path(files, "err")
        process = forkserver.context(PRELOAD).Process(
            target=crash_agent.forked, args=(argv, str(out), str(err))
        )
        process.start()
        process.join(60)
        if process.is_alive():
            process.kill()
            process.join(5)
            pytest.fail(f"crash_agent {argv} did not end in 60 s: {err.read_text()}")
        return subprocess.CompletedProcess(argv, process.exitcode, out.read_text(), err.read_text())


def crash(saver: str, url: str, state: Path) -> None:
    """Process 1: the user asks; the model calls ``forecast``; the tool SIGKILLs the process."""
    state.mkdir(exist_ok=True)
    died = agent_process(saver, url, state, "say", ASKED)
    assert died.returncode == -signal.SIGKILL, (died.returncode, died.stderr)
    assert tool_runs(state) == 1


def tool_runs(state: Path) -> int:
    """How many times ``forecast`` started, over every process."""
    runs = state / "forecast.runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def answered(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON report of a run that exited 0."""
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def shape(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Each message's type and what pairs it: the calls of an AI turn, a result's call id."""
    return [
        (m["type"], m["tool_calls"] if m["type"] == "ai" else m["tool_call_id"] or m["content"])
        for m in messages
    ]


def assert_healed_and_answered(done: subprocess.CompletedProcess[str], state: Path) -> None:
    """Process 2 answered; the model was given the call answered by MEM-3's placeholder."""
    report = answered(done)
    assert report["final"] == ANSWER_AFTER_CRASH
    (request,) = report["requests"]  # this process called the model once
    assert shape(request) == [
        ("human", ASKED),
        ("ai", [CALL_ID]),
        ("tool", CALL_ID),
        ("human", AGAIN),
    ]
    assert request[2] == PLACEHOLDER  # right after the turn that declared the call
    # The healed history is the thread's own now: stored, with the answer after it.
    assert report["messages"][:4] == request
    assert shape(report["messages"][4:]) == [("ai", [])]
    assert tool_runs(state) == 1  # the interrupted tool was not run again


@pytest.mark.slow
def test_mem_3_a_thread_killed_inside_a_tool_continues_with_flowmem_saver_not_with_sqlite_saver(
    tmp_path: Path,
) -> None:
    # FlowmemSaver on SQLite, with the FlowmemHealing middleware: the next user turn answers.
    flowmem = tmp_path / "flowmem"
    url = f"sqlite:///{tmp_path}/flowmem.db"
    crash("flowmem", url, flowmem)
    assert_healed_and_answered(agent_process("flowmem", url, flowmem, "say", AGAIN), flowmem)

    # LangGraph's own SqliteSaver: the same crash leaves a thread no provider accepts.
    sqlite = tmp_path / "sqlite"
    path = str(tmp_path / "langgraph.db")
    crash("sqlite", path, sqlite)
    refused = agent_process("sqlite", path, sqlite, "say", AGAIN)
    assert refused.returncode != 0
    assert refused.stdout == ""
    assert "ProviderRejected" in refused.stderr
    assert f"tool call has no result in the turn's result run (id '{CALL_ID}')" in refused.stderr


@pytest.mark.slow
@pytest.mark.postgres
def test_mem_3_a_thread_killed_inside_a_tool_continues_with_flowmem_saver_on_postgres(
    tmp_path: Path, postgres_db_url: str
) -> None:
    crash("flowmem", postgres_db_url, tmp_path)
    assert_healed_and_answered(
        agent_process("flowmem", postgres_db_url, tmp_path, "say", AGAIN), tmp_path
    )


@pytest.mark.slow
def test_mem_3_a_killed_tool_call_that_langgraph_resumes_runs_again_and_is_not_healed(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/flowmem.db"
    crash("flowmem", url, tmp_path)

    report = answered(agent_process("flowmem", url, tmp_path, "resume"))

    assert tool_runs(tmp_path) == 2  # invoke(None) ran the interrupted call again
    assert report["final"] == ANSWER_WITH_RESULT
    (request,) = report["requests"]
    assert shape(request) == [("human", ASKED), ("ai", [CALL_ID]), ("tool", CALL_ID)]
    assert request[2]["content"] == TOOL_RESULT  # the real result, right after its call
    assert shape(report["messages"]) == [*shape(request), ("ai", [])]
    for message in report["messages"]:
        assert message["content"] != HEALED_CONTENT
        assert not str(message["id"]).startswith(HEALED_ID_PREFIX)


# --- in process: human in the loop, and the prebuilt ReAct agent ------------------------------


def forecast_call() -> AIMessage:
    """The model's turn that calls ``forecast``."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": "forecast", "args": {"city": "Lisbon"}, "id": CALL_ID, "type": "tool_call"}
        ],
    )


@tool
def forecast(city: str) -> str:
    """The weather forecast of a city."""
    return TOOL_RESULT


@tool("forecast")
def confirmed_forecast(city: str) -> str:
    """The weather forecast of a city, once a person allows the lookup."""
    allowed = interrupt({"question": f"Look up the forecast of {city}?"})
    return TOOL_RESULT if allowed == "yes" else "not allowed"


REACT = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
"""``langgraph.prebuilt.create_react_agent`` is deprecated, and what ``heal_hook`` is for."""


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[FlowmemSaver]:
    """A FlowmemSaver on a SQLite file of the test."""
    with FlowmemSaver.from_conn_string(f"sqlite:///{tmp_path}/flowmem.db") as opened:
        yield opened


def assert_no_placeholder(messages: list[BaseMessage]) -> None:
    for message in messages:
        assert message.content != HEALED_CONTENT
        assert not str(message.id).startswith(HEALED_ID_PREFIX)


def kinds(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """Each message's type and what pairs it (``shape`` for LangChain messages)."""
    return [
        (
            m.type,
            [c["id"] for c in m.tool_calls]
            if isinstance(m, AIMessage)
            else getattr(m, "tool_call_id", None) or m.content,
        )
        for m in messages
    ]


@pytest.mark.parametrize("pause", ["human_in_the_loop_middleware", "interrupt_in_tool"])
def test_mem_3_a_tool_call_paused_for_a_person_is_not_healed_when_resumed(
    tmp_path: Path, saver: FlowmemSaver, pause: str
) -> None:
    model = StrictScriptedModel(replies=[forecast_call(), AIMessage(content=ANSWER_WITH_RESULT)])
    if pause == "human_in_the_loop_middleware":
        tools, middleware = (
            [forecast],
            [HumanInTheLoopMiddleware({"forecast": True}), FlowmemHealing()],
        )
        resume: Any = {"decisions": [{"type": "approve"}]}
    else:
        tools, middleware = [confirmed_forecast], [FlowmemHealing()]
        resume = "yes"
    agent = create_agent(model, tools, checkpointer=saver, middleware=middleware)
    config: Any = {"configurable": {"thread_id": THREAD}}

    paused = agent.invoke({"messages": [HumanMessage(content=ASKED)]}, config)

    assert paused["__interrupt__"]
    assert kinds(paused["messages"]) == [("human", ASKED), ("ai", [CALL_ID])]
    # The person answers later, through another saver on the same database.
    with FlowmemSaver.from_conn_string(f"sqlite:///{tmp_path}/flowmem.db") as later:
        agent = create_agent(model, tools, checkpointer=later, middleware=middleware)
        done = agent.invoke(Command(resume=resume), config)
        stored = agent.get_state(config).values["messages"]
    assert kinds(done["messages"]) == [
        ("human", ASKED),
        ("ai", [CALL_ID]),
        ("tool", CALL_ID),
        ("ai", []),
    ]
    assert done["messages"][2].content == TOOL_RESULT
    assert done["messages"][-1].content == ANSWER_WITH_RESULT
    assert_no_placeholder(done["messages"])
    assert kinds(stored) == kinds(done["messages"])
    assert kinds(model.calls[-1]) == kinds(done["messages"][:3])


@REACT
def test_mem_3_react_agent_paused_before_its_tools_is_not_healed_when_resumed(
    saver: FlowmemSaver,
) -> None:
    from langgraph.prebuilt import create_react_agent

    model = StrictScriptedModel(replies=[forecast_call(), AIMessage(content=ANSWER_WITH_RESULT)])
    agent = create_react_agent(
        model, [forecast], checkpointer=saver, pre_model_hook=heal_hook, interrupt_before=["tools"]
    )
    config: Any = {"configurable": {"thread_id": THREAD}}
    agent.invoke({"messages": [HumanMessage(content=ASKED)]}, config)
    assert agent.get_state(config).next == ("tools",)

    done = agent.invoke(None, config)

    assert kinds(done["messages"]) == [
        ("human", ASKED),
        ("ai", [CALL_ID]),
        ("tool", CALL_ID),
        ("ai", []),
    ]
    assert done["messages"][2].content == TOOL_RESULT
    assert_no_placeholder(done["messages"])


@REACT
@pytest.mark.parametrize("hook", ["heal_hook", "no_hook"])
def test_mem_3_react_agent_with_heal_hook_answers_a_new_user_turn_after_an_unanswered_call(
    saver: FlowmemSaver, hook: str
) -> None:
    from langgraph.prebuilt import create_react_agent

    model = StrictScriptedModel(replies=[AIMessage(content=ANSWER_AFTER_CRASH)])
    agent = create_react_agent(
        model,
        [forecast],
        checkpointer=saver,
        pre_model_hook=heal_hook if hook == "heal_hook" else None,
    )
    config: Any = {"configurable": {"thread_id": THREAD}}
    # The state a crash inside the tool leaves: the model's call, stored, and no result.
    agent.update_state(
        config, {"messages": [HumanMessage(content=ASKED), forecast_call()]}, as_node="agent"
    )
    assert agent.get_state(config).next == ("tools",)
    again = {"messages": [HumanMessage(content=AGAIN)]}

    if hook == "no_hook":
        # The prebuilt agent checks the history itself: refused before any model call.
        with pytest.raises(ValueError, match="INVALID_CHAT_HISTORY") as refused:
            agent.invoke(again, config)
        assert not isinstance(refused.value, ProviderRejected)
        assert CALL_ID in str(refused.value)
        assert model.calls == []
        return
    done = agent.invoke(again, config)

    (request,) = model.calls
    assert kinds(request) == [
        ("human", ASKED),
        ("ai", [CALL_ID]),
        ("tool", CALL_ID),
        ("human", AGAIN),
    ]
    placeholder = request[2]
    assert isinstance(placeholder, ToolMessage)
    assert placeholder.content == HEALED_CONTENT
    assert placeholder.id == f"{HEALED_ID_PREFIX}{CALL_ID}"
    assert done["messages"][-1].content == ANSWER_AFTER_CRASH
    # heal_hook wrote the healed list back: the thread's stored history is sendable.
    stored = agent.get_state(config).values["messages"]
    assert kinds(stored) == [*kinds(request), ("ai", [])]
    assert stored[2].id == placeholder.id
