"""Where a turn is killed: the six points of issue 36, and the ``Killer`` a program calls at each.

A program calls the killer's hooks from its scripted model and its tool; the armed
point SIGKILLs the process there (``os.kill(getpid(), SIGKILL)``: no cleanup, no
``finally``, no ``atexit``, exactly as an outside kill). Points that lie between two
hooks ("just after the model's tool call", "after the tool's result", "while the final
answer is written") are killed by a timer started at the first hook after a seeded
delay of a few milliseconds, and at the latest at the second hook, so the kill lands
somewhere in the framework's own work between them, differently in each round.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

from tests.integrations.kill.script import TOOL_RESULT

BEFORE_MODEL_ANSWER = "before_model_answer"
AFTER_TOOL_CALL = "after_tool_call"
TOOL_START = "tool_start"
INSIDE_TOOL = "inside_tool"
AFTER_TOOL_RESULT = "after_tool_result"
FINAL_ANSWER = "final_answer"

POINTS = (
    BEFORE_MODEL_ANSWER,
    AFTER_TOOL_CALL,
    TOOL_START,
    INSIDE_TOOL,
    AFTER_TOOL_RESULT,
    FINAL_ANSWER,
)
"""Every point of a turn, in the order a turn passes them."""

TOOL_STARTED = frozenset({TOOL_START, INSIDE_TOOL, AFTER_TOOL_RESULT, FINAL_ANSWER})
"""The points a turn reaches only after its tool started: the call must have been stored."""

TOOL_WORK_SECONDS = 0.2
"""How long the scripted tool works (``Killer.tool_work``)."""


def die() -> None:
    """SIGKILL this process now."""
    os.kill(os.getpid(), signal.SIGKILL)


class Killer:
    """The armed point of a process (None: never kills), and the hooks a program calls."""

    def __init__(self, point: str | None, seed: int = 0) -> None:
        if point is not None and point not in POINTS:
            raise ValueError(f"unknown kill point {point!r}: one of {', '.join(POINTS)}")
        self.point = point
        self._random = random.Random(seed)
        self._timer: threading.Timer | None = None

    def _now(self, point: str) -> None:
        if self.point == point:
            die()

    def _soon(self, point: str, most_ms: float) -> None:
        if self.point == point and self._timer is None:
            self._timer = threading.Timer(self._random.uniform(0, most_ms) / 1000, die)
            self._timer.daemon = True
            self._timer.start()

    def _by_now(self, point: str) -> None:
        if self.point == point and self._timer is not None:
            die()

    def model_start(self, call: int) -> None:
        """The model is asked (``call``: 1 for the turn's first model call, 2 after the tool)."""
        if call == 1:
            self._now(BEFORE_MODEL_ANSWER)
        elif call == 2:
            self._by_now(AFTER_TOOL_RESULT)

    def model_end(self, call: int, declared_call: bool) -> None:
        """The model answered: with a tool call (``declared_call``) or its final text."""
        if declared_call:
            self._soon(AFTER_TOOL_CALL, 3)
        else:
            self._soon(FINAL_ANSWER, 5)

    def tool_start(self) -> None:
        """The tool's first line."""
        self._by_now(AFTER_TOOL_CALL)
        self._now(TOOL_START)
        if self.point == INSIDE_TOOL:
            self._timer = threading.Timer(self._random.uniform(0.02, 0.1), die)
            self._timer.daemon = True
            self._timer.start()

    def tool_work(self) -> None:
        """The tool's work: a short sleep the ``inside_tool`` kill lands in."""
        time.sleep(TOOL_WORK_SECONDS)

    def tool(self) -> str:
        """The scripted tool's whole run: its start, its work, its end; ``script.TOOL_RESULT``."""
        self.tool_start()
        self.tool_work()
        self.tool_end()
        return TOOL_RESULT

    def tool_end(self) -> None:
        """The tool returns its result; an ``inside_tool`` kill not landed yet lands now, still inside.

        Its timer (20-100 ms into the 200 ms of work) can fire late on a loaded machine,
        and a turn that ran on failed its round as "not killed".
        """
        self._by_now(INSIDE_TOOL)
        self._soon(AFTER_TOOL_RESULT, 3)

    def turn_end(self) -> None:
        """The program's turn returned: a pending final-answer kill lands now at the latest."""
        self._by_now(FINAL_ANSWER)
