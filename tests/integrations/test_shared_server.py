"""Four agent processes share one ``flowmem serve``; agents and server are killed and restarted.

Each agent (``shared_agent.py``) is its own user, with its own token made by
``flowmem token create --user``, and writes its script into its ``FlowmemSession``
over a ``Client`` (one append a batch, with the batch's journaled
``idempotency_key``) into its own session, which its first write creates. The test
SIGKILLs each agent several times at random points of its script (a random number
of journal steps after it started, plus a random fraction of a step) and starts it
again; it SIGKILLs the server once, halfway, and starts it again on the same port
and database. In the end every history, read through the client, through
``FlowmemSession.get_items`` and through ``GET …?format=openai``, is sendable and is
exactly the script: nothing lost, nothing stored twice (docs/sharing.md).

Kills are placed by progress, not by time: an agent is killed once its journal
has grown by a random 1-6 lines since it started. An agent that reaches the end
of its script waits for its release file, made once it has been killed ``KILLS``
times, so every agent is killed as often as planned however the machine is
loaded. With agents that send a batch again under a new key after a kill (the
journaled key ignored) this test fails: a user message is stored twice.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest

from flowmem.client import Client
from flowmem.core import check_sendable
from flowmem.errors import NotFoundError
from flowmem.formats import from_openai, from_responses, to_openai, to_responses
from flowmem.scope import ExecutionContext
from tests.client.conftest import FAST_RETRY
from tests.integrations import forkserver
from tests.integrations.shared_agent import agent_process, read_journal, script
from tests.served import ServeExited, free_port, kill_serve, run_flowmem, start_serve, stop_serve

pytest.importorskip("agents")

from flowmem.integrations.openai_agents import FlowmemSession

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# Agents are forked from a clean interpreter that has imported the Agents SDK once
# (multiprocessing's forkserver, like spawn: nothing of pytest's process is
# inherited), so a restart costs milliseconds, not the SDK's 2-3 s import.
PROCESSES = get_context("forkserver")
PRELOAD = ["tests.integrations.shared_agent", "flowmem.integrations.openai_agents"]
AGENTS = 4
TURNS = 6
KILLS = 3  # per agent
DEADLINE = 240.0  # seconds for the whole run (10-25 s on a loaded 2-core machine)
KEY = "agent_items"  # FlowmemSession's buffer key


def _env() -> dict[str, str]:
    """The children's environment: this checkout's source and tests first, no ambient flowmem."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWMEM_")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


class FlakyServer:
    """One ``flowmem serve`` on a fixed port and database, which the test kills and restarts."""

    def __init__(self, database: str, cwd: Path, *args: str) -> None:
        self.args = ["--database", database, "--no-access-log", *args]
        self.cwd = cwd
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until ``/health`` answers (a busy port is tried again)."""
        deadline = time.monotonic() + 90
        while True:
            try:
                served = start_serve(self.args, self.cwd, port=self.port, env=_env())
            except ServeExited as exited:
                if time.monotonic() > deadline:
                    pytest.fail(str(exited))
                time.sleep(0.5)  # the port is still held by the killed server: try again
                continue
            self.process = served.process
            return

    def kill(self) -> None:
        """SIGKILL the server and its workers (no graceful shutdown) and reap it."""
        if self.process is not None:
            kill_serve(self.process)

    def stop(self) -> None:
        """Stop the server gracefully, or kill it after 30 s."""
        if self.process is not None:
            stop_serve(self.process)


@dataclass
class Agent:
    """One agent process: its user, token, session, journal, and how often it was killed."""

    number: int
    user: str
    token: str
    session_id: str
    journal: Path
    log: Path
    process: BaseProcess | None = None
    kills: int = 0
    resent: int = 0  # restarts that sent a batch again with its journaled key
    kill_at: int = 0  # journal lines at which the next kill comes
    finished: bool = False
    starts: list[float] = field(default_factory=list)

    def lines(self) -> int:
        """How many journal lines exist (each step adds one)."""
        try:
            return self.journal.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    def done_batches(self) -> int:
        """How many batches the journal says are stored."""
        try:
            return self.journal.read_bytes().count(b'"done": true')
        except FileNotFoundError:
            return 0

    def start(self, url: str, rng: random.Random) -> None:
        """Start (or restart) the agent process; plan its next kill."""
        if read_journal(self.journal)[1] is not None:
            self.resent += 1  # killed between sending a batch and recording its answer
        self.kill_at = self.lines() + rng.randint(1, 6)
        self.starts.append(time.monotonic())
        self.process = PROCESSES.Process(
            target=agent_process,
            args=(
                str(self.log), url, self.token, self.session_id, str(self.journal),
                str(self.number), str(TURNS),
            ),
            daemon=True,
        )
        self.process.start()

    def kill(self) -> None:
        """SIGKILL the agent process (if it runs) and reap it."""
        if self.process is not None:
            self.process.kill()
            self.process.join(timeout=30)


def _token(database: str, user: str, cwd: Path) -> str:
    """A user token made as docs/sharing.md says: ``flowmem token create --user``."""
    args = ["token", "create", "--user", user, "--database", database, "--label", user]
    made = run_flowmem(args, cwd, env=_env())  # forked where it can be (tests/forking.py)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _expected(agent: int) -> list[dict[str, Any]]:
    """The agent's script as stored rows (flat)."""
    return [row for batch in script(agent, TURNS) for row in from_responses(batch)]


