"""What the kill matrix's scripted model answers, and what a strict provider accepts.

Every program turns its framework's messages into ``Said`` values (role, text, the call
ids an assistant turn declares, the call id a tool message answers), so one reply rule
and one acceptance check serve every framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

QUESTION = "Weather in Lisbon?"
"""The first turn's user message; the kill lands somewhere in its turn."""
AGAIN = "Still there?"
"""The second process's user message."""
CALL_ID = "call_w1"
TOOL = "weather"
TOOL_ARGS = {"city": "Lisbon"}
TOOL_RESULT = "18C and sunny"
ANSWER = "It is 18C and sunny in Lisbon."
"""The model's answer after the tool's result."""
AGAIN_ANSWER = "Yes, I'm here."


@dataclass(frozen=True)
class Said:
    """One message as the matrix judges it."""

    role: str
    text: str = ""
    calls: tuple[str, ...] = ()
    answers: str | None = None

    def as_json(self) -> dict[str, object]:
        """The message as a JSON object (a child process's report)."""
        return {
            "role": self.role,
            "text": self.text,
            "calls": list(self.calls),
            "answers": self.answers,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Said:
        """The message of ``as_json``."""
        return cls(
            role=str(data["role"]),
            text=str(data["text"]),
            calls=tuple(str(c) for c in data["calls"]),  # type: ignore[union-attr]
            answers=None if data["answers"] is None else str(data["answers"]),
        )


@dataclass(frozen=True)
class Reply:
    """What the scripted model answers: a call of ``TOOL`` (``call_id``) or a text."""

    text: str = ""
    call_id: str | None = None
    args: dict[str, str] = field(default_factory=dict)


def reply(history: Sequence[Said]) -> Reply:
    """The scripted answer to a request: call the tool for the question, answer its result.

    The last message decides: the question asks for ``TOOL``; a tool result (real or
    MEM-3's placeholder) is answered with ``ANSWER``; anything else with ``AGAIN_ANSWER``.
    """
    last = history[-1] if history else None
    if last is not None and last.role == "user" and last.text == QUESTION:
        return Reply(call_id=CALL_ID, args=dict(TOOL_ARGS))
    if last is not None and last.role == "tool":
        return Reply(text=ANSWER)
    return Reply(text=AGAIN_ANSWER)


def refusal(history: Sequence[Said]) -> str | None:
    """Why a strict provider (OpenAI's Chat Completions rules) rejects ``history``; None when it accepts.

    Every call an assistant turn declares is answered by exactly one tool message in the
    run of tool messages right after that turn; no tool message stands outside such a
    run or answers a call its turn did not declare; no call id is declared twice.
    """
    declared: set[str] = set()
    i = 0
    while i < len(history):
        message = history[i]
        if message.role == "tool":
            return f"#{i}: a tool result for {message.answers!r} follows no call"
        i += 1
        if message.role != "assistant" or not message.calls:
            continue
        twice = declared.intersection(message.calls)
        if twice:
            return f"#{i - 1}: call {sorted(twice)[0]!r} declared a second time"
        declared.update(message.calls)
        open_calls = list(message.calls)
        while i < len(history) and history[i].role == "tool":
            answered = history[i].answers
            if answered not in open_calls:
                return f"#{i}: a tool result for {answered!r} answers no open call of #{i - 1}"
            open_calls.remove(answered)
            i += 1
        if open_calls:
            return f"call {open_calls[0]!r} has no result right after its turn"
    return None
