"""Issue 36 for ADK: sessions keyed by app, user and id (decision 0100), on a database from
before that decision too, and two writers that can never split a call from its answer.

The writers' case is the one the issue found (``fc-B-2`` followed by ``A-5-a``): a session
object that did not come from this service (ADK's web API and any JSON round trip drop
its storage marker) was checked by time, and an event's time is when it was made, not
stored; B's call made before A's latest event but stored after it passed as seen, and A's
next event landed between B's call and its answer. ADK's ``DatabaseSessionService``
checks by time the same way and lets it through: the test shows both.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.adk.sessions import DatabaseSessionService, Session

from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.adk.service import FRESH
from flowmem.store import open_store
from flowmem.store.adk import EVENTS_KEY
from flowmem.store.adk import sqlite as adk_sqlite
from flowmem.store.sqlite.schema import MIGRATIONS
from tests.integrations.adk.events import answer, call, result, user
from tests.store.undo_call_ids import undo_call_ids
from tests.store.undo_kept import undo_kept
from tests.store.undo_listed import undo_listed_calls

APP = "shop"


def _texts(session: Session | None) -> list[str]:
    assert session is not None
    return [str(p.text or p.function_call or p.function_response) for e in session.events for p in (e.content.parts if e.content else [])]


def _undo_keys(url: str) -> None:
    """Make the database what a flowmem before decision 0100 left: no ADK id column, no key index.

    The migrations after it go first (the repair log's, issue 37 §2).
    """
    keyed = MIGRATIONS.index(adk_sqlite.KEYED) + 1
    statements = (
        "DROP TABLE buffer_repairs",
        *(() if url.startswith("sqlite") else ("DROP FUNCTION flowmem_repairs_usage()",)),
        "DROP INDEX adk_sessions_key",
        "ALTER TABLE adk_sessions DROP COLUMN adk_id",
        f"DELETE FROM flowmem_schema WHERE version >= {keyed}",
    )
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            undo_kept(conn, sqlite=True)  # the kept JSON (decisions 0131, 0133) first
            undo_listed_calls(conn)  # then SQLite's migration 23 (decision 0137)
            for statement in statements:
                conn.execute(statement)
        return
    import psycopg

    with psycopg.connect(url) as conn:
        undo_call_ids(conn)  # PostgreSQL's migration 28 (decision 0159) first
        undo_kept(conn, sqlite=False)
        for statement in statements:
            conn.execute(statement)


def test_sessions_stored_before_the_keys_load_after_the_upgrade_and_one_id_becomes_two_sessions(
    flowmem_url: str,
) -> None:
    async def before() -> None:
        async with FlowmemSessionService(flowmem_url) as service:
            chat = await service.create_session(
                app_name=APP, user_id="ana", session_id="chat", state={"user:lang": "pt"}
            )
            for event in (user("hi", 1), call("c1", 2), result("c1", 3), answer("done", 4)):
                await service.append_event(chat, event)

    asyncio.run(before())
    store = open_store(flowmem_url)
    version = store.schema_version()  # type: ignore[attr-defined]
    store.close()
    _undo_keys(flowmem_url)

    async def after() -> tuple[Session | None, Session, Session | None, Any]:
        async with FlowmemSessionService(flowmem_url) as service:
            kept = await service.get_session(app_name=APP, user_id="ana", session_id="chat")
            ben = await service.create_session(app_name=APP, user_id="ben", session_id="chat")
            await service.append_event(ben, user("ben here", 5))
            again = await service.get_session(app_name=APP, user_id="ana", session_id="chat")
            listed = await service.list_sessions(app_name=APP)
            return kept, ben, again, listed

    kept, ben, again, listed = asyncio.run(after())
    assert (ben.id, ben.user_id, [e.id for e in ben.events]) == ("chat", "ben", ["e5"])
    assert kept is not None and kept.state == {"user:lang": "pt"}
    assert [e.id for e in kept.events] == ["e1", "e2", "e3", "e4"]
    assert _texts(again) == _texts(kept)
    assert [(s.id, s.user_id) for s in listed.sessions] == [("chat", "ana"), ("chat", "ben")]
    store = open_store(flowmem_url)
    try:
        assert store.schema_version() == version  # type: ignore[attr-defined]
        assert store.get_session("chat").owner == "ana"  # type: ignore[union-attr]
        (bens,), _ = store.list_sessions("ben", False, 10, 0)
        assert bens.id.startswith(FRESH)
        assert [m["content"] for m in store.load(("session", bens.id, EVENTS_KEY))] == ["ben here"]
    finally:
        store.close()


def _as_json(session: Session) -> Session:
    """The session as a process that got it as JSON holds it (no storage marker)."""
    return Session.model_validate(session.model_dump(mode="json"))


async def _interleave(a_service: Any, b_service: Any) -> tuple[list[str], str]:
    """A and B write one session; B's call is made before A's latest event and stored after it.

    Returns the stored event ids and what A's next append did.
    """
    made = await a_service.create_session(app_name=APP, user_id="ana", session_id="two")
    a = _as_json(made)
    await a_service.append_event(a, user("A asks", 5))
    a = _as_json(a)  # A holds its session as JSON again (its last update: A-5's time)
    b = _as_json(
        await b_service.get_session(app_name=APP, user_id="ana", session_id="two")  # B sees A-5
    )
    await b_service.append_event(b, call("fc-B-2", 4))  # made at 4, stored after A-5
    try:
        await a_service.append_event(a, answer("A goes on", 6))  # A-5-a: A never saw B's call
        outcome = "stored"
    except StaleSessionError:
        outcome = "stale"
    stored = await a_service.get_session(app_name=APP, user_id="ana", session_id="two")
    return [e.id for e in stored.events], outcome


def test_mem_12_a_writer_that_has_not_seen_another_writers_call_never_lands_between_it_and_its_answer(
    flowmem_url: str, tmp_path: Any
) -> None:
    async def flowmem() -> tuple[list[str], str]:
        async with FlowmemSessionService(flowmem_url) as a, FlowmemSessionService(flowmem_url) as b:
            return await _interleave(a, b)

    async def adk() -> tuple[list[str], str]:
        url = f"sqlite+aiosqlite:///{tmp_path}/adk.db"
        async with DatabaseSessionService(url) as a, DatabaseSessionService(url) as b:
            return await _interleave(a, b)

    assert asyncio.run(flowmem()) == (["e5", "e4"], "stale")
    # ADK's own database checks by time: B's call is older than A's event, so A's next
    # event is stored after the call, before its answer (ADK reads events back by time)
    assert asyncio.run(adk()) == (["e4", "e5", "e6"], "stored")


def test_a_marker_less_session_object_that_holds_the_latest_event_still_writes(
    flowmem_url: str,
) -> None:
    async def go() -> list[str]:
        async with FlowmemSessionService(flowmem_url) as service:
            made = await service.create_session(app_name=APP, user_id="ana", session_id="one")
            own = _as_json(made)
            for event in (user("q", 1), call("c1", 2), result("c1", 3)):
                await service.append_event(own, event)
            late: Event = answer("a", 4)
            await service.append_event(_as_json(own), late)
            stored = await service.get_session(app_name=APP, user_id="ana", session_id="one")
            return [e.id for e in stored.events]

    assert asyncio.run(go()) == ["e1", "e2", "e3", "e4"]


def test_a_runner_in_flight_when_its_session_is_deleted_and_created_again_never_writes_to_the_new_one(
    flowmem_url: str,
) -> None:
    """DESIGN.md §5: an explicit create after a delete makes a new, empty session that no
    write of the old one reaches, not even the answer of a tool that was running."""
    from google.adk.runners import Runner

    from tests.integrations.adk.scripted import ScriptedLlm, agent, asks_tool, message, says

    async def go() -> tuple[str, list[str], list[str]]:
        async with FlowmemSessionService(flowmem_url) as service, FlowmemSessionService(flowmem_url) as admin:
            await service.create_session(app_name=APP, user_id="ana", session_id="live")

            async def lookup(query: str) -> dict[str, str]:
                """Look a product up, while an admin deletes the session and a client creates it again."""
                await admin.delete_session(app_name=APP, user_id="ana", session_id="live")
                await admin.create_session(app_name=APP, user_id="ana", session_id="live")
                return {"found": query}

            built = agent(ScriptedLlm(script=[asks_tool("shoes"), says("two pairs")]))
            built.tools = [lookup]
            runner = Runner(app_name=APP, agent=built, session_service=service)
            seen: list[str] = []
            try:
                async for event in runner.run_async(
                    user_id="ana", session_id="live", new_message=message("find shoes")
                ):
                    seen.extend(p.function_response.name for p in event.get_function_responses())
                outcome = "finished"
            except StaleSessionError:
                outcome = "stale"
            new = await admin.get_session(app_name=APP, user_id="ana", session_id="live")
            assert new is not None
            return outcome, seen, [e.id for e in new.events]

    outcome, answered, new_events = asyncio.run(go())
    assert outcome == "stale"
    assert answered == []  # the tool's answer was never acknowledged as stored
    assert new_events == []
