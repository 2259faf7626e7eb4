"""The lossless content model in the core (decision 0021): parts, is_error, extra, call kinds."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flowmem.core import (
    HEALED_CONTENT,
    UNTEXTABLE_KINDS,
    append,
    call_kind,
    check_sendable,
    is_empty,
    is_empty_content,
    is_parts,
    normalize,
    prepare,
    to_row,
)
from flowmem.errors import InvalidMessageError

Row = dict[str, Any]

IMAGE = {"type": "image", "data": "aGk=", "media_type": "image/png", "detail": "low"}
THINKING = {
    "type": "reasoning",
    "text": "let me look",
    "signature": "c2lnbmF0dXJl",
    "provider": "anthropic",
}
WEB = {"type": "provider", "provider": "responses", "block": {"type": "web_search_call", "id": "ws"}}


def user(content: Any = "u") -> Row:
    return {"role": "user", "content": content}


def call(cid: str, kind: str | None = None, **more: Any) -> Row:
    entry: Row = {"tool_call_id": cid, "name": "f", "args": {}}
    if kind is not None:
        entry["kind"] = kind
    entry.update(more)
    return entry


def asst(*calls: Row, content: Any = "") -> Row:
    row: Row = {"role": "assistant", "content": content}
    if calls:
        row["tool_calls"] = list(calls)
    return row


def tool(cid: str, content: Any = "r", **more: Any) -> Row:
    return {"role": "tool", "content": content, "tool_call_id": cid, **more}


def healed(cid: str) -> Row:
    return {
        "role": "tool",
        "content": HEALED_CONTENT,
        "metadata": {"tool_call_id": cid, "healed": True},
    }


# --- rows keep parts -------------------------------------------------------------------------


def test_to_row_keeps_a_list_of_parts_as_a_list() -> None:
    parts = [{"type": "text", "text": "look"}, IMAGE]
    row = to_row(user(parts))
    assert row["content"] == parts
    assert row["content"] is not parts and row["content"][1] is not IMAGE


def test_to_row_keeps_a_string_a_string_and_a_one_text_part_list_a_list() -> None:
    assert to_row(user("hi"))["content"] == "hi"
    assert to_row(user([{"type": "text", "text": "hi"}]))["content"] == [
        {"type": "text", "text": "hi"}
    ]


@pytest.mark.parametrize(
    "content",
    [[{"text": "no type"}], [{"type": 3}], [{"type": "text", "text": "a"}, "junk"], [IMAGE, 5]],
    ids=repr,
)
def test_to_row_refuses_parts_that_are_not_objects_with_a_string_type(content: Any) -> None:
    with pytest.raises(InvalidMessageError):
        to_row(user(content))


def test_a_refused_part_list_changes_nothing() -> None:
    buffer = [to_row(user("kept"))]
    with pytest.raises(InvalidMessageError):
        append(buffer, [user([IMAGE]), user([{"no": "type"}])])
    assert buffer == [to_row(user("kept"))]


@pytest.mark.parametrize(("content", "text"), [([1], "[1]"), (["a", 2], '["a", 2]')], ids=repr)
def test_a_list_holding_no_object_is_still_serialized_to_text(content: Any, text: str) -> None:
    assert to_row(user(content))["content"] == text


def test_is_error_and_extra_are_kept_under_metadata() -> None:
    extra = {"anthropic": {"cache_control": {"type": "ephemeral"}}}
    row = to_row(tool("c1", [IMAGE], is_error=True, extra=extra))
    assert row["metadata"] == {"tool_call_id": "c1", "is_error": True, "extra": extra}
    assert row["content"] == [IMAGE]


def test_call_entries_keep_kind_and_extra() -> None:
    entry = call("c1", "computer", extra={"responses": {"id": "cu_1", "status": "completed"}})
    row = to_row(asst(entry))
    assert row["metadata"]["tool_calls"] == [entry]
    assert call_kind(row["metadata"]["tool_calls"][0]) == "computer"


@pytest.mark.parametrize(("entry", "kind"), [({}, "function"), ({"kind": ""}, "function"),
                                             ({"kind": 3}, "function"), ({"kind": "custom"}, "custom")])
def test_call_kind_defaults_to_function(entry: Row, kind: str) -> None:
    assert call_kind(entry) == kind


def test_is_parts_reads_the_shape() -> None:
    assert is_parts([]) and is_parts([IMAGE])
    assert not is_parts("x") and not is_parts([1]) and not is_parts([{"text": "a"}])


# --- the empty-content rule counts parts ----------------------------------------------------


def test_a_message_whose_only_part_is_an_image_is_not_empty() -> None:
    result = append([], user([IMAGE]))
    assert result.appended == 1
    assert result.messages[0]["content"] == [IMAGE]


def test_an_empty_part_list_is_empty_content() -> None:
    assert is_empty_content([]) and is_empty_content("") and is_empty_content(None)
    assert not is_empty_content([IMAGE])
    assert is_empty(prepare(user([]))[0])
    assert append([], user([])).appended == 0


def test_an_assistant_turn_with_calls_and_an_empty_part_list_is_appended() -> None:
    result = append([], asst(call("c1"), content=[]))
    assert result.appended == 1


# --- normalize(keep_content=True) -----------------------------------------------------------


def test_default_normalize_still_serializes_parts_to_text() -> None:
    result = normalize([user([IMAGE])])
    assert result.messages == [{"role": "user", "content": '[{"type": "image", "data": "aGk=", '
                                '"media_type": "image/png", "detail": "low"}]'}]


def test_keep_content_keeps_parts_is_error_extra_and_call_kinds() -> None:
    extra = {"openai": {"name": "bob"}}
    entry = call("c1", "custom", extra={"responses": {"id": "ctc_1"}})
    history = [
        {"role": "user", "content": [IMAGE], "metadata": {"extra": extra}},
        asst(entry, content=[THINKING, WEB]),
        {
            "role": "tool",
            "content": [{"type": "text", "text": "boom"}],
            "metadata": {"tool_call_id": "c1", "is_error": True},
        },
    ]
    result = normalize(history, keep_content=True)
    assert result.dropped == 0
    assert result.messages == [
        {"role": "user", "content": [IMAGE], "extra": extra},
        {"role": "assistant", "content": [THINKING, WEB], "tool_calls": [entry]},
        {
            "role": "tool",
            "content": [{"type": "text", "text": "boom"}],
            "tool_call_id": "c1",
            "is_error": True,
        },
    ]
    assert check_sendable(result.messages) == []


def test_keep_content_reads_top_level_fields_before_metadata() -> None:
    row = tool("c1", "r", is_error=False, extra={"a": {}}, metadata={"is_error": True})
    result = normalize([asst(call("c1")), row], keep_content=True)
    assert result.messages[1] == {
        "role": "tool",
        "content": "r",
        "tool_call_id": "c1",
        "is_error": False,
        "extra": {"a": {}},
    }


def test_keep_content_ignores_is_error_that_is_not_a_bool_and_extra_that_is_not_a_map() -> None:
    history = [asst(call("c1")), tool("c1", is_error="yes", extra=["x"])]
    assert normalize(history, keep_content=True).messages[1] == tool("c1")


def test_keep_content_serializes_content_that_is_not_parts_like_the_default() -> None:
    history = [user({"k": 1}), user([1]), user([{"no": "type"}]), user(None)]
    assert normalize(history, keep_content=True) == normalize(history)


def test_keep_content_heals_text_kinds_in_their_turn() -> None:
    history = [asst(call("c1", "custom"), call("c2", "apply_patch"), content=[THINKING]), user()]
    result = normalize(history, keep_content=True)
    assert [m.get("tool_call_id") for m in result.messages] == [None, "c1", "c2", None]
    assert result.messages[1]["content"] == HEALED_CONTENT
    assert result.dropped == 0


@pytest.mark.parametrize("kind", sorted(UNTEXTABLE_KINDS))
def test_keep_content_removes_an_unanswered_untextable_call(kind: str) -> None:
    history = [user(), asst(call("c1"), call("c2", kind), content=[THINKING]), user("next")]
    result = normalize(history, keep_content=True)
    assert result.messages == [
        user(),
        {"role": "assistant", "content": [THINKING], "tool_calls": [call("c1")]},
        {"role": "tool", "content": HEALED_CONTENT, "tool_call_id": "c1"},
        user("next"),
    ]
    assert result.dropped == 1
    assert check_sendable(result.messages) == []


def test_keep_content_removes_an_untextable_call_with_its_healed_placeholder() -> None:
    history = [user(), asst(call("c1", "computer")), healed("c1"), user("next")]
    result = normalize(history, keep_content=True)
    # the call, its placeholder and the turn left with nothing are all counted
    assert result.messages == [user(), user("next")]
    assert result.dropped == 3


def test_keep_content_keeps_an_untextable_call_with_a_real_result() -> None:
    shot = [{"type": "image", "data": "c2hvdA==", "media_type": "image/png"}]
    history = [asst(call("c1", "computer")), tool("c1", shot)]
    result = normalize(history, keep_content=True)
    assert result.messages == [asst(call("c1", "computer")), tool("c1", shot)]
    assert result.dropped == 0


def test_keep_content_lets_a_late_real_result_answer_after_a_dropped_placeholder() -> None:
    history = [asst(call("c1", "computer")), healed("c1"), user(), tool("c1", "real")]
    result = normalize(history, keep_content=True)
    assert result.messages == [asst(call("c1", "computer")), tool("c1", "real"), user()]
    assert result.dropped == 1


def test_keep_content_keeps_a_turn_whose_only_content_is_reasoning() -> None:
    history = [user(), asst(call("c1", "mcp_approval"), content=[THINKING]), user()]
    result = normalize(history, keep_content=True)
    assert result.messages[1] == {"role": "assistant", "content": [THINKING]}


def test_keep_content_drops_a_turn_with_an_empty_part_list_and_no_call() -> None:
    result = normalize([user(), asst(content=[])], keep_content=True)
    assert result.messages == [user()] and result.dropped == 1


def test_keep_content_is_idempotent_and_never_mutates_its_input() -> None:
    history = [
        {"role": "system", "content": [{"type": "text", "text": "s"}]},
        user([IMAGE]),
        asst(call("c1", "computer"), call("c2"), content=[THINKING]),
        healed("c1"),
        user(),
    ]
    before = copy.deepcopy(history)
    once = normalize(history, keep_content=True)
    assert history == before
    twice = normalize(once.messages, keep_content=True)
    assert twice.messages == once.messages and twice.dropped == 0


# --- check_sendable -------------------------------------------------------------------------


def test_check_sendable_accepts_parts() -> None:
    history = [user([IMAGE]), asst(call("c1"), content=[THINKING]), tool("c1", [IMAGE])]
    assert check_sendable(history) == []


@pytest.mark.parametrize("kind", sorted(UNTEXTABLE_KINDS))
def test_check_sendable_reports_an_untextable_call_answered_by_a_placeholder(kind: str) -> None:
    violations = check_sendable([user(), asst(call("c1", kind)), healed("c1")])
    assert [(v.index, v.code) for v in violations] == [(1, "unanswered_call")]
    assert kind in violations[0].message


def test_check_sendable_reports_an_unanswered_untextable_call() -> None:
    violations = check_sendable([user(), asst(call("c1", "computer")), user()])
    assert [(v.index, v.code) for v in violations] == [(1, "unanswered_call")]


def test_check_sendable_accepts_a_placeholder_for_a_text_kind() -> None:
    assert check_sendable([user(), asst(call("c1", "custom")), healed("c1")]) == []
