"""A ``create_agent`` run in its own process whose tool SIGKILLs the process the first time.

Usage: ``python -m tests.integrations.langgraph.crash_agent SAVER URL THREAD STATE_DIR ACTION [TEXT]``,
or ``forked(argv, out, err)`` as the target of a process forked from a fork server that
imported this module once (``test_crash``: a process then costs its run, not LangChain's
import; decision 0185), its stdout and stderr written to files.

- SAVER ``flowmem``: ``FlowmemSaver.from_conn_string(URL)`` and the ``FlowmemHealing``
  middleware; ``sqlite``: LangGraph's own ``SqliteSaver.from_conn_string(URL)`` (a file
  path), no healing.
- STATE_DIR keeps what outlives a process: ``script.json`` (the scripted model's next
  reply, ``StrictScriptedModel.script_file``), ``forecast.killed`` (the tool killed its
  process once), ``forecast.runs`` (one line per run of the tool).
- ACTION ``say``: invoke with the user message TEXT; ``resume``: ``invoke(None)``, which
  runs the thread's pending tasks (the interrupted tool call) again.

The model's first reply calls ``forecast``; every later reply is a final answer
(``ANSWER_AFTER_CRASH`` for ``say``, ``ANSWER_WITH_RESULT`` for ``resume``). Runs are
``durability="sync"``: the checkpoint with the model's call is stored before the tool
starts, so the kill always leaves that call unanswered in the thread (with LangGraph's
default ``"async"`` the kill may come before that checkpoint is written).

On success it prints one JSON object: ``final`` (the last message's text), ``messages``
(the thread's messages after the run) and ``requests`` (every message list the model
was given in this process), messages as ``describe`` gives them. A failure exits 1
with Python's traceback on stderr (``ProviderRejected`` when the model refused).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool

from tests.integrations import forkserver
from tests.integrations.langgraph.strict_model import StrictScriptedModel

CALL_ID = "call_forecast_1"
ANSWER_AFTER_CRASH = "Sorry, the forecast was interrupted. Shall I look it up again?"
ANSWER_WITH_RESULT = "Lisbon: sunny, 21 °C."
TOOL_RESULT = "Lisbon: sunny, 21 °C"


def describe(message: BaseMessage) -> dict[str, Any]:
    """A message as the parent test compares it: type, id, text, call ids."""
    return {
        "type": message.type,
        "id": message.id,
        "content": message.content,
        "tool_call_id": getattr(message, "tool_call_id", None),
        "tool_calls": [c["id"] for c in getattr(message, "tool_calls", None) or ()],
    }


def forecast_tool(state_dir: Path) -> Any:
    """The ``forecast`` tool: counts its runs; the first run SIGKILLs its own process."""

    @tool
    def forecast(city: str) -> str:
        """The weather forecast of a city."""
        with (state_dir / "forecast.runs").open("a") as runs:
            runs.write(f"{os.getpid()}\n")
        killed = state_dir / "forecast.killed"
        if not killed.exists():
            killed.touch()
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no finally, no atexit
        return TOOL_RESULT

    return forecast


@contextmanager
def checkpointer(kind: str, url: str) -> Iterator[tuple[Any, list[Any]]]:
    """The checkpointer and the middleware of SAVER."""
    if kind == "flowmem":
        from flowmem.integrations.langgraph.healing import FlowmemHealing
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        with FlowmemSaver.from_conn_string(url) as saver:
            yield saver, [FlowmemHealing()]
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(url) as saver:
            yield saver, []
    else:
        raise SystemExit(f"unknown saver {kind!r}")


def main(argv: list[str]) -> int:
    kind, url, thread, state, action, *text = argv
    state_dir = Path(state)
    answer = ANSWER_AFTER_CRASH if action == "say" else ANSWER_WITH_RESULT
    call = AIMessage(
        content="",
        tool_calls=[
            {"name": "forecast", "args": {"city": "Lisbon"}, "id": CALL_ID, "type": "tool_call"}
        ],
    )
    model = StrictScriptedModel(
        replies=[call, AIMessage(content=answer), AIMessage(content=answer)],
        script_file=str(state_dir / "script.json"),
    )
    config = {"configurable": {"thread_id": thread}}
    with checkpointer(kind, url) as (saver, middleware):
        agent = create_agent(
            model, [forecast_tool(state_dir)], checkpointer=saver, middleware=middleware
        )
        given = {"messages": [HumanMessage(content=text[0])]} if action == "say" else None
        agent.invoke(given, config, durability="sync")
        messages = agent.get_state(config).values["messages"]
    print(
        json.dumps(
            {
                "final": messages[-1].content,
                "messages": [describe(m) for m in messages],
                "requests": [[describe(m) for m in request] for request in model.calls],
            }
        )
    )
    return 0


def forked(argv: list[str], out: str, err: str) -> None:
    """Run ``main`` in a forked child as ``python -m`` would: stdout and stderr to files, its exit code."""
    for name in [name for name in os.environ if name.startswith("FLOWMEM_")]:
        del os.environ[name]  # as the test gives a process: no ambient flowmem settings
    forkserver.run_main(main, argv, out, err)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