def _drive(server: FlakyServer, agents: list[Agent], rng: random.Random) -> None:
    """Run the agents to the end of their scripts, killing them and the server on the way."""
    total = len(script(0, TURNS)) * len(agents)
    server_killed = False
    for agent in agents:
        agent.start(server.url, rng)
    deadline = time.monotonic() + DEADLINE
    while not all(agent.finished for agent in agents):
        if time.monotonic() > deadline:
            logs = {a.number: a.log.read_text(errors="replace")[-2000:] for a in agents}
            pytest.fail(f"the agents did not finish in {DEADLINE} s: {logs}")
        for agent in agents:
            process = agent.process
            assert process is not None
            if agent.finished:
                continue
            code = process.exitcode
            if code is not None:
                if code != 0:
                    pytest.fail(f"agent {agent.number} exited {code}: {agent.log.read_text()}")
                assert b'"finished": true' in agent.journal.read_bytes()
                agent.finished = True
            elif agent.kills < KILLS and agent.lines() >= agent.kill_at:
                time.sleep(rng.uniform(0, 0.03))  # somewhere inside the next step
                agent.kill()
                agent.kills += 1
                agent.start(server.url, rng)
            elif agent.kills == KILLS:
                agent.journal.with_suffix(".release").touch()
        if not server_killed and sum(a.done_batches() for a in agents) >= total // 2:
            server.kill()
            server_killed = True
            server.start()
        time.sleep(0.01)
    assert server_killed
    assert [agent.kills for agent in agents] == [KILLS] * len(agents)


def _check(server: FlakyServer, agents: list[Agent]) -> None:
    """Every history is the script, sendable, in every read; sessions belong to their users."""
    for agent in agents:
        expected = _expected(agent.number)
        with Client(server.url, agent.token, retry=FAST_RETRY) as client:
            context = ExecutionContext(session_id=agent.session_id)
            rows = client.load("session", KEY, context).messages
            assert check_sendable(rows) == []
            assert to_responses(rows) == to_responses(expected)  # nothing lost or twice
            assert len(rows) == len(expected)

            items = asyncio.run(FlowmemSession(agent.session_id, client).get_items())
            assert [dict(item) for item in items] == to_responses(expected)

            openai = client.load_buffer("session", KEY, session_id=agent.session_id, format="openai")
            assert openai.messages == to_openai(expected)
            assert check_sendable(from_openai(openai.messages)) == []

            session = client.get_session(agent.session_id)  # made by the first write
            assert session.owner == agent.user
            assert [s.id for s in client.iter_sessions()] == [agent.session_id]
            other = agents[(agent.number + 1) % len(agents)]
            with pytest.raises(NotFoundError):  # another user's session is not even visible
                client.get_session(other.session_id)
            stranger = ExecutionContext(session_id=other.session_id)
            assert client.load("session", KEY, stranger).messages == []
            with pytest.raises(NotFoundError):  # nor writable
                client.append("session", KEY, {"role": "user", "content": "hi"}, stranger)


def _run(tmp_path: Path, database: str, *serve_args: str) -> None:
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    print(f"seed {seed}")
    agents = [
        Agent(
            number=n,
            user=f"user-{n}",
            token=_token(database, f"user-{n}", tmp_path),
            session_id=f"shared-chat-{n}",
            journal=tmp_path / f"agent-{n}.journal",
            log=tmp_path / f"agent-{n}.err",
        )
        for n in range(AGENTS)
    ]
    server = FlakyServer(database, tmp_path, *serve_args)
    _own_fork_server()
    try:
        server.start()
        _drive(server, agents, rng)
        replayed = sum(a.journal.read_bytes().count(b'"replayed": true') for a in agents)
        resent = sum(a.resent for a in agents)
        print(f"{resent} batches sent again after a kill, {replayed} answered by a replay")
        _check(server, agents)
    finally:
        for agent in agents:
            agent.kill()
        server.stop()


def _own_fork_server() -> None:
    """The agents' fork server: this module's own, preloading the agents' modules alone.

    A server of this module's own, started at its first test with this module's environment
    and stopped after its last (``own_fork_server``): in one clean-clone run the agents forked
    from a server another test had started long before made no progress in 240 s (a hang not
    reproduced alone). Its two tests share it (the agents' SDK imported once, ~2.8 s of CPU);
    a server another module started in between (a random order) is replaced.
    """
    if forkserver.running_preload() != frozenset(forkserver.started_with(PRELOAD, alone=True)):
        forkserver.stop()
        forkserver.context(PRELOAD, alone=True)


@pytest.fixture(scope="module", autouse=True)
def own_fork_server() -> Iterator[None]:
    """Stop the module's fork server (and whatever runs) after its last test, reaping it."""
    yield
    forkserver.stop()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    """A SQLite file of the test."""
    yield f"sqlite:///{tmp_path}/shared.db"


def test_agents_killed_and_restarted_share_one_sqlite_server_losing_and_doubling_nothing(
    tmp_path: Path, sqlite_url: str
) -> None:
    _run(tmp_path, sqlite_url)


@pytest.mark.postgres
def test_agents_killed_and_restarted_share_one_postgres_server_with_two_workers(
    tmp_path: Path, postgres_db_url: str
) -> None:
    _run(tmp_path, postgres_db_url, "--workers", "2")
