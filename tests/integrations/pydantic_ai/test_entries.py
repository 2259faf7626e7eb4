"""A load's entries are made without ConversationEntry's frozen __init__, equal to the ones it makes (decision 0145)."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic_ai.conversation_store import ConversationEntry

from flowmem.integrations.pydantic_ai import entries
from flowmem.integrations.pydantic_ai.entries import entry
from tests.integrations.pydantic_ai import messages as m


@pytest.mark.parametrize("plain", [False, True])
def test_an_entry_equals_the_one_conversation_entry_makes_field_by_field(
    plain: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entries, "PLAIN", plain)
    message = m.answer("a")
    for parent in (None, "e0"):
        made = entry("e1", parent, message)
        expected = ConversationEntry(id="e1", parent_id=parent, message=message)
        assert type(made) is ConversationEntry and made == expected
        assert vars(made) == vars(expected) and made.message is message
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.id = "other"  # type: ignore[misc]


def test_the_fast_way_is_taken_only_for_the_shape_it_was_written_for() -> None:
    fields = tuple(field.name for field in dataclasses.fields(ConversationEntry))
    assert entries.PLAIN is (fields != ("id", "parent_id", "message", "kind"))
