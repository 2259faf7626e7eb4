"""A history loaded again validates only its new messages; what a load gives is a fresh copy (decision 0141)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, TextPart

from flowmem.integrations.pydantic_ai.rows import message_json
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.integrations.pydantic_ai.validated import MAX_SEGMENTS, Validated
from tests.integrations.pydantic_ai import messages as m

_run = asyncio.run


@pytest.fixture
def validated_counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each ``validate_json`` of a history validated."""
    counts: list[int] = []
    validate = ModelMessagesTypeAdapter.validate_json

    def counted(data: Any, *args: Any, **kwargs: Any) -> Any:
        found = validate(data, *args, **kwargs)
        counts.append(len(found))
        return found

    monkeypatch.setattr(ModelMessagesTypeAdapter, "validate_json", counted)
    return counts


def _dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def test_a_history_loaded_again_validates_only_the_messages_added_since(
    durable_url: str, durable_store: FlowmemConversationStore, validated_counts: list[int]
) -> None:
    history = m.every_part_kind()
    _run(durable_store.save(Conversation(conversation_id="c1", messages=list(history))))
    expected = m.round_tripped(history)
    validated_counts.clear()
    first = _run(durable_store.load("c1"))
    assert validated_counts == [len(history)]
    assert first.messages == expected and _dumped(first.messages) == _dumped(expected)
    validated_counts.clear()
    again = _run(durable_store.load("c1"))
    assert validated_counts == []  # every message copied from what the first load validated
    assert again.messages == expected and _dumped(again.messages) == _dumped(expected)
    other = FlowmemConversationStore.from_url(durable_url)  # another writer: another process's store
    try:
        elsewhere = _run(other.load("c1"))
        added: list[ModelMessage] = [m.prompt("q"), m.call("k"), m.result("k"), m.answer("a", 3)]
        elsewhere.messages.extend(added)
        _run(other.save(elsewhere))
    finally:
        other.close()
    expected += m.round_tripped(added)
    validated_counts.clear()
    grown = _run(durable_store.load("c1"))
    assert validated_counts == [len(added)]  # only what the other writer added
    assert grown.messages == expected and _dumped(grown.messages) == _dumped(expected)


def test_messages_a_store_saved_are_not_validated_by_its_next_load(
    durable_store: FlowmemConversationStore, validated_counts: list[int]
) -> None:
    history = m.every_part_kind()
    _run(durable_store.save(Conversation(conversation_id="c1", messages=list(history))))
    loaded = _run(durable_store.load("c1"))
    added: list[ModelMessage] = [m.prompt("q"), m.call("k"), m.result("k"), m.answer("a", 3)]
    loaded.messages.extend(added)
    _run(durable_store.save(loaded))  # validates each message it keeps the lean JSON of (decision 0145)
    validated_counts.clear()
    grown = _run(durable_store.load("c1"))
    assert validated_counts == []  # what the save validated is copied
    expected = m.round_tripped(history) + m.round_tripped(added)
    assert grown.messages == expected and _dumped(grown.messages) == _dumped(expected)
    assert all(a is not b for a, b in zip(grown.messages, loaded.messages, strict=True))  # copies


def test_a_loaded_message_its_caller_changes_does_not_change_the_next_load(
    durable_store: FlowmemConversationStore,
) -> None:
    history: list[ModelMessage] = [m.prompt("hi"), m.answer("hello")]
    _run(durable_store.save(Conversation(conversation_id="c1", messages=list(history))))
    first = _run(durable_store.load("c1"))
    first.messages[1].parts[0].content = "changed by the caller"
    first.messages[1].parts.append(TextPart("and more"))
    again = _run(durable_store.load("c1"))
    assert again.messages == m.round_tripped(history)
    assert again.messages[1] is not first.messages[1]


def test_a_history_grown_past_the_segments_kept_still_loads_whole(
    durable_store: FlowmemConversationStore,
) -> None:
    history: list[ModelMessage] = [m.prompt("start")]
    _run(durable_store.save(Conversation(conversation_id="c1", messages=list(history))))
    for turn in range(MAX_SEGMENTS + 3):
        loaded = _run(durable_store.load("c1"))
        assert loaded.messages == m.round_tripped(history)
        added: list[ModelMessage] = [m.answer(f"a{turn}", 3 + turn), m.prompt(f"q{turn}", 4 + turn)]
        loaded.messages.extend(added)
        _run(durable_store.save(loaded))
        history += added
    assert _run(durable_store.load("c1")).messages == m.round_tripped(history)


def _chosen(messages: list[ModelMessage], prefix: str = "e") -> list[tuple[str, str]]:
    return [(f"{prefix}{i}", message_json(message)) for i, message in enumerate(messages)]


def test_messages_whose_kept_json_changed_are_validated_again(validated_counts: list[int]) -> None:
    validated = Validated()
    before: list[ModelMessage] = [m.prompt("hi"), m.answer("hello"), m.answer("bye")]
    after = [before[0], m.answer("hello, changed"), before[2]]  # same entry ids, another JSON
    chosen, changed, elsewhere = _chosen(before), _chosen(after), _chosen(after, "other")
    expected = m.round_tripped(after)
    assert validated.messages(chosen) == m.round_tripped(before)
    validated_counts.clear()
    assert validated.messages(changed) == expected
    assert validated_counts == [len(after)]  # the kept segment no longer matches: all again
    validated_counts.clear()
    assert validated.messages(elsewhere) == expected
    assert validated_counts == [len(after)]  # other entry ids: another history


def test_at_most_max_bytes_are_kept_the_least_recently_loaded_history_going_first(
    validated_counts: list[int],
) -> None:
    one = _chosen([m.prompt("one " * 50), m.answer("x")], "a")
    two = _chosen([m.prompt("two " * 50), m.answer("y")], "b")
    sizing = Validated()
    sizing.messages(one)
    validated = Validated(max_bytes=sizing.size + sizing.size // 2)  # room for one history
    validated.messages(one)
    validated.messages(two)
    assert 0 < validated.size <= validated.max_bytes
    validated_counts.clear()
    validated.messages(two)
    assert validated_counts == []  # kept
    validated.messages(one)
    assert validated_counts == [len(one)]  # dropped when two came
    tiny = Validated(max_bytes=10)
    tiny.messages(one)
    assert tiny.size == 0  # larger than the bound: not kept
