"""The agent of ``flowmem demo`` and the child process that runs its first turn.

``python -m flowmem.runtime.demo DB SESSION WORKDIR`` runs one turn of the demo
agent on the SQLite file DB. The agent calls two tools in parallel: ``weather``
answers at once, ``forecast`` writes ``WORKDIR/forecast.started`` and then takes
its time — long enough for ``flowmem demo`` to kill the process with SIGKILL in
the middle of the call. Each tool counts its executions in ``WORKDIR``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from pathlib import Path

from flowmem.runtime.agent import Agent
from flowmem.runtime.models import ModelReply, ScriptedModel, ToolCall
from flowmem.runtime.runner import AgentRunner
from flowmem.runtime.tools import ToolRegistry
from flowmem.service import MemoryService
from flowmem.store import open_store
from flowmem.store.base import Store

AGENT = "weather-bot"
STALE_AFTER = 1.0  # seconds: the demo's dead process is released quickly
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
FIRST_QUESTION = "What's the weather in Lisbon, and tomorrow's forecast?"
NEXT_QUESTION = "Hello? Still there?"
WEATHER_CALL = ToolCall("call_1", "weather", {"city": "Lisbon"})
FORECAST_CALL = ToolCall("call_2", "forecast", {"city": "Lisbon"})


def executions(workdir: Path, tool: str) -> int:
    """How many times ``tool`` started in ``workdir``'s demo."""
    path = workdir / f"{tool}.runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def demo_tools(workdir: Path, forecast_seconds: float = 60.0) -> ToolRegistry:
    """``weather`` (instant) and ``forecast`` (slow; announces its start in a file)."""
    registry = ToolRegistry()

    def count(tool: str) -> None:
        with open(workdir / f"{tool}.runs", "a", encoding="utf-8") as handle:
            handle.write("run\n")

    def weather(city: str) -> str:
        count("weather")
        return "18°C, sunny"

    def forecast(city: str) -> str:
        count("forecast")
        (workdir / "forecast.started").write_text("started\n")
        time.sleep(forecast_seconds)
        return "21°C, clouds later"

    registry.register("weather", weather, CITY, "Current weather in a city.")
    registry.register("forecast", forecast, CITY, "Tomorrow's forecast for a city (slow).")
    return registry


def demo_agent(workdir: Path, script: Iterable[object]) -> Agent:
    """The demo agent: a scripted model that checks every history like a provider."""
    return Agent(
        AGENT,
        ScriptedModel(script, check=True),
        "You are a weather assistant.",
        demo_tools(workdir),
    )


def demo_runner(store: Store, workdir: Path, script: Iterable[object]) -> AgentRunner:
    """A runner with the demo agent on ``store``."""
    return AgentRunner(
        store,
        MemoryService(store),
        [demo_agent(workdir, script)],
        stale_after=STALE_AFTER,
        heartbeat=STALE_AFTER / 4,
    )


def first_turn_script() -> list[object]:
    """The model of the first turn asks for both tools in parallel."""
    return [ModelReply("", (WEATHER_CALL, FORECAST_CALL))]


def main(argv: list[str]) -> int:
    """Run the first turn of the demo session (the child process)."""
    if len(argv) != 3:
        print("usage: python -m flowmem.runtime.demo DB SESSION WORKDIR", file=sys.stderr)
        return 2
    db, session_id, workdir = argv
    store = open_store(f"sqlite:///{db}")
    session = store.get_session(session_id)
    if session is None:
        print(f"no session {session_id}", file=sys.stderr)
        return 3
    runner = demo_runner(store, Path(workdir), first_turn_script())
    runner.start_turn(session, FIRST_QUESTION, wait=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
