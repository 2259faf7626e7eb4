"""A session read from the events kept beside its rows is the one its rows give (decision 0133).

SQLite and PostgreSQL keep each event as ADK's JSON (``adk_events``) while the events
buffer is only appended whole events; ``get_session`` reads them in one range read
(``GetSessionConfig`` applied in SQL) and one ``validate_json``. A buffer changed any
other way (a heal, a late result replacing a placeholder, another writer's row, events
stored before migration 22) is read from its rows, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.events import Event
from google.adk.sessions.base_session_service import GetSessionConfig

from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.adk.events import events_of
from flowmem.scope import ExecutionContext
from flowmem.store import open_store
from flowmem.store.adk import AdkKey
from tests.integrations.adk.events import answer, call, result, rich, state, user

APP = "app"


def _run(made: Any) -> Any:
    return asyncio.run(made)


def _dumped(events: list[Event]) -> list[str]:
    return [e.model_dump_json(exclude_none=True) for e in events]


def _fill(service: FlowmemSessionService, sid: str = "s1") -> Any:
    async def go() -> Any:
        session = await service.create_session(app_name=APP, user_id="ana", session_id=sid)
        for event in (user("hi", 1), call("c1", 2), result("c1", 3), state({"k": 1}, 4), rich(5), answer("done", 6)):
            await service.append_event(session, event)
        return session

    return _run(go())


def _read(service: FlowmemSessionService, sid: str = "s1", config: GetSessionConfig | None = None) -> Any:
    return _run(service.get_session(app_name=APP, user_id="ana", session_id=sid, config=config))


def _from_rows(service: FlowmemSessionService, sid: str = "s1") -> list[Event]:
    found = service.tables.read(AdkKey(APP, "ana", sid))
    assert found is not None
    return events_of(found[1])


@pytest.fixture
def service(flowmem_url: str) -> Any:
    made = FlowmemSessionService(flowmem_url)
    yield made
    _run(made.close())


def test_a_session_read_from_its_kept_events_is_the_one_its_rows_give(service: FlowmemSessionService) -> None:
    written = _fill(service)
    assert service.tables.read_kept(AdkKey(APP, "ana", "s1")) is not False  # read without the rows
    read = _read(service)
    assert _dumped(read.events) == _dumped(_from_rows(service)) == _dumped(written.events)
    assert read.state == written.state and read.last_update_time == written.last_update_time


@pytest.mark.parametrize(
    "config",
    [
        GetSessionConfig(num_recent_events=2),
        GetSessionConfig(num_recent_events=0),
        GetSessionConfig(num_recent_events=50),
        GetSessionConfig(after_timestamp=1),
        GetSessionConfig(after_timestamp=10_000_000_000),
        GetSessionConfig(num_recent_events=2, after_timestamp=1),
    ],
)
def test_get_session_config_is_applied_as_adk_applies_it(
    service: FlowmemSessionService, config: GetSessionConfig
) -> None:
    written = _fill(service)
    events = written.events
    if config.after_timestamp:
        events = [e for e in events if e.timestamp >= config.after_timestamp]
    if config.num_recent_events is not None:
        events = events[-config.num_recent_events :] if config.num_recent_events else []
    assert _dumped(_read(service, config=config).events) == _dumped(events)


def test_a_healed_session_is_read_from_its_rows(service: FlowmemSessionService) -> None:
    async def go() -> Any:
        session = await service.create_session(app_name=APP, user_id="ana", session_id="s1")
        for event in (user("hi", 1), call("c1", 2), user("go on", 3)):  # MEM-3 heals c1
            await service.append_event(session, event)
        return session

    written = _run(go())
    assert service.tables.read_kept(AdkKey(APP, "ana", "s1")) is False
    assert _dumped(_read(service).events) == _dumped(written.events) == _dumped(_from_rows(service))


def test_a_session_another_writer_appended_to_is_read_from_its_rows(service: FlowmemSessionService) -> None:
    written = _fill(service)
    sid = service.tables.read(AdkKey(APP, "ana", "s1"))[0].session.id  # type: ignore[index]
    service.memory.append("session", "adk", [{"role": "user", "content": "from the buffer API"}],
                          ExecutionContext(session_id=sid, user_id="ana"))
    assert service.tables.read_kept(AdkKey(APP, "ana", "s1")) is False
    assert _dumped(_read(service).events) == _dumped(written.events)


def test_a_session_stored_before_its_events_were_kept_reads_and_appends_from_its_rows(
    service: FlowmemSessionService, flowmem_url: str
) -> None:
    written = _fill(service)
    store = open_store(flowmem_url)
    try:
        with store.connection() as conn:  # type: ignore[attr-defined]  # as the migration left it
            conn.execute("DELETE FROM adk_events")
            conn.execute("UPDATE adk_sessions SET events_stamp = NULL, events_version = NULL")
    finally:
        store.close()
    assert service.tables.read_kept(AdkKey(APP, "ana", "s1")) is False
    session = _read(service)
    assert _dumped(session.events) == _dumped(written.events)
    later = answer("later", 9)
    _run(service.append_event(session, later))
    assert service.tables.read_kept(AdkKey(APP, "ana", "s1")) is False
    assert _dumped(_read(service).events) == _dumped([*written.events, later])


def test_deleting_a_session_deletes_its_kept_events(service: FlowmemSessionService, flowmem_url: str) -> None:
    _fill(service)
    _fill(service, "s2")
    _run(service.delete_session(app_name=APP, user_id="ana", session_id="s1"))
    store = open_store(flowmem_url)
    try:
        with store.connection() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SELECT COUNT(*) FROM adk_events").fetchone()[0] == 6
    finally:
        store.close()
    assert len(_read(service, "s2").events) == 6
