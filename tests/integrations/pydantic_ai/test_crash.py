"""A process killed with SIGKILL inside a tool, resumed in a new process with a new prompt (MEM-3).

Here the killed turn is an app saving after every node of ``agent.iter`` itself (with
``run.usage``, a property on pydantic-ai 2.78) and the resumed one continues with
``conversation=`` or ``message_history=``; the docs' setup (``store.run``) is SIGKILLed
at every point of a turn by the kill matrix (tests/integrations/kill/test_pydantic_ai.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.pydantic_ai import FlowmemConversationStore

ROOT = Path(__file__).resolve().parents[3]
APP = "tests.integrations.pydantic_ai.crash_app"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _kill_inside_the_tool(url: str, cid: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", APP, url, cid, "crash"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == "IN-TOOL", process.stderr.read() if process.stderr else line
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.parametrize("how", ["conversation", "history"])
def test_mem_3_a_run_killed_inside_a_tool_resumes_with_a_new_prompt_in_a_new_process(
    durable_url: str, how: str
) -> None:
    store_url = durable_url
    _kill_inside_the_tool(store_url, "c1")
    resumed = subprocess.run(
        [sys.executable, "-m", APP, store_url, "c1", "resume", how],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "RESUMED answered second question" in resumed.stdout
    store = FlowmemConversationStore.from_url(store_url)
    try:
        messages = asyncio.run(store.load("c1")).messages
    finally:
        store.close()
    kinds = [type(m).__name__ for m in messages]
    assert kinds == ["ModelRequest", "ModelResponse", "ModelRequest", "ModelRequest", "ModelResponse"]
    placeholder = messages[2]
    assert isinstance(placeholder, ModelRequest)
    (part,) = placeholder.parts
    assert isinstance(part, ToolReturnPart)
    assert (part.tool_call_id, part.tool_name, part.content) == ("call-slow", "slow", HEALED_CONTENT)
    assert isinstance(messages[3].parts[-1], UserPromptPart)
    assert isinstance(messages[4], ModelResponse)
