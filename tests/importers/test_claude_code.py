"""Reading Claude Code's transcript format (pure): entries, merged messages, skipped kinds, refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowmem.errors import TranscriptError
from flowmem.importers.claude_code import fresh_segments, parse_transcript, turn_rows
from tests.importers.helpers import DATA, SESSION, SKIPPED


def _jsonl(*entries: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in entries)


def _user(uuid: str, content: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "sessionId": "s1", "message": {"role": "user", "content": content}, **kw}


def _assistant(uuid: str, mid: str, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "uuid": uuid, "message": {"id": mid, "role": "assistant", "content": [block]}}


def test_the_fixture_reads_as_its_main_conversation_in_file_order() -> None:
    transcript = parse_transcript(DATA)
    assert transcript.session_id == SESSION
    assert transcript.lines == 27
    assert dict(transcript.skipped) == SKIPPED
    assert [e.uuid for e in transcript.entries][:4] == ["u-0001", "a-0001", "a-0002", "a-0003"]
    assert [len(s) for s in transcript.segments()] == [14, 7]
    assert transcript.segments()[1][0].compact is not None


def test_the_lines_of_one_assistant_message_make_one_row_in_their_order() -> None:
    data = _jsonl(
        _user("u1", "hi"),
        _assistant("a1", "m1", {"type": "text", "text": "one"}),
        _assistant("a2", "m1", {"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
        _assistant("a3", "m1", {"type": "text", "text": "after the call"}),
    )
    (_, rows, lines), = fresh_segments(parse_transcript(data), set())
    assert lines == 4 and len(rows) == 2
    assistant = rows[1]
    assert [p["text"] for p in assistant["content"]] == ["one", "after the call"]
    assert assistant["tool_calls"][0]["tool_call_id"] == "t1"
    assert assistant["extra"]["anthropic"]  # the order text, call, text is kept
    assert assistant["extra"]["claude_code"] == {"uuids": ["a1", "a2", "a3"], "message_id": "m1"}


def test_two_messages_in_a_row_with_other_ids_stay_two_rows() -> None:
    data = _jsonl(
        _assistant("a1", "m1", {"type": "text", "text": "one"}),
        _assistant("a2", "m2", {"type": "text", "text": "two"}),
    )
    (_, rows, _), = fresh_segments(parse_transcript(data), set())
    assert len(rows) == 2


def test_a_user_line_of_results_and_text_makes_a_row_for_each_all_marked_with_the_line() -> None:
    content = [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "no", "is_error": True},
        {"type": "text", "text": "and then"},
    ]
    entry = parse_transcript(_jsonl(_user("u1", content))).entries[0]
    rows = turn_rows([entry])
    assert [r["role"] for r in rows] == ["tool", "tool", "user"]
    assert rows[1]["is_error"] is True
    assert all(r["extra"]["claude_code"]["uuids"] == ["u1"] for r in rows)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"type": "summary", "summary": "title", "leafUuid": "x"}, "summary"),
        ({"type": "system", "subtype": "api_error", "uuid": "y"}, "system"),
        ({"type": "progress", "uuid": "p"}, "progress"),
        (_user("u9", "sub", isSidechain=True), "sidechain"),
        ({**_assistant("a9", "m9", {"type": "text", "text": "API Error: 529"}), "isApiErrorMessage": True}, "api_error"),
        (_user("u8", ""), "empty"),
    ],
)
def test_what_is_not_the_main_conversation_is_skipped_and_counted(entry: dict[str, Any], reason: str) -> None:
    transcript = parse_transcript(_jsonl(_user("u1", "hi"), entry))
    assert [e.uuid for e in transcript.entries] == ["u1"]
    assert dict(transcript.skipped) == {reason: 1}


def test_a_line_written_twice_is_read_once() -> None:
    transcript = parse_transcript(_jsonl(_user("u1", "hi"), _user("u1", "hi")))
    assert len(transcript.entries) == 1 and dict(transcript.skipped) == {"repeated": 1}


def test_blank_lines_and_a_last_line_without_its_newline_are_read() -> None:
    data = b"\n" + _jsonl(_user("u1", "hi")) + b"  \n" + json.dumps(_user("u2", "there")).encode()
    assert [e.uuid for e in parse_transcript(data).entries] == ["u1", "u2"]


def test_a_line_that_is_not_utf8_is_named() -> None:
    data = _jsonl(_user("u1", "hi")) + b'{"type": "user", "uuid": "\xff"}\n'
    with pytest.raises(TranscriptError, match=r"^line 2: not UTF-8 at byte 26") as refused:
        parse_transcript(data)
    assert refused.value.code == "invalid_transcript"


def test_a_lone_surrogate_is_named_by_its_line() -> None:
    data = _jsonl(_user("u1", "hi")) + b'{"type": "user", "uuid": "u2", "message": {"role": "user", "content": "\\ud800"}}\n'
    with pytest.raises(TranscriptError, match=r"^line 2: "):
        parse_transcript(data)


def test_a_bad_line_in_the_middle_is_not_called_truncated() -> None:
    data = _jsonl(_user("u1", "hi")) + b'{"type": \n' + _jsonl(_user("u2", "x"))
    with pytest.raises(TranscriptError, match=r"^line 2: not valid JSON"):
        parse_transcript(data)


def test_the_compaction_summary_carries_its_boundary() -> None:
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "b1",
        "logicalParentUuid": "u1",
        "compactMetadata": {"trigger": "auto", "preTokens": 155000},
    }
    data = _jsonl(_user("u1", "hi"), boundary, _user("c1", "Summary: hi was said", isCompactSummary=True))
    transcript = parse_transcript(data)
    summary = transcript.entries[1]
    assert summary.compact == {
        "boundary_line": 2,
        "boundary_uuid": "b1",
        "logical_parent_uuid": "u1",
        "metadata": {"trigger": "auto", "preTokens": 155000},
    }
    segments = fresh_segments(transcript, set())
    assert [(compacts, lines) for compacts, _, lines in segments] == [(False, 1), (True, 1)]
    assert fresh_segments(transcript, {"c1"}) == []  # the compaction stored: the history before it is not read again
