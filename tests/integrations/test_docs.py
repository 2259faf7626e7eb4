"""The code blocks of ``docs/integrations.md`` run as written (a scripted model stands in)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import langchain_core.runnables.history  # noqa: F401  (its import resets warning filters)
import pytest
from agents import set_tracing_disabled

from flowmem.scope import ExecutionContext
from tests.integrations.scripted_model import ScriptedModel, text

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
set_tracing_disabled(True)


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _run(block: str, swaps: dict[str, str], names: dict[str, Any]) -> dict[str, Any]:
    for old, new in swaps.items():
        assert old in block, f"the doc no longer contains {old!r}"
        block = block.replace(old, new)
    user_lines = [line for line in block.splitlines() if line.strip()]
    assert len(user_lines) < 15, "each adapter must fit in under 15 lines of user code"
    namespace: dict[str, Any] = dict(names)
    with warnings.catch_warnings():
        # RunnableWithMessageHistory is deprecated upstream; the doc shows it because
        # most LangChain apps still run it. langchain-core resets its own filter on
        # import, so the pytest mark alone does not silence it.
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


def test_langchain_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    block = next(b for b in _blocks() if "FlowmemChatMessageHistory" in b)
    ns = _run(
        block,
        {
            "from langchain_openai import ChatOpenAI": (
                "from langchain_core.language_models.fake_chat_models import GenericFakeChatModel"
            ),
            'ChatOpenAI(model="gpt-4o-mini")': 'GenericFakeChatModel(messages=iter(["Hello Ana!"]))',
        },
        {},
    )
    assert ns["reply"].content == "Hello Ana!"
    stored = ns["memory"].load("session", "chat_history", ExecutionContext(session_id="ana-1"))
    assert [row["content"] for row in stored.messages] == ["Hi, I'm Ana", "Hello Ana!"]
    ns["memory"].store.close()


def test_openai_agents_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    block = next(b for b in _blocks() if "FlowmemSession" in b)
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


def test_blocks_that_call_no_model_run_as_written() -> None:
    """The lossless examples assert what they claim; they need no model and no swap."""
    plain = [b for b in _blocks() if "Runner." not in b and ".invoke(" not in b]
    assert len(plain) == 2  # the LangChain and the Agents SDK round trips
    for block in plain:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            exec(compile(block, str(DOC), "exec"), {})
