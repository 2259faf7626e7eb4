"""Gemini round trips (hypothesis): the identity within the format, valid google-genai output always."""

from __future__ import annotations

import json
from typing import Any

from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import check_sendable, normalize
from flowmem.errors import InvalidInputError
from flowmem.formats import (
    FORMATS,
    from_anthropic,
    from_gemini,
    from_openai,
    from_responses,
    read_document,
    read_payload,
    to_anthropic,
    to_gemini,
    to_openai,
    to_responses,
    write_document,
)
from flowmem.formats.gemini_parts import DATA_FIELDS, PART_FIELDS
from tests.formats import members as M
from tests.formats.gemini_members import PART_BUILDERS, gemini_histories
from tests.formats.sdk import assert_document, assert_gemini
from tests.formats.strategies import histories, messy_histories
from tests.formats.test_roundtrip import as_text, emptied, merged

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_part_fields_flowmem_knows_are_the_sdk_part_fields() -> None:
    """Fails when google-genai adds a ``Part`` field until the format (and the generators) know it.

    The installed SDK may be older than the newest flowmem knows (google-adk holds
    google-genai below 3, which has no ``audio_metadata`` / ``document_metadata``): every
    field it has must be known.
    """
    assert set(types.Part.model_fields) <= PART_FIELDS
    assert DATA_FIELDS - {"function_call", "function_response"} <= set(PART_BUILDERS)


@PROPS
@given(gemini_histories())
def test_gemini_round_trip_is_the_identity(history: tuple[Any, list[dict[str, Any]]]) -> None:
    system, contents = history
    assert_gemini(system, contents)
    rows = from_gemini(system, contents)
    assert check_sendable(rows) == []
    assert to_gemini(rows) == (system, contents)


@PROPS
@given(gemini_histories())
def test_mem_5_gemini_rows_stored_through_json_read_back_the_same(history: tuple[Any, list[dict[str, Any]]]) -> None:
    """The rows survive JSON (the store) and normalization unchanged, so a stored history reads back as sent."""
    system, contents = history
    rows = from_gemini(system, contents)
    stored = json.loads(json.dumps(rows))
    assert normalize(stored, keep_content=True).messages == rows
    assert to_gemini(stored) == (system, contents)


@PROPS
@given(gemini_histories(camel=False))
def test_null_fields_read_as_absent_as_the_sdk_reads_them(history: tuple[Any, list[dict[str, Any]]]) -> None:
    system, contents = history
    dumped = [types.Content.model_validate(c).model_dump(mode="json") for c in contents]  # every unset field null
    assert to_gemini(from_gemini(system, dumped))[1] == to_gemini(from_gemini(system, contents))[1]
    assert [r.get("tool_calls") for r in from_gemini(system, dumped)] == [
        r.get("tool_calls") for r in from_gemini(system, contents)
    ]  # the same derived ids too


@PROPS
@given(gemini_histories())
def test_gemini_histories_convert_to_every_format(history: tuple[Any, list[dict[str, Any]]]) -> None:
    system, contents = history
    rows = from_gemini(system, contents)
    for target in FORMATS:
        dropped: dict[str, int] = {}
        written = write_document(target, rows, dropped)
        assert_document(target, written)
        assert check_sendable(read_document(target, written)) == []
        assert all(count > 0 for count in dropped.values())
        if target == "gemini":
            assert dropped == {}


@PROPS
@given(histories(carrier="anthropic"))
def test_mem_5_gemini_round_trip_equals_normalized_history(history: list[dict[str, Any]]) -> None:
    system, contents = to_gemini(history)
    assert_gemini(system, contents)
    back = from_gemini(system, contents)
    # as for Anthropic: rows of one side in a row share a content, and read back as one
    assert as_text(back) == merged(normalize(history).messages)
    assert check_sendable(back) == []


@PROPS
@given(messy_histories())
def test_mem_5_any_history_becomes_valid_sendable_gemini(history: list[Any]) -> None:
    """Whatever a caller hands ``to_gemini`` (bad ids, orphans, odd content), the output is valid."""
    system, contents = to_gemini(history)
    assert_gemini(system, contents)
    back = from_gemini(system, contents)
    assert check_sendable(back) == []
    assert to_gemini(back) == (system, contents)  # a fixed point after one pass


@PROPS
@given(M.chat_histories())
def test_openai_histories_become_valid_gemini(history: list[dict[str, Any]]) -> None:
    dropped: dict[str, int] = {}
    system, contents = to_gemini(from_openai(history), dropped)
    assert_gemini(system, contents)
    assert check_sendable(from_gemini(system, contents)) == []


@PROPS
@given(M.responses_histories())
def test_responses_histories_become_valid_gemini(history: list[dict[str, Any]]) -> None:
    system, contents = to_gemini(from_responses(history))
    assert_gemini(system, contents)
    assert check_sendable(from_gemini(system, contents)) == []


@PROPS
@given(M.anthropic_histories())
def test_anthropic_histories_become_valid_gemini(body: dict[str, Any]) -> None:
    system, contents = to_gemini(from_anthropic(body.get("system"), body["messages"]))
    assert_gemini(system, contents)
    assert check_sendable(from_gemini(system, contents)) == []


@PROPS
@given(gemini_histories())
def test_the_other_formats_are_stable_after_one_pass_from_gemini(history: tuple[Any, list[dict[str, Any]]]) -> None:
    rows = from_gemini(*history)
    chat = to_openai(rows)
    assert to_openai(from_openai(chat)) == chat
    items = to_responses(rows)
    assert to_responses(from_responses(items)) == items
    payload = to_anthropic(rows)
    assert to_anthropic(from_anthropic(*payload)) == payload


def test_emptied_results_are_kept_whole() -> None:
    """An empty ``output`` is a result the append would skip: it is kept as its part, whole."""
    contents = [
        {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "f", "args": {}}}]},
        {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "f", "response": {"output": ""}}}]},
    ]
    rows = from_gemini(None, contents)
    assert rows[1]["content"][0]["type"] == "provider"
    assert emptied(rows)[1]["content"] == ""
    assert to_gemini(rows) == (None, contents)


_KEYS = st.sampled_from(
    ["role", "parts", "text", "thought", "thought_signature", "inline_data", "fileData", "mime_type", "data",
     "file_uri", "function_call", "functionResponse", "id", "name", "args", "response", "output", "error",
     "executable_code", "content", "type", "kind", "part_kind", "contents", "system_instruction", "model", "user"]
)  # fmt: skip
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "0", "c1", "user", "model", "f"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=25,
)


@PROPS
@given(JSON, JSON)
def test_any_json_is_read_or_refused_with_a_typed_error(system: Any, contents: Any) -> None:
    """Whatever JSON reaches ``from_gemini`` or detection, the answer is rows or an ``InvalidInputError``."""
    try:
        rows = from_gemini(system, contents)
    except InvalidInputError:
        pass
    else:
        instruction, written = to_gemini(rows)
        assert_gemini(instruction, written)
    try:
        fmt, _ = read_payload(contents)
    except InvalidInputError:
        pass
    else:
        assert fmt in FORMATS or fmt == "rows"
