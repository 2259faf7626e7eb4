"""The code blocks of ``docs/integrations.md`` run as written (a scripted model stands in).

The blocks that use a ``Client`` run against a real ``flowmem serve`` started here,
named by ``$FLOWMEM_URL`` and ``$FLOWMEM_TOKEN`` (a user token), as the doc says.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import langchain_core.runnables.history  # noqa: F401  (its import resets warning filters)
import pytest
from agents import set_tracing_disabled

from flowmem.client import Client
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.scope import ExecutionContext
from tests.client.conftest import Server, serve
from tests.integrations.kill.points import Killer
from tests.integrations.kill.programs import langchain as lc_program
from tests.integrations.scripted_model import ScriptedModel, text

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
set_tracing_disabled(True)


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _block(*needles: str, remote: bool) -> str:
    """The one block holding every needle, with (remote) or without a ``Client()``."""
    found = [
        b for b in _blocks() if all(n in b for n in needles) and ("Client()" in b) == remote
    ]
    assert len(found) == 1, (needles, remote, len(found))
    return found[0]


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """A real ``flowmem serve``, named by ``$FLOWMEM_URL`` and ``$FLOWMEM_TOKEN`` (alice's)."""
    with serve(f"sqlite:///{tmp_path}/docs.db", tmp_path) as server:
        monkeypatch.setenv("FLOWMEM_URL", server.url)
        monkeypatch.setenv("FLOWMEM_TOKEN", server.tokens["alice"])
        yield server


def _run(block: str, swaps: dict[str, str], names: dict[str, Any]) -> dict[str, Any]:
    for old, new in swaps.items():
        assert old in block, f"the doc no longer contains {old!r}"
        block = block.replace(old, new)
    # imports and comments aside: a program with a tool defines the tool too
    user_lines = [
        line
        for line in block.splitlines()
        if line.strip() and not line.startswith(("from ", "import ", "#"))
    ]
    assert len(user_lines) < 15, "each adapter must fit in under 15 lines of user code"
    namespace: dict[str, Any] = dict(names)
    with warnings.catch_warnings():
        # RunnableWithMessageHistory is deprecated upstream; the doc shows it because
        # most LangChain apps still run it. langchain-core resets its own filter on
        # import, so the pytest mark alone does not silence it.
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


def _langchain_names() -> dict[str, Any]:
    """The kill matrix's scripted model and tool body, never killing (the LangChain 0.x program)."""
    return {
        "SCRIPTED_MODEL": lc_program.ScriptedChat(killer=Killer(None)),
        "TOOL_WORK": lc_program.tool_work(Killer(None)),
    }


LANGCHAIN_SWAPS = {**lc_program.MODEL_SWAP, **lc_program.TOOL_SWAP}
LANGCHAIN_TURN = ["Weather in Lisbon?", "", "18C and sunny", "It is 18C and sunny in Lisbon."]
"""The stored rows' contents of the LangChain 0.x tool loop's turn."""


def test_langchain_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    block = _block("FlowmemRunnableWithMessageHistory", ".invoke(", remote=False)
    ns = _run(block, LANGCHAIN_SWAPS, _langchain_names())
    assert ns["reply"].content == "It is 18C and sunny in Lisbon."
    stored = ns["memory"].load(
        "session", "chat_history", ExecutionContext(session_id="ana-1", user_id="ana")
    )
    assert [row["content"] for row in stored.messages] == LANGCHAIN_TURN
    assert ns["memory"].store.get_session("ana-1").owner == "ana"
    ns["memory"].store.close()


LANGGRAPH_SWAPS = {
    "from langchain_openai import ChatOpenAI": (
        "from tests.integrations.langgraph.strict_model import StrictScriptedModel"
    ),
    'ChatOpenAI(model="gpt-4o-mini")': "StrictScriptedModel(replies=[AIMessage('Hello Ana!')])",
}


def test_langgraph_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.messages import AIMessage

    monkeypatch.chdir(tmp_path)
    block = _block("FlowmemSaver", "create_agent(", remote=False)
    ns = _run(block, LANGGRAPH_SWAPS, {"AIMessage": AIMessage})
    assert ns["reply"]["messages"][-1].content == "Hello Ana!"
    with FlowmemSaver.from_conn_string("sqlite:///app.db") as saver:
        stored = saver.memory.load(
            "session", "langgraph", ExecutionContext(session_id="ana-1", user_id="ana")
        )
        assert [row["content"] for row in stored.messages] == ["Hi, I'm Ana", "Hello Ana!"]
        assert saver.memory.store.get_session("ana-1").owner == "ana"


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
@pytest.mark.parametrize(
    "program", ["langgraph_create_agent", "langgraph_tool_node", "langgraph_react"]
)
def test_langgraph_programs_with_a_tool_run(program: str, tmp_path: Path) -> None:
    """The LangGraph blocks the kill matrix kills, run whole once (its scripted model and tool)."""
    from tests.integrations.kill.harness import _module
    from tests.integrations.kill.points import Killer
    from tests.integrations.kill.script import ANSWER, QUESTION, TOOL_RESULT, Said

    report = _module(program).turn("flowmem", f"sqlite:///{tmp_path}/app.db", "doc-1", QUESTION, Killer(None))
    stored = [Said.from_json(m) for m in report["stored"]]
    assert [(m.role, m.text) for m in stored] == [
        ("user", QUESTION), ("assistant", ""), ("tool", TOOL_RESULT), ("assistant", ANSWER)
    ]
    assert len(report["requests"]) == 2


def test_openai_agents_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    block = _block("FlowmemSession", "Runner.", remote=False)
    ns = _run(
        block,
        {'instructions="Be brief.")': 'instructions="Be brief.", model=SCRIPTED)'},
        {"SCRIPTED": ScriptedModel([[text("Hello Ana!")]])},
    )
    assert ns["result"].final_output == "Hello Ana!"
    stored = ns["memory"].load("session", "agent_items", ExecutionContext(session_id="ana-1"))
    user, answer = stored.messages
    assert user["content"] == "Hi, I'm Ana"
    assert answer["content"] == [{"type": "text", "text": "Hello Ana!"}]
    ns["memory"].store.close()


def test_langchain_example_on_a_server_runs(
    served: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    block = _block("FlowmemRunnableWithMessageHistory", ".invoke(", remote=True)
    ns = _run(block, LANGCHAIN_SWAPS, _langchain_names())
    assert ns["reply"].content == "It is 18C and sunny in Lisbon."
    ns["memory"].close()
    with Client() as client:  # read back through the API, as the server has it
        stored = client.load_buffer("session", "chat_history", session_id="ana-1").messages
        assert [row["content"] for row in stored] == LANGCHAIN_TURN
        assert client.get_session("ana-1").owner == "alice"  # the token's user


def test_openai_agents_example_on_a_server_runs(
    served: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ns = _run(
        _block("FlowmemSession", "Runner.", remote=True),
        {'instructions="Be brief.")': 'instructions="Be brief.", model=SCRIPTED)'},
        {"SCRIPTED": ScriptedModel([[text("Hello Ana!")]])},
    )
    assert ns["result"].final_output == "Hello Ana!"
    ns["memory"].close()
    with Client() as client:
        user, answer = client.load_buffer("session", "agent_items", session_id="ana-1").messages
        assert user["content"] == "Hi, I'm Ana"
        assert answer["content"] == [{"type": "text", "text": "Hello Ana!"}]
        assert client.get_session("ana-1").owner == "alice"


def test_blocks_that_call_no_model_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lossless examples assert what they claim; they need no model and no swap.

    The block that needs a server (``Client()``) runs in ``tests/test_doc_samples.py``.
    The ADK block brings its own stand-in model (and needs the ``adk`` extra).
    """
    monkeypatch.chdir(tmp_path)  # the ADK block writes its database here
    plain = [
        b for b in _blocks() if "Runner." not in b and ".invoke(" not in b and "Client()" not in b
    ]
    # the LangChain and the Agents SDK round trips, the Agents SDK token budget, the
    # pydantic-ai store, the ADK service
    assert len(plain) == 5
    if importlib.util.find_spec("google.adk") is None:
        plain = [b for b in plain if "google.adk" not in b]
    for block in plain:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            exec(compile(block, str(DOC), "exec"), {})
