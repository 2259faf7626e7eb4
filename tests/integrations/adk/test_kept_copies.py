"""A whole session read again validates only the events new since (issue 42 §4, decision 0155).

``get_session`` of a whole session copies the events it validated before (pickled,
``integrations.copies.KeptCopies``) whose JSON texts are exactly the ones read now, and
validates the rest: what it hands out equals one ``validate_json`` of every text (the
plain way), and is a fresh copy on every read.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.events import Event
from google.adk.sessions.base_session_service import GetSessionConfig

from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.adk import events as adk_events
from flowmem.integrations.adk.events import events_of_json
from flowmem.store.adk import AdkKey
from tests.integrations.adk.events import answer, call, result, rich, state, user

APP = "app"


def _run(made: Any) -> Any:
    return asyncio.run(made)


def _dumped(events: list[Event]) -> list[str]:
    return [e.model_dump_json() for e in events]


class _Counted:
    """``EVENTS`` with a count of the events each ``validate_json`` validated."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.counts: list[int] = []

    def validate_json(self, data: Any) -> Any:
        found = self.adapter.validate_json(data)
        self.counts.append(len(found))
        return found


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _Counted:
    """Every validation of kept events counted."""
    made = _Counted(adk_events.EVENTS)
    monkeypatch.setattr(adk_events, "EVENTS", made)
    return made


@pytest.fixture
def service(flowmem_url: str) -> Any:
    made = FlowmemSessionService(flowmem_url)
    yield made
    _run(made.close())


def _append(service: FlowmemSessionService, events: list[Event], sid: str = "s1") -> None:
    async def go() -> None:
        session = await service.get_session(app_name=APP, user_id="ana", session_id=sid)
        if session is None:
            session = await service.create_session(app_name=APP, user_id="ana", session_id=sid)
        for event in events:
            await service.append_event(session, event)

    _run(go())


def _read(service: FlowmemSessionService, config: GetSessionConfig | None = None) -> Any:
    return _run(service.get_session(app_name=APP, user_id="ana", session_id="s1", config=config))


def _plain(service: FlowmemSessionService) -> list[Event]:
    """The plain way: one validation of every kept text."""
    kept = service.tables.read_kept(AdkKey(APP, "ana", "s1"))
    assert kept is not None and kept is not False
    return events_of_json(kept[1])


def test_a_whole_session_read_again_validates_only_its_new_events(
    service: FlowmemSessionService, counted: _Counted
) -> None:
    _append(service, [user("hi", 1), call("c1", 2), result("c1", 3), state({"k": 1}, 4)])
    counted.counts.clear()
    first = _read(service)
    assert counted.counts == [4]
    again = _read(service)
    assert counted.counts == [4]  # every event copied from what the first read validated
    assert _dumped(again.events) == _dumped(first.events) == _dumped(_plain(service))
    _append(service, [rich(5), answer("done", 6)])
    counted.counts.clear()
    grown = _read(service)
    assert counted.counts[-1] == 2  # the two new events only (the append's own read counted before)
    assert _dumped(grown.events) == _dumped(_plain(service))
    assert [e.id for e in grown.events][:4] == [e.id for e in first.events]


def test_what_a_read_hands_out_is_a_fresh_copy(service: FlowmemSessionService) -> None:
    _append(service, [user("hi", 1), answer("hello", 2)])
    first = _read(service)
    expected = _dumped(first.events)
    first.events[0].author = "changed by the caller"
    first.events[1].content.parts[0].text = "also changed"
    again = _read(service)
    assert _dumped(again.events) == expected
    assert again.events[0] is not first.events[0]


def test_a_session_another_writer_appended_to_reads_its_events_too(
    service: FlowmemSessionService, flowmem_url: str
) -> None:
    _append(service, [user("hi", 1), answer("hello", 2)])
    _read(service)  # kept
    other = FlowmemSessionService(flowmem_url)  # another process's service
    try:
        _append(other, [user("more", 3), answer("again", 4)])
    finally:
        _run(other.close())
    read = _read(service)
    assert [e.content.parts[0].text for e in read.events] == ["hi", "hello", "more", "again"]


def test_reads_of_the_recent_events_are_validated_as_read(
    service: FlowmemSessionService, counted: _Counted
) -> None:
    _append(service, [user("hi", 1), answer("hello", 2), user("more", 3)])
    _read(service)
    counted.counts.clear()
    recent = _read(service, GetSessionConfig(num_recent_events=2))
    assert counted.counts == [2]
    assert [e.content.parts[0].text for e in recent.events] == ["hello", "more"]
