"""``FlowmemSessionService`` behaves as ADK's ``DatabaseSessionService`` for the same calls.

Each scenario runs its calls on both services (flowmem's on memory, SQLite and
PostgreSQL; ADK's over SQLite through aiosqlite) and records what every call
returned or raised; the two records must be equal: sessions with their events (every
field), merged state and times, listings in order, user state, and the ADK errors
raised (``AlreadyExistsError``, ``StaleSessionError``, ``SessionNotFoundError``).
Sessions are keyed as ADK keys them (decision 0100): one id of two users or apps is
two sessions, and a session deleted and created again is a new, empty one that the
deleted one's session objects cannot write to. Where flowmem deliberately differs (the
rules, ids that are not usable identities) the scenarios stay out of it;
``test_rules.py`` and ``test_sessions.py`` test those.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.sessions import Session
from google.adk.sessions.base_session_service import GetSessionConfig

from tests.integrations.adk.conftest import Clock
from tests.integrations.adk.events import answer, call, result, rich, state, user

Record = list[tuple[str, Any]]


class Recorder:
    """Runs a service's calls and records each outcome in a comparable form."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.record: Record = []

    async def __call__(self, label: str, call: Awaitable[Any]) -> Any:
        try:
            value = await call
        except Exception as exc:
            self.record.append((label, f"raised {type(exc).__name__}"))
            return None
        self.record.append((label, _form(value)))
        return value


def _session_form(session: Session) -> dict[str, Any]:
    # ADK's database keeps a session's update time in microseconds (a datetime);
    # flowmem keeps the float it was given (the event's timestamp, exactly)
    form = session.model_dump(mode="python")
    form["last_update_time"] = round(form["last_update_time"], 6)
    return form


def _form(value: Any) -> Any:
    if isinstance(value, Session):
        return _session_form(value)
    if hasattr(value, "sessions"):
        return [_session_form(s) for s in value.sessions]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="python")
    return value


Scenario = Callable[[Recorder, Clock], Awaitable[None]]


async def conversation(run: Recorder, clock: Clock) -> None:
    """A session's life: state at creation, turns with a tool call, reads, a listing."""
    made = await run(
        "create",
        run.service.create_session(
            app_name="shop",
            user_id="alice",
            session_id="s-1",
            state={"cart": [], "app:currency": "EUR", "user:name": "Alice", "temp:draft": 1},
        ),
    )
    for event in (
        user("find shoes", 1),
        call("c1", 2),
        result("c1", 3),
        answer("found two pairs", 4),
        state({"cart": ["shoe"], "user:size": 38, "temp:scratch": "x"}, 5),
        rich(6),
    ):
        await run(f"append {event.id}", run.service.append_event(made, event))
    await run("in memory", _returned(made))
    await run("get", run.service.get_session(app_name="shop", user_id="alice", session_id="s-1"))
    await run("user state", run.service.get_user_state(app_name="shop", user_id="alice"))
    await run("list", run.service.list_sessions(app_name="shop", user_id="alice"))


async def scopes(run: Recorder, clock: Clock) -> None:
    """App state is the app's, user state the user's (across their sessions), temp none."""
    a1 = await run("a1", run.service.create_session(app_name="shop", user_id="alice", session_id="a-1"))
    clock.set_time(clock.now + 1)
    a2 = await run("a2", run.service.create_session(app_name="shop", user_id="alice", session_id="a-2"))
    clock.set_time(clock.now + 1)
    b1 = await run(
        "b1",
        run.service.create_session(
            app_name="shop", user_id="bob", session_id="b-1", state={"user:vip": True}
        ),
    )
    await run(
        "other app",
        run.service.create_session(
            app_name="blog", user_id="alice", session_id="o-1", state={"app:theme": "dark"}
        ),
    )
    await run("a1 delta", run.service.append_event(a1, state({"app:open": True, "user:lang": "fr"}, 1)))
    await run("b1 delta", run.service.append_event(b1, state({"user:lang": "de", "temp:t": 0}, 2)))
    for sid, user_id in (("a-1", "alice"), ("a-2", "alice"), ("b-1", "bob"), ("o-1", "alice")):
        app = "blog" if sid == "o-1" else "shop"
        await run(
            f"get {sid}", run.service.get_session(app_name=app, user_id=user_id, session_id=sid)
        )
    await run("a2 stale-free", run.service.append_event(a2, user("hello", 3)))
    await run("list alice", run.service.list_sessions(app_name="shop", user_id="alice"))
    await run("list all", run.service.list_sessions(app_name="shop"))
    await run("list nobody", run.service.list_sessions(app_name="shop", user_id="carol"))
    await run("state bob", run.service.get_user_state(app_name="shop", user_id="bob"))
    await run("state carol", run.service.get_user_state(app_name="shop", user_id="carol"))


