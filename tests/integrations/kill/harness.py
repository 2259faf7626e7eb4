"""A kill-matrix round: a process SIGKILLed at a point of its turn, then a new process's turn.

Processes come from one fork server per test process whose preloaded modules are every
program's framework, so a round costs the turns, not the imports. A round:

1. a child runs the program's turn with the user message ``QUESTION``; its ``Killer``
   SIGKILLs it at the point (a child that finishes instead fails the round);
2. a new child runs a turn with ``AGAIN`` on the same database and thread, unarmed, and
   reports every request its model was given and the conversation as stored after it.

``judge`` turns that report into a ``Verdict``: the earlier question kept, the declared
call kept (where the tool had started), every request accepted by a strict provider
(``script.refusal``: each call answered, by its result or MEM-3's placeholder, right
after its turn), and nothing stored twice.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tests.integrations import forkserver
from tests.integrations.kill.points import TOOL_STARTED, Killer
from tests.integrations.kill.script import (
    AGAIN,
    AGAIN_ANSWER,
    ANSWER,
    CALL_ID,
    QUESTION,
    Said,
    refusal,
)

PROGRAMS = {
    "langgraph_create_agent": "LangGraph `create_agent`",
    "langgraph_tool_node": "LangGraph `StateGraph` + `ToolNode`",
    "langgraph_react": "LangGraph prebuilt ReAct agent",
    "openai_agents": "OpenAI Agents SDK `Runner`",
    "pydantic_ai": "pydantic-ai `Agent`",
    "adk": "Google ADK `Runner`",
    "langchain": "LangChain 0.x `RunnableWithMessageHistory`",
}
"""Every program of the matrix: its module under ``tests.integrations.kill.programs``, its name."""

FLOWMEM = "flowmem"
CONTROL = "control"
ROUNDS = int(os.environ.get("FLOWMEM_KILL_ROUNDS", "2"))
"""Rounds per point and backend in ``make test`` (the docs' table is made with more)."""
CHILD_SECONDS = 90


class Program(Protocol):
    """A program module: the framework's documented program, run for one turn."""

    CONTROL_STORE: str | None
    """The framework's own store the control runs on (None: the framework has none to compare)."""

    def turn(
        self, store: str, place: str, thread: str, text: str, killer: Killer
    ) -> dict[str, Any]:
        """Run one turn; return ``{"requests": [[Said...]...], "stored": [Said...]}`` as JSON.

        ``store`` is ``FLOWMEM`` (``place``: a flowmem database URL) or ``CONTROL``
        (``place``: a directory for the framework's own store).
        """
        ...


def said_list(messages: Sequence[Said]) -> list[dict[str, object]]:
    """Messages as a report holds them."""
    return [m.as_json() for m in messages]


def _module_path(program: str) -> str:
    return program if "." in program else f"tests.integrations.kill.programs.{program}"


def _module(program: str) -> Any:
    """A program's module: a name of ``PROGRAMS``, or a dotted module path (the harness's own tests)."""
    return importlib.import_module(_module_path(program))


def _child(
    program: str,
    store: str,
    place: str,
    thread: str,
    text: str,
    point: str | None,
    seed: int,
    out: str,
) -> None:
    try:
        killer = Killer(point, seed)
        report = _module(program).turn(store, place, thread, text, killer)
        killer.turn_end()
        Path(out).write_text(json.dumps(report), encoding="utf-8")
    except BaseException:  # the parent shows the child's traceback
        Path(out + ".error").write_text(traceback.format_exc(), encoding="utf-8")
        os._exit(1)
    os._exit(0)


_preload: tuple[str, ...] = tuple(PROGRAMS)


def preload_only(programs: Sequence[str]) -> None:
    """Have the fork server preload these programs' frameworks alone (every one of ``PROGRAMS``
    otherwise): a process that plays a few programs imports no other framework. Call it
    before the first child, in a process that plays nothing else (``report.main``)."""
    global _preload
    _preload = tuple(programs)


def _fork_server() -> Any:
    """The fork server with every program's framework preloaded (started again if another
    test's server runs without them: its children would each import their framework)."""
    alone = _preload != tuple(PROGRAMS)  # preload_only: these programs' frameworks alone
    return forkserver.context([__name__, *(_module_path(p) for p in _preload)], alone=alone)


@dataclass
class Run:
    """One child's end: its exit code, its report (None when it died) and its traceback."""

    exitcode: int | None
    report: dict[str, Any] | None
    error: str

    @property
    def killed(self) -> bool:
        """The child died of SIGKILL."""
        return self.exitcode == -signal.SIGKILL


def run_child(
    program: str,
    store: str,
    place: str,
    thread: str,
    text: str,
    point: str | None,
    seed: int,
    scratch: Path,
) -> Run:
    """Run one turn in a child of the fork server and wait for it (``CHILD_SECONDS`` at most)."""
    # a file of this child alone: a child that dies writes nothing, and must not be
    # judged by an earlier child's report (another store's, another backend's)
    out = scratch / f"{thread}-{store}-{'armed' if point else 'free'}-{uuid.uuid4().hex}.json"
    process = _fork_server().Process(
        target=_child, args=(program, store, place, thread, text, point, seed, str(out))
    )
    process.start()
    process.join(CHILD_SECONDS)
    if process.is_alive():
        process.kill()
        process.join()
        return Run(None, None, f"the child ran over {CHILD_SECONDS} s")
    error_file = Path(str(out) + ".error")
    error = error_file.read_text(encoding="utf-8") if error_file.exists() else ""
    report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else None
    return Run(process.exitcode, report, error)


@dataclass
class Verdict:
    """What one round showed."""

    program: str
    point: str
    store: str
    killed: bool
    question_kept: bool
    call_kept: bool
    healed: bool
    """The kept call is answered in the new turn's request (its real result or MEM-3's placeholder)."""
    accepted: bool
    once: bool
    answered: bool
    problem: str

    @property
    def passed(self) -> bool:
        """The round kept every promise: question, call where the tool started, acceptance, once."""
        return (
            self.killed
            and self.question_kept
            and (self.call_kept or self.point not in TOOL_STARTED)
            and self.accepted
            and self.once
            and self.answered
            and not self.problem
        )


def _twice(stored: Sequence[Said]) -> str:
    counts = {
        "the question": sum(m.role == "user" and m.text == QUESTION for m in stored),
        "the second question": sum(m.role == "user" and m.text == AGAIN for m in stored),
        f"the call {CALL_ID}": sum(CALL_ID in m.calls for m in stored),
        f"a result of {CALL_ID}": sum(m.role == "tool" and m.answers == CALL_ID for m in stored),
        "the answer": sum(m.role == "assistant" and m.text == ANSWER for m in stored),
    }
    return ", ".join(f"{what} stored {n} times" for what, n in counts.items() if n > 1)


def judge(program: str, point: str, store: str, first: Run, second: Run) -> Verdict:
    """The verdict of a round from its two children."""
    problem = ""
    if not first.killed:
        problem = f"the first turn was not killed (exit {first.exitcode}) {first.error}".strip()
    if second.report is None:
        problem = problem or f"the second turn failed (exit {second.exitcode}): {second.error}"
        return Verdict(
            program, point, store, first.killed, False, False, False, False, False, False, problem
        )
    requests = [[Said.from_json(m) for m in r] for r in second.report["requests"]]
    stored = [Said.from_json(m) for m in second.report["stored"]]
    given = requests[0] if requests else []
    refusals = [why for r in requests if (why := refusal(r))]
    twice = _twice(stored)
    return Verdict(
        program=program,
        point=point,
        store=store,
        killed=first.killed,
        question_kept=any(m.role == "user" and m.text == QUESTION for m in given),
        call_kept=any(CALL_ID in m.calls for m in given),
        healed=any(CALL_ID in m.calls for m in given)
        and any(m.role == "tool" and m.answers == CALL_ID for m in given),
        accepted=bool(requests) and not refusals,
        once=not twice,
        answered=any(m.role == "assistant" and m.text == AGAIN_ANSWER for m in stored),
        problem=problem or "; ".join([*refusals, twice]).strip("; "),
    )


def play(
    program: str,
    point: str,
    store: str,
    place: str,
    scratch: Path,
    rounds: int = ROUNDS,
    first_seed: int = 0,
) -> list[Verdict]:
    """``rounds`` rounds of ``program`` killed at ``point``, each on a thread of its own."""
    verdicts = []
    for seed in range(first_seed, first_seed + rounds):
        name = program.rsplit(".", 1)[-1].replace("_", "-")
        thread = f"kill-{name}-{point.replace('_', '-')}-{seed}"
        first = run_child(program, store, place, thread, QUESTION, point, seed, scratch)
        second = run_child(program, store, place, thread, AGAIN, None, seed, scratch)
        verdicts.append(judge(program, point, store, first, second))
    return verdicts


def assert_rounds_pass(verdicts: Sequence[Verdict]) -> None:
    """Fail with every failed round's verdict."""
    failed = [v for v in verdicts if not v.passed]
    assert not failed, "\n".join(repr(v) for v in failed)
