"""A scripted agent process for the shared-server test (``test_shared_server.py``).

Run as ``python -m tests.integrations.shared_agent URL TOKEN SESSION_ID JOURNAL AGENT TURNS``,
or as a ``multiprocessing`` process (``agent_process``). It writes its script (``script``)
into an OpenAI Agents SDK ``FlowmemSession`` over a ``flowmem.client.Client``, one
append per batch (what ``add_items`` writes, with its key), reads it back through
the session, and may be killed (SIGKILL) at any point and started again.

How it survives a kill: a journal file, one JSON line per event, flushed before
the next step. Before batch ``i`` is sent it records ``{"i": i, "key": K}`` (a
fresh Idempotency-Key); after the server answered, ``{"i": i, "done": true}``.
A restarted agent reads the journal: a batch with a key and no ``done`` may or
may not have been stored (the kill may have come after the server committed and
before the answer arrived), so it is sent again *with the same key*: the server
writes it once, or answers the first answer and writes nothing. The client's
own retries (the server restarting, a lost answer) reuse that key too. Each
batch waits a few milliseconds first, as a user, a model or a tool takes time.
At the end of its script the agent waits for ``JOURNAL.release`` (the test
makes it once it has killed the agent as often as it meant to), then exits. The key
is the append's ``idempotency_key=`` (docs/sharing.md §5): ``add_items`` takes none
(the SDK's ``Session`` interface has no place for it), so the batch goes through
the memory's ``append`` with the session's scope, key and context, as
``add_items`` sends it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import uuid
from pathlib import Path
from typing import Any

from flowmem.client import Client, RetryPolicy
from flowmem.core import check_sendable
from flowmem.formats import from_responses

# outlasts a server restart on a loaded machine (about 90 s of attempts)
PATIENT = RetryPolicy(max_attempts=200, base_delay=0.05, max_delay=0.5)


def script(agent: int, turns: int) -> list[list[dict[str, Any]]]:
    """The batches agent ``agent`` adds, in order: per turn user, calls, outputs, answer."""
    batches: list[list[dict[str, Any]]] = []
    for turn in range(turns):
        calls = 1 + (agent + turn) % 2  # one or two tool calls per turn
        ids = [f"call_{agent}_{turn}_{n}" for n in range(calls)]
        batches.append([{"role": "user", "content": f"agent {agent} turn {turn}: add {turn} and {agent}"}])
        batches.append(
            [
                {
                    "type": "function_call",
                    "id": f"fc_{agent}_{turn}_{n}",
                    "call_id": call_id,
                    "name": "add",
                    "arguments": json.dumps({"a": turn, "b": agent + n}),
                    "status": "completed",
                }
                for n, call_id in enumerate(ids)
            ]
        )
        batches.append(
            [
                {"type": "function_call_output", "call_id": call_id, "output": str(turn + agent + n)}
                for n, call_id in enumerate(ids)
            ]
        )
        batches.append(
            [
                {
                    "type": "message",
                    "id": f"msg_{agent}_{turn}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "text": f"agent {agent} turn {turn}: the sum is {turn + agent}",
                            "annotations": [],
                        }
                    ],
                }
            ]
        )
    return batches


def read_journal(path: Path) -> tuple[int, str | None]:
    """(the first batch not known to be stored, the key it was sent with or None)."""
    done = -1
    pending: dict[int, str] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:  # a line torn by the kill: its request was never sent
                continue
            if entry.get("done"):
                done = max(done, entry["i"])
            elif "key" in entry:
                pending[entry["i"]] = entry["key"]
    return done + 1, pending.get(done + 1)


async def run(url: str, token: str, session_id: str, journal: Path, agent: int, turns: int) -> None:
    """Add the rest of the script, resuming from the journal."""
    from flowmem.integrations.openai_agents import FlowmemSession

    batches = script(agent, turns)
    start, key = read_journal(journal)
    with (
        Client(url, token, retry=PATIENT, timeout=20.0) as client,
        journal.open("a", encoding="utf-8") as log,
    ):
        session = FlowmemSession(session_id, client)
        for i in range(start, len(batches)):
            if i % 4 == 1:
                # before the "model" answers, the history it would be sent must be sendable
                items = await session.get_items()
                problems = check_sendable(from_responses([dict(item) for item in items]))
                assert not problems, problems
            if key is None:
                key = uuid.uuid4().hex
                log.write(json.dumps({"i": i, "key": key}) + "\n")
                log.flush()
            await asyncio.sleep(random.uniform(0.005, 0.025))  # the user, model or tool at work
            rows = from_responses(batches[i])
            added = await asyncio.to_thread(
                client.append,
                session.scope,
                session.key,
                rows,
                session.context,
                session.max_messages,
                idempotency_key=key,
            )
            log.write(json.dumps({"i": i, "done": True, "replayed": added.replayed}) + "\n")
            log.flush()
            key = None
        # the test may still want to kill this agent: it says when the agent may end
        release = journal.with_suffix(".release")
        while not release.exists():
            await asyncio.sleep(0.01)
        log.write(json.dumps({"finished": True}) + "\n")
        log.flush()


def agent_process(log: str, *argv: str) -> None:
    """The target of an agent ``multiprocessing.Process``: its stderr goes to ``log``."""
    with open(log, "ab", buffering=0) as stream:
        os.dup2(stream.fileno(), 2)
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False, buffering=1)  # noqa: SIM115
    main(list(argv))


def main(argv: list[str]) -> None:
    """Parse the command line and run the agent."""
    url, token, session_id, journal, agent, turns = argv
    asyncio.run(run(url, token, session_id, Path(journal), int(agent), int(turns)))


if __name__ == "__main__":
    main(sys.argv[1:])
