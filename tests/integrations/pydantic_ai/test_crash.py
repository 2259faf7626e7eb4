"""A process killed with SIGKILL inside a tool, resumed in a new process with a new prompt (MEM-3).

Here the killed turn is an app saving after every node of ``agent.iter`` itself (with
``run.usage``, a property on pydantic-ai 2.78) and the resumed one continues with
``conversation=`` or ``message_history=``; the docs' setup (``store.run``) is SIGKILLed
at every point of a turn by the kill matrix (tests/integrations/kill/test_pydantic_ai.py).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.pydantic_ai import FlowmemConversationStore
from tests.integrations import forkserver
from tests.integrations.pydantic_ai import crash_app

# The app's processes are forked from a clean interpreter that imported pydantic-ai and
# flowmem once (multiprocessing's fork server: nothing of pytest's process, no open
# connection, is inherited), so a process costs its run, not their import (decision 0185).
PRELOAD = [
    "tests.integrations.pydantic_ai.crash_app",
    "flowmem.store.sqlite",
    "flowmem.store.postgres",
]


@pytest.fixture(scope="module", autouse=True)
def _forkserver() -> Iterator[None]:
    forkserver.context(PRELOAD)  # kept for the process's next tests that fork (decision 0185)
    yield


def _in_tool(process: BaseProcess, out: Path, deadline: float) -> str:
    """The app's first stdout line once it is written (or the process ended, or 60 s passed)."""
    while True:
        written = out.read_text()
        if "\n" in written:
            return written.splitlines()[0]
        if process.exitcode is not None or time.monotonic() > deadline:
            return out.read_text().partition("\n")[0]
        process.join(0.02)


def _kill_inside_the_tool(url: str, cid: str) -> None:
    """Run the app's ``crash`` phase; once it prints ``IN-TOOL`` (inside the tool), SIGKILL it."""
    with tempfile.TemporaryDirectory(prefix="crash-app-") as files:
        out, err = Path(files, "out"), Path(files, "err")
        out.touch()  # read before the child opens it
        err.touch()
        process = forkserver.context(PRELOAD).Process(
            target=crash_app.forked, args=([url, cid, "crash"], str(out), str(err))
        )
        process.start()
        try:
            line = _in_tool(process, out, time.monotonic() + 60)
            assert line.strip() == "IN-TOOL", err.read_text() or line
            process.kill()  # SIGKILL
            process.join(30)
            assert process.exitcode == -signal.SIGKILL
        finally:
            if process.exitcode is None:
                process.kill()
                process.join()


def _resume(url: str, cid: str, how: str) -> subprocess.CompletedProcess[str]:
    """Run the app's ``resume`` phase in a new process (120 s at most)."""
    argv = [url, cid, "resume", how]
    with tempfile.TemporaryDirectory(prefix="crash-app-") as files:
        out, err = Path(files, "out"), Path(files, "err")
        process = forkserver.context(PRELOAD).Process(
            target=crash_app.forked, args=(argv, str(out), str(err))
        )
        process.start()
        process.join(120)
        if process.exitcode is None:
            process.kill()
            process.join(5)
            pytest.fail(f"crash_app {argv} did not end in 120 s: {err.read_text()}")
        return subprocess.CompletedProcess(argv, process.exitcode, out.read_text(), err.read_text())


@pytest.mark.parametrize("how", ["conversation", "history"])
def test_mem_3_a_run_killed_inside_a_tool_resumes_with_a_new_prompt_in_a_new_process(
    durable_url: str, how: str
) -> None:
    store_url = durable_url
    _kill_inside_the_tool(store_url, "c1")
    resumed = _resume(store_url, "c1", how)
    assert resumed.returncode == 0, resumed.stderr
    assert "RESUMED answered second question" in resumed.stdout
    store = FlowmemConversationStore.from_url(store_url)
    try:
        messages = asyncio.run(store.load("c1")).messages
    finally:
        store.close()
    kinds = [type(m).__name__ for m in messages]
    assert kinds == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelRequest",
        "ModelResponse",
    ]
    placeholder = messages[2]
    assert isinstance(placeholder, ModelRequest)
    (part,) = placeholder.parts
    assert isinstance(part, ToolReturnPart)
    assert (part.tool_call_id, part.tool_name, part.content) == (
        "call-slow",
        "slow",
        HEALED_CONTENT,
    )
    assert isinstance(messages[3].parts[-1], UserPromptPart)
    assert isinstance(messages[4], ModelResponse)