async def reads(run: Recorder, clock: Clock) -> None:
    """``get_session`` with ``num_recent_events`` and ``after_timestamp``; other users find nothing."""
    made = await run("create", run.service.create_session(app_name="a", user_id="u", session_id="r-1"))
    for n in range(1, 7):
        event = user(f"m{n}", n) if n % 2 else answer(f"a{n}", n)
        await run(f"append {n}", run.service.append_event(made, event))
    configs = [
        GetSessionConfig(num_recent_events=0),
        GetSessionConfig(num_recent_events=1),
        GetSessionConfig(num_recent_events=4),
        GetSessionConfig(num_recent_events=100),
        GetSessionConfig(after_timestamp=made.events[2].timestamp),
        GetSessionConfig(after_timestamp=made.events[2].timestamp + 0.5),
        GetSessionConfig(after_timestamp=made.events[1].timestamp, num_recent_events=2),
        GetSessionConfig(after_timestamp=made.events[-1].timestamp + 1),
    ]
    for index, config in enumerate(configs):
        await run(
            f"config {index}",
            run.service.get_session(app_name="a", user_id="u", session_id="r-1", config=config),
        )
    await run("other user", run.service.get_session(app_name="a", user_id="v", session_id="r-1"))
    await run("other app", run.service.get_session(app_name="b", user_id="u", session_id="r-1"))
    await run("absent", run.service.get_session(app_name="a", user_id="u", session_id="nope"))


async def refusals(run: Recorder, clock: Clock) -> None:
    """A taken id, a stale session object, a deleted session, a partial event."""
    first = await run("create", run.service.create_session(app_name="a", user_id="u", session_id="x-1"))
    await run("again", run.service.create_session(app_name="a", user_id="u", session_id="x-1"))
    copy_a = await run("read a", run.service.get_session(app_name="a", user_id="u", session_id="x-1"))
    copy_b = await run("read b", run.service.get_session(app_name="a", user_id="u", session_id="x-1"))
    await run("append a", run.service.append_event(copy_a, user("from a", 1)))
    await run("append b (stale)", run.service.append_event(copy_b, user("from b", 2)))
    await run("append first (stale)", run.service.append_event(first, answer("late", 3)))
    await run("copy a goes on", run.service.append_event(copy_a, answer("a again", 4)))
    partial = answer("typing…", 5)
    partial.partial = True
    await run("partial", run.service.append_event(copy_a, partial))
    await run("read", run.service.get_session(app_name="a", user_id="u", session_id="x-1"))
    await run("delete other user", run.service.delete_session(app_name="a", user_id="v", session_id="x-1"))
    await run("still there", run.service.get_session(app_name="a", user_id="u", session_id="x-1"))
    await run("delete", run.service.delete_session(app_name="a", user_id="u", session_id="x-1"))
    await run("gone", run.service.get_session(app_name="a", user_id="u", session_id="x-1"))
    await run("append to gone", run.service.append_event(copy_a, user("anyone?", 6)))
    await run("delete again", run.service.delete_session(app_name="a", user_id="u", session_id="x-1"))
    await run("list", run.service.list_sessions(app_name="a"))


