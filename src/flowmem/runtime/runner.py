"""``AgentRunner``: runs sessions' turns (the ``TurnRunner`` of ``flowmem.sessions``).

It owns what surrounds a turn: picking the session's agent, the session status
(compare-and-set idle/completed/failed → running, so a second turn is refused with
``ConflictError`` before anything is recorded), the liveness lease and its heartbeat,
releasing a session left ``running`` by a crashed process, stop requests, and
running the turn inline (``wait=True``) or in a background thread.

A finished turn's result is kept only while a client of this process can still ask
for it: ``start_turn(wait=True)`` hands it over and keeps nothing; a background
turn's result stays for ``keep_results_for`` seconds after it ended (default 300)
and at most ``keep_results`` finished turns are kept (default 100, the oldest is
forgotten first), so the memory the runner holds is bounded whatever the number of
turns. A forgotten turn is ``NotFoundError`` to ``turn()``/``wait()``; the session's
status and transcript keep the outcome for everyone.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flowmem import metrics
from flowmem.errors import (
    AccessDeniedError,
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from flowmem.runtime.agent import Agent
from flowmem.runtime.loop import EventSink, TurnLoop, TurnResult, turn_context
from flowmem.runtime.state import RuntimeState
from flowmem.scope import Refusal, resolve_scope
from flowmem.service import MemoryService
from flowmem.store.base import SessionRecord, Store

log = logging.getLogger("flowmem")

STARTABLE = frozenset({"idle", "completed", "failed"})
DEFAULT_STALE_AFTER = 60.0
DEFAULT_KEEP_RESULTS = 100  # finished turns whose result turn()/wait() can still return
DEFAULT_KEEP_RESULTS_FOR = 300.0  # seconds a finished turn's result stays askable


@dataclass
class _Turn:
    """A turn this process is running."""

    turn_id: str
    session_id: str
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    result: TurnResult | None = None
    thread: threading.Thread | None = None


class AgentRunner:
    """Runs turns of sessions with the agent each session names.

    ``agents`` maps names to agents; a session whose ``agent`` is empty runs
    ``default_agent`` (the only agent when there is exactly one). ``stale_after``
    is how long a ``running`` session may go without a heartbeat before it counts
    as left by a crashed process; the heartbeat runs every ``heartbeat`` seconds
    (default a quarter of ``stale_after``). A background turn's result stays
    askable (``turn``/``wait``) for ``keep_results_for`` seconds after the turn
    ended, for at most ``keep_results`` finished turns (0 keeps none).
    """

    def __init__(
        self,
        store: Store,
        service: MemoryService | None = None,
        agents: Iterable[Agent] = (),
        *,
        default_agent: str | None = None,
        stale_after: float = DEFAULT_STALE_AFTER,
        heartbeat: float | None = None,
        clock: Callable[[], float] = time.time,
        on_event: EventSink | None = None,
        keep_results: int = DEFAULT_KEEP_RESULTS,
        keep_results_for: float = DEFAULT_KEEP_RESULTS_FOR,
    ) -> None:
        if isinstance(keep_results, bool) or not isinstance(keep_results, int) or keep_results < 0:
            raise ConfigurationError(f"keep_results must be an integer >= 0, got {keep_results!r}")
        if (
            isinstance(keep_results_for, bool)
            or not isinstance(keep_results_for, (int, float))
            or not keep_results_for >= 0
        ):
            raise ConfigurationError(
                f"keep_results_for must be a number of seconds >= 0, got {keep_results_for!r}"
            )
        if (
            isinstance(stale_after, bool)
            or not isinstance(stale_after, (int, float))
            or stale_after <= 0
        ):
            raise ConfigurationError(f"stale_after must be a number > 0, got {stale_after!r}")
        if service is None:
            service = MemoryService(store, clock=clock)
        self.store = store
        self.service = service
        self.clock = clock
        self.on_event = on_event
        self.stale_after = float(stale_after)
        self.heartbeat = float(heartbeat) if heartbeat else max(self.stale_after / 4, 0.01)
        self.state = RuntimeState(store, stale_after=self.stale_after, clock=clock)
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            self.add_agent(agent)
        self.default_agent = default_agent
        self._lock = threading.Lock()
        self.keep_results = keep_results
        self.keep_results_for = float(keep_results_for)
        self._running: dict[str, _Turn] = {}  # by session id
        self._turns: dict[str, _Turn] = {}  # running and askable finished turns, by turn id
        # finished turns still askable, oldest first, with when they ended (monotonic)
        self._finished: OrderedDict[str, float] = OrderedDict()

    # --- agents -----------------------------------------------------------------------
    def add_agent(self, agent: Agent) -> None:
        """Make ``agent`` available to sessions by its name."""
        if agent.name in self.agents:
            raise ConfigurationError(f"agent {agent.name!r} is already registered")
        self.agents[agent.name] = agent

    def agent_for(self, session: SessionRecord) -> Agent:
        """Return the agent a session runs; an unknown name is an ``InvalidInputError``."""
        name = session.agent or self.default_agent
        if name is None and len(self.agents) == 1:
            name = next(iter(self.agents))
        if name is None:
            raise InvalidInputError("the session names no agent and there is no default agent")
        agent = self.agents.get(name)
        if agent is None:
            raise InvalidInputError(
                f"no agent named {name!r} is configured (known: {', '.join(sorted(self.agents))})"
            )
        return agent

    # --- stale sessions -------------------------------------------------------------------
    def is_stale(self, session: SessionRecord) -> bool:
        """True when ``session`` is ``running`` but no process has renewed its lease in time."""
        if session.status != "running":
            return False
        with self._lock:
            if session.id in self._running:
                return False
        return self.state.lease(session.id) is None

    def release_if_stale(self, session: SessionRecord) -> bool:
        """Release a session left ``running`` by a crashed process to ``failed``; True if released."""
        if not self.is_stale(session):
            return False
        released = self.store.set_session_status(session.id, "failed", frozenset({"running"}))
        if released:
            log.warning(
                "session %s was left running by a process that stopped; released to failed",
                session.id,
            )
        return released

    def release_stale(self, page: int = 100) -> list[str]:
        """Release every stale ``running`` session (run at server start); return their ids."""
        released: list[str] = []
        offset = 0
        while True:
            sessions, total = self.store.list_sessions(None, True, page, offset)
            for session in sessions:
                if self.release_if_stale(session):
                    released.append(session.id)
            offset += page
            if offset >= total or not sessions:
                return released

    # --- turns ------------------------------------------------------------------------
    def start_turn(self, session: SessionRecord, content: str, *, wait: bool) -> dict[str, Any]:
        """Start a turn with the user's ``content``; with ``wait``, run it to the end.

        Raises ``ConflictError`` when the session is already running a turn (nothing
        is recorded then), ``NotFoundError`` for a deleted session,
        ``InvalidInputError`` for empty content or an unknown agent, and
        ``AccessDeniedError`` when the agent's conversation scope refuses for this
        session (a ``user``-scoped agent on an unowned session, MEM-8).
        """
        if not isinstance(content, str) or not content.strip():
            raise InvalidInputError("a user turn needs non-empty text content")
        current = self.store.get_session(session.id)
        if current is None:
            raise NotFoundError(f"session {session.id} does not exist")
        agent = self.agent_for(current)
        turn_id = str(uuid.uuid4())
        refusal = resolve_scope(agent.memory.scope, turn_context(agent, current, turn_id))
        if isinstance(refusal, Refusal):
            raise AccessDeniedError(
                f"agent {agent.name!r} keeps its conversation in scope {agent.memory.scope!r}, "
                f"which refuses for this session: {refusal.sentence}",
                rule="MEM-8",
            )
        if self.release_if_stale(current):
            current = self.store.get_session(current.id) or current
        turn = _Turn(turn_id, current.id)
        with self._lock:
            if current.id in self._running:
                raise ConflictError(f"session {current.id} is already running a turn")
            self._running[current.id] = turn
        try:
            # Claim: a live lease means a turn runs elsewhere; never renew someone else's
            # lease from here, or retried requests would keep a dead session alive.
            lease = self.state.lease(current.id)
            if current.status == "running" or (
                lease is not None and lease.get("state") == "running"
            ):
                raise ConflictError(f"session {current.id} is already running a turn")
            self.state.beat(current.id, turn_id)
            if not self.store.set_session_status(current.id, "running", STARTABLE):
                raise ConflictError(f"session {current.id} is already running a turn")
        except BaseException:
            with self._lock:
                self._running.pop(current.id, None)
            raise
        with self._lock:
            self._turns[turn_id] = turn
        self.state.beat(current.id, turn_id)
        if wait:
            self._run(agent, current, content, turn)
            with self._lock:  # the caller gets the result now: nothing left to ask for
                self._turns.pop(turn_id, None)
                self._finished.pop(turn_id, None)
            return self._status(turn)
        turn.thread = threading.Thread(
            target=self._run,
            args=(agent, current, content, turn),
            name=f"flowmem-turn-{turn_id[:8]}",
            daemon=True,
        )
        turn.thread.start()
        return {"turn_id": turn_id, "status": "running"}

    def _run(self, agent: Agent, session: SessionRecord, content: str, turn: _Turn) -> None:
        beating = threading.Event()
        heart = threading.Thread(target=self._beat, args=(turn, beating), daemon=True)
        heart.start()
        result: TurnResult | None = None
        try:
            loop = TurnLoop(
                agent,
                self.service,
                self.store,
                self.state,
                on_event=self.on_event,
                clock=self.clock,
            )
            with metrics.span("flowmem.turn", session_id=session.id, turn_id=turn.turn_id):
                result = loop.run(session, content, turn.turn_id, turn.stop)
        except Exception as exc:  # an unexpected failure still ends the turn as failed
            log.exception("turn %s of session %s failed", turn.turn_id, session.id)
            error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            result = TurnResult(turn.turn_id, "failed", "error", 0, "", error)
        finally:
            beating.set()
            heart.join()
            final = "failed" if result is None or result.status == "failed" else "completed"
            metrics.turn_ended(final, "error" if result is None else result.reason)
            try:
                lease = self.state.lease(session.id)
                if lease is None or lease.get("turn_id") == turn.turn_id:
                    self.store.set_session_status(session.id, final, frozenset({"running"}))
                    self.state.beat(session.id, turn.turn_id, state="done")
                else:  # released as stale while stalled; another turn owns the session now
                    log.warning(
                        "turn %s of session %s ended after its session was released; "
                        "its final status is not recorded",
                        turn.turn_id,
                        session.id,
                    )
            finally:
                turn.result = result
                turn.thread = None
                with self._lock:
                    self._running.pop(session.id, None)
                    if turn.turn_id in self._turns:
                        self._finished[turn.turn_id] = time.monotonic()
                    self._forget_old()
                turn.done.set()

    def _forget_old(self) -> None:
        """Forget finished turns past ``keep_results_for`` or beyond ``keep_results`` (lock held)."""
        horizon = time.monotonic() - self.keep_results_for
        while self._finished:
            turn_id, ended = next(iter(self._finished.items()))
            if len(self._finished) <= self.keep_results and ended > horizon:
                break
            del self._finished[turn_id]
            self._turns.pop(turn_id, None)

    def _beat(self, turn: _Turn, beating: threading.Event) -> None:
        while not beating.wait(self.heartbeat):
            try:
                self.state.beat(turn.session_id, turn.turn_id)
            except Exception:  # a missed heartbeat must not kill the turn
                log.warning("heartbeat of session %s failed", turn.session_id, exc_info=True)

    def _known(self, turn_id: str) -> _Turn:
        with self._lock:
            self._forget_old()
            turn = self._turns.get(turn_id)
        if turn is None:
            raise NotFoundError(
                f"turn {turn_id} is not known to this runner (or its result was already forgotten)"
            )
        return turn

    @staticmethod
    def _status(turn: _Turn) -> dict[str, Any]:
        if turn.result is None:
            return {"turn_id": turn.turn_id, "status": "running"}
        return turn.result.to_dict()

    def turn(self, turn_id: str) -> dict[str, Any]:
        """Return a turn's status: ``running`` or its final ``TurnResult`` (while still kept)."""
        return self._status(self._known(turn_id))

    def wait(self, turn_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Wait for a turn to finish (at most ``timeout`` seconds); return its status."""
        turn = self._known(turn_id)
        turn.done.wait(timeout)
        return self._status(turn)

    def stop(self, session: SessionRecord) -> bool:
        """Ask the session's running turn to stop between steps; True when one was running.

        Unanswered calls are left for the next user turn to heal (MEM-3). A turn
        running in another process is reached through a stop request in the store
        (it checks between steps). A session left ``running`` by a crashed process
        is released instead (also True).
        """
        with self._lock:
            turn = self._running.get(session.id)
        if turn is not None:
            turn.stop.set()
            return True
        current = self.store.get_session(session.id)
        if current is None or current.status != "running":
            return False
        if self.release_if_stale(current):
            return True
        lease = self.state.lease(current.id)
        if lease is None or lease.get("state") != "running":
            return False
        self.state.request_stop(current.id, str(lease.get("turn_id")))
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Stop every running turn, wait for their threads, then close the agents' models.

        A model with a ``close()`` (``OpenAIChatModel``: its HTTP client and sockets) is
        closed once no turn of this runner runs; while one still runs after ``timeout``
        seconds, the models stay open for it.
        """
        with self._lock:
            turns = list(self._running.values())
        for turn in turns:
            turn.stop.set()
        for turn in turns:
            turn.done.wait(timeout)
        if all(turn.done.is_set() for turn in turns):
            _close_models(self.agents.values())


def _close_models(agents: Iterable[Agent]) -> None:
    """Close each distinct model of ``agents`` that has a ``close()`` (once, however many share it)."""
    closed: set[int] = set()
    for agent in agents:
        close = getattr(agent.model, "close", None)
        if callable(close) and id(agent.model) not in closed:
            closed.add(id(agent.model))
            close()
