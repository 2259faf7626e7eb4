"""Two processes running ADK turns on one session at once (``test_two_runners``).

``writer`` is the target of a ``multiprocessing`` process: it opens its own
``FlowmemSessionService`` on the shared database and, each round, waits at the shared
barrier, then runs one turn of a ``Runner`` whose scripted model calls the ``lookup``
tool. The first attempts of a round overlap on purpose: ``right`` starts its turn once
``left`` is inside its tool call, and ``left``'s tool returns once ``right``'s user
message is stored (``Signals``), so ``left``'s answer lands on a session that moved
on. Later attempts just race. A turn refused with
``StaleSessionError`` (the other runner appended first) is run again on a fresh read,
up to ``ATTEMPTS`` times. It reports ``(round, name, outcome, event ids)`` per
attempt: every event the runner yielded, which ADK's runner yields only once the
session service stored it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.runners import Runner

from flowmem.integrations.adk import FlowmemSessionService
from tests.integrations.adk.scripted import APP, ScriptedLlm, agent, asks_tool, message, says

ATTEMPTS = 20
WAIT_SECONDS = 10.0  # how long one side waits for the other's signal
BARRIER_SECONDS = 60.0


@dataclass
class Signals:
    """One round's two ``multiprocessing.Event``: left is in its tool; right's question is stored."""

    left_in_tool: Any
    right_stored: Any


async def _turn(
    service: FlowmemSessionService, session_id: str, name: str, round_: int, signals: Signals | None
) -> list[str]:
    def lookup(query: str) -> dict[str, Any]:
        """Look a product up (on a first attempt of ``left``: while ``right`` asks)."""
        if signals is not None and name == "left":
            signals.left_in_tool.set()
            signals.right_stored.wait(WAIT_SECONDS)
        return {"found": f"2 results for {query}"}

    model = ScriptedLlm(script=[asks_tool(f"{name}-{round_}"), says(f"{name} done {round_}")])
    built = agent(model)
    built.tools = [lookup]
    runner = Runner(app_name=APP, agent=built, session_service=service)
    if signals is not None and name == "right":
        signals.left_in_tool.wait(WAIT_SECONDS)
    stored: list[str] = []
    try:
        async for event in runner.run_async(
            user_id="alice",
            session_id=session_id,
            new_message=message(f"{name} asks, round {round_}"),
            yield_user_message=True,
        ):
            if not event.partial:
                stored.append(event.id)
                if signals is not None and name == "right":
                    signals.right_stored.set()
    except StaleSessionError:
        stored.append("stale")
    if signals is not None:  # neither side waits for a signal that never comes
        signals.left_in_tool.set()
        signals.right_stored.set()
    return stored


def writer(
    url: str,
    session_id: str,
    name: str,
    rounds: list[Signals],
    barrier: Any,
    results: Any,
) -> None:
    """Run a turn per round on the shared session; report every attempt's stored event ids."""
    service = FlowmemSessionService(url)
    try:
        for round_, signals in enumerate(rounds):
            barrier.wait(BARRIER_SECONDS)
            for attempt in range(ATTEMPTS):
                first = signals if attempt == 0 else None
                stored = asyncio.run(_turn(service, session_id, name, round_, first))
                done = stored[-1:] != ["stale"]
                results.put((round_, name, "ok" if done else "stale", stored))
                if done:
                    break
    except BaseException as exc:
        results.put((-1, name, type(exc).__name__, [str(exc)]))
    finally:
        asyncio.run(service.close())