async def keys(run: Recorder, clock: Clock) -> None:
    """One session id of two users and of two apps is three sessions (issue 36)."""
    ana = await run("ana", run.service.create_session(app_name="shop", user_id="ana", session_id="chat"))
    clock.set_time(clock.now + 1)
    ben = await run("ben", run.service.create_session(app_name="shop", user_id="ben", session_id="chat"))
    clock.set_time(clock.now + 1)
    blog = await run(
        "ana's blog",
        run.service.create_session(
            app_name="blog", user_id="ana", session_id="chat", state={"user:lang": "pt"}
        ),
    )
    await run("ben twice", run.service.create_session(app_name="shop", user_id="ben", session_id="chat"))
    await run("ana says", run.service.append_event(ana, user("hi, I'm ana", 1)))
    await run("ben says", run.service.append_event(ben, user("hi, I'm ben", 2)))
    await run("ben is answered", run.service.append_event(ben, answer("hello ben", 3)))
    await run("blog says", run.service.append_event(blog, user("olá", 4)))
    for app, user_id in (("shop", "ana"), ("shop", "ben"), ("blog", "ana"), ("shop", "carol")):
        await run(
            f"get {app} {user_id}",
            run.service.get_session(app_name=app, user_id=user_id, session_id="chat"),
        )
    await run("list shop", run.service.list_sessions(app_name="shop"))
    await run("list ben", run.service.list_sessions(app_name="shop", user_id="ben"))
    await run("delete ben's", run.service.delete_session(app_name="shop", user_id="ben", session_id="chat"))
    await run("ana's stays", run.service.get_session(app_name="shop", user_id="ana", session_id="chat"))
    await run("ben's gone", run.service.get_session(app_name="shop", user_id="ben", session_id="chat"))
    await run("list after", run.service.list_sessions(app_name="shop"))


async def recreated(run: Recorder, clock: Clock) -> None:
    """A session deleted and created again with its id is new and empty; the old objects are stale."""
    old = await run("create", run.service.create_session(app_name="a", user_id="u", session_id="d-1"))
    await run("old says", run.service.append_event(old, user("before", 1)))
    await run("delete", run.service.delete_session(app_name="a", user_id="u", session_id="d-1"))
    await run("old writes to nothing", run.service.append_event(old, answer("in flight", 2)))
    clock.set_time(clock.now + 10)
    new = await run(
        "create again",
        run.service.create_session(app_name="a", user_id="u", session_id="d-1", state={"round": 2}),
    )
    await run("read new", run.service.get_session(app_name="a", user_id="u", session_id="d-1"))
    await run("old writes to the new (stale)", run.service.append_event(old, answer("late", 3)))
    await run("new says", run.service.append_event(new, user("after", 4)))
    await run("read", run.service.get_session(app_name="a", user_id="u", session_id="d-1"))
    await run("taken", run.service.create_session(app_name="a", user_id="u", session_id="d-1"))
    await run("delete again", run.service.delete_session(app_name="a", user_id="u", session_id="d-1"))
    await run("third", run.service.create_session(app_name="a", user_id="u", session_id="d-1"))
    await run("list", run.service.list_sessions(app_name="a"))


async def _returned(session: Session) -> Session:
    return session


SCENARIOS: dict[str, Scenario] = {
    "conversation": conversation,
    "scopes": scopes,
    "reads": reads,
    "refusals": refusals,
    "keys": keys,
    "recreated": recreated,
}


def _run(service: Any, scenario: Scenario, clock: Clock) -> Record:
    clock.set_time(1_760_000_000.0)
    recorder = Recorder(service)
    asyncio.run(scenario(recorder, clock))
    return recorder.record


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_flowmem_session_service_answers_every_call_as_database_session_service_does(
    name: str, flowmem_service: Any, reference: Any, clock: Clock
) -> None:
    expected = _run(reference, SCENARIOS[name], clock)
    got = _run(flowmem_service, SCENARIOS[name], clock)
    assert [label for label, _ in got] == [label for label, _ in expected]
    for (label, mine), (_, theirs) in zip(got, expected, strict=True):
        assert mine == theirs, label
