"""A child process that runs one turn and kills itself with SIGKILL at a chosen point.

Usage: ``python -m tests.runtime.crash_child DB SESSION BASE_URL COUNT_DIR CRASH CONTENT``

CRASH is one of:
- ``model_reply``: the model answered; killed before the assistant turn is appended;
- ``assistant``: the assistant turn is appended; killed before any tool starts;
- ``in_tool:NAME``: killed in the middle of tool NAME (after it counted its execution);
- ``tool_returned:NAME``: tool NAME returned; killed before its result is appended;
- ``none``: no crash (the turn runs to its end).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from flowmem.runtime.loop import TurnEvent
from flowmem.store import open_store
from tests.runtime.helpers import counting_tools, make_runner


def die() -> None:
    """Kill this process the hard way: no cleanup, no finally blocks, no atexit."""
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    db, session_id, base_url, count_dir, crash, content = argv
    store = open_store(f"sqlite:///{db}")
    hooks = {}
    if crash.startswith("in_tool:"):
        hooks[crash.split(":", 1)[1]] = die
    runner = make_runner(store, base_url, counting_tools(Path(count_dir), hooks))

    def on_event(event: TurnEvent) -> None:
        if crash in ("model_reply", "assistant") and event.kind == crash:
            die()
        if (
            crash.startswith("tool_returned:")
            and event.kind == "tool_returned"
            and event.data["call"].name == crash.split(":", 1)[1]
        ):
            die()

    runner.on_event = on_event
    session = store.get_session(session_id)
    if session is None:
        return 3
    result = runner.start_turn(session, content, wait=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
