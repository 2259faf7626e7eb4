"""A whole session's events validated once, copied on the next read (issue 42 §4, decision 0155).

``get_session`` of a session kept as JSON (decision 0133) validated every event on
every read, though a read after a turn finds only that turn's events new. The
service keeps what it validated of whole sessions in ``integrations.copies.KeptCopies``:
a read unpickles the events whose JSON texts, position by position, are exactly the
ones read now and validates only the rest, so a session another writer changed
(healed, rewritten) is validated again where it changed. Reads of the most recent
events or of those after a time are validated as they are read.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events import Event

from flowmem.integrations.adk.events import events_of_json
from flowmem.integrations.copies import KeptCopies
from flowmem.store.adk import AdkKey


def kept_events() -> KeptCopies[Event]:
    """An empty keeper of whole sessions' events, validated with ADK's ``list[Event]`` adapter."""
    return KeptCopies(events_of_json)


def whole_session(copies: KeptCopies[Event], key: AdkKey, texts: Sequence[str]) -> list[Event]:
    """The events of a whole session read as JSON texts (oldest first): copied where kept, else validated."""
    base = "\x1f".join(key)  # app, user and session ids: no two sessions share an event's key
    return copies.objects([(f"{base}#{position}", text) for position, text in enumerate(texts)])


__all__ = ["kept_events", "whole_session"]
