"""A message a save stores is serialized once, and gives what the plain way gives (decision 0145)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.usage import RequestUsage

from flowmem.integrations.pydantic_ai import dumps
from flowmem.integrations.pydantic_ai.dumps import message_dumps
from flowmem.integrations.pydantic_ai.rows import _dump, message_json
from tests.integrations.pydantic_ai import messages as m

T = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


def _messages() -> list[ModelMessage]:
    """Every part kind, a turn, and None where a message's own data holds it (kept by the plain way)."""
    return [
        *m.every_part_kind(),
        m.prompt("q"), m.call("k1", "k2"), m.result("k1", "k2"), m.answer("a"),
        ModelResponse(parts=[ToolCallPart("t", {"x": None, "y": [None, {"z": None}]}, tool_call_id="c")], timestamp=T),
        ModelRequest(parts=[ToolReturnPart("t", {"v": None}, tool_call_id="c", timestamp=T, metadata={"m": None})]),
        ModelResponse(parts=[TextPart("é ☃ \u2028 \"quoted\" \\ 1e400")], usage=RequestUsage(details={"a": 1}), timestamp=T),
        ModelRequest(parts=[], instructions="", timestamp=T),
    ]


@pytest.mark.parametrize("index", range(len(_messages())))
def test_one_dump_gives_the_rows_dict_and_the_kept_json_of_the_plain_way(index: int) -> None:
    message = _messages()[index]
    dumped, text, _ = message_dumps(message)
    assert dumped == _dump(message)
    assert text == message_json(message)  # the very text the plain way keeps


def test_a_none_in_a_messages_own_data_is_kept_as_the_plain_way_keeps_it() -> None:
    message = ModelResponse(parts=[ToolCallPart("t", {"x": None}, tool_call_id="c")], timestamp=T)
    _, text, _ = message_dumps(message)
    assert '"args":{"x":null}' in text and text == message_json(message)


def test_json_that_does_not_read_back_is_kept_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    message = m.answer("a")
    monkeypatch.setattr(dumps, "_read_back", lambda text, dumped: None)
    _, text, _ = message_dumps(message)
    assert '"provider_name":null' in text  # whole: its None fields kept
    monkeypatch.undo()
    assert message_json(message) != text  # where it reads back, the plain way keeps the lean one


@pytest.mark.parametrize("index", range(len(_messages())))
def test_the_message_given_back_is_what_the_kept_json_validates_to(index: int) -> None:
    message = _messages()[index]
    _, text, read = message_dumps(message)
    if read is None:  # only when it is kept whole, as dumped (nothing was validated)
        assert text == ModelMessagesTypeAdapter.dump_json([message])[1:-1].decode()
        return
    again = ModelMessagesTypeAdapter.validate_json(f"[{text}]")
    assert read is not message and read == again[0]
    assert ModelMessagesTypeAdapter.dump_json([read]) == ModelMessagesTypeAdapter.dump_json(again)
