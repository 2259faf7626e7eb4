"""A toy program for the harness's own tests: a JSON-lines file as its store, written ahead.

It writes the question and the model's call before the tool starts and heals an
unanswered call before a new question, so every round of it passes; with a
``place`` whose path holds ``late`` it saves the turn only at its end, as the frameworks
that save late do, so rounds killed inside the turn lose the question; with ``broken``
its second turn raises.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.integrations.kill.harness import said_list
from tests.integrations.kill.points import Killer
from tests.integrations.kill.script import AGAIN, TOOL_RESULT, Said, reply

CONTROL_STORE = None


def _load(path: Path) -> list[Said]:
    if not path.exists():
        return []
    return [Said.from_json(json.loads(line)) for line in path.read_text().splitlines() if line]


def _save(path: Path, messages: list[Said]) -> None:
    with path.open("a") as file:
        for m in messages:
            file.write(json.dumps(m.as_json()) + "\n")
        file.flush()
        os.fsync(file.fileno())


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the toy agent."""
    path = Path(place.removeprefix("sqlite:///")).with_name(f"{thread}.jsonl")
    late = "late" in place
    if "broken" in place and text == AGAIN:
        raise RuntimeError("the toy's second turn is broken")
    history = _load(path)
    answered = {m.answers for m in history if m.role == "tool"}
    heal = [
        Said("tool", "interrupted", answers=c)
        for m in history
        for c in m.calls
        if c not in answered
    ]
    new = [*heal, Said("user", text)]
    if not late:
        _save(path, new)
        new = []
    history = [*history, *heal, Said("user", text)]
    requests: list[list[Said]] = []
    for call in (1, 2, 3):
        requests.append(list(history))
        killer.model_start(call)
        answer = reply(history)
        said = Said("assistant", answer.text, calls=(answer.call_id,) if answer.call_id else ())
        killer.model_end(call, bool(answer.call_id))
        history.append(said)
        new.append(said)
        if not late:
            _save(path, new)
            new = []
        if not answer.call_id:
            break
        killer.tool_start()
        killer.tool_work()
        result = Said("tool", TOOL_RESULT, answers=answer.call_id)
        killer.tool_end()
        history.append(result)
        new.append(result)
    _save(path, new)
    return {"requests": [said_list(r) for r in requests], "stored": said_list(_load(path))}
