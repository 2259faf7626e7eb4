"""The corpus of real histories (``tests/corpus/<provider>/<name>.json``), one test per history.

Each file holds a request ``payload`` in the shape its provider's documentation
shows (``shape`` names the page), and what ``check_sendable`` must say of it. For
each: the payload is valid for the provider's SDK, its format is detected, the
round trip is the identity (the normalized form when not sendable), an
interrupted variant heals, and every other format takes it without raising.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import MessageParam

from flowmem.core import (
    HEALED_CONTENT,
    UNTEXTABLE_KINDS,
    append,
    call_kind,
    check_sendable,
    normalize,
    prepare,
)
from flowmem.formats import FORMATS, check_payload, detect_format, read_document, write_document
from flowmem.store import Address, Store
from tests.formats.sdk import (
    _validated,
    assert_document,
    assert_gemini,
    assert_openai_chat,
    assert_responses,
)
from tests.store.conftest import store  # noqa: F401  (memory, SQLite, PostgreSQL)

CORPUS = Path(__file__).parent
FILES = sorted(CORPUS.glob("*/*.json"))
IDS = [f"{path.parent.name}/{path.stem}" for path in FILES]


def load(path: Path) -> dict[str, Any]:
    """Return one corpus entry."""
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def history(payload: dict[str, Any], provider: str) -> Any:
    """Return the part of a request body that is the history, as ``write_document`` spells it."""
    if provider == "openai":
        return payload["messages"]
    if provider == "responses":
        return payload["input"]
    if provider == "gemini":  # the body's key is written in snake_case, which REST reads too
        instruction = payload.get("system_instruction", payload.get("systemInstruction"))
        return {"contents": payload["contents"], **({} if instruction is None else {"system_instruction": instruction})}
    return {key: payload[key] for key in ("system", "messages") if key in payload}


def assert_valid(provider: str, written: Any) -> None:
    """``written`` (``write_document``'s output) validates against the provider SDK's types."""
    assert_document(provider, written)


def test_corpus_covers_the_issue_list() -> None:
    names = set(IDS)
    assert len(names) >= 30
    required = {
        "anthropic/thinking_parallel_tool_use",
        "anthropic/redacted_thinking_parallel_tool_use",
        "anthropic/image_input",
        "anthropic/pdf_document_with_citations",
        "anthropic/server_web_search",
        "anthropic/tool_result_error_and_image",
        "anthropic/cache_control_system_and_tools",
        "openai/vision_image_url_detail",
        "openai/input_audio_part",
        "openai/file_parts",
        "openai/assistant_audio_turn",
        "openai/refusal_and_name",
        "openai/parallel_tool_calls",
        "responses/reasoning_encrypted_content",
        "responses/function_call_and_output",
        "responses/custom_tool_call",
        "responses/web_search_call",
        "responses/file_search_call",
        "responses/computer_call_screenshot",
        "responses/mcp_list_approve_call",
        "responses/image_generation_call",
        "responses/item_ids_and_status",
        "gemini/parallel_function_calls",
        "gemini/thought_signatures_function_call",
        "gemini/image_inline_and_file_uri",
        "gemini/code_execution",
        "gemini/rest_camel_case",
        "gemini/unanswered_function_call",
    }
    assert required <= names, required - names
    for path in FILES:
        entry = load(path)
        assert entry["provider"] == path.parent.name
        assert entry["shape"].startswith("https://")
        assert entry["sendable"] == (entry["violations"] == [])


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_corpus_payload_is_valid_for_its_sdk(path: Path) -> None:
    entry = load(path)
    payload = entry["payload"]
    if entry["provider"] == "openai":
        assert_openai_chat(payload["messages"])
    elif entry["provider"] == "responses":
        assert_responses(payload["input"])
    elif entry["provider"] == "gemini":
        assert_gemini(payload.get("system_instruction", payload.get("systemInstruction")), payload["contents"])
    else:
        for message in payload["messages"]:
            _validated(MessageParam, message)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_corpus_format_is_detected(path: Path) -> None:
    entry = load(path)
    detected = detect_format(entry["payload"])
    if detected == "rows":  # plain text messages: the same in rows and in this format
        assert read_document(entry["provider"], entry["payload"]) == entry["payload"]["messages"]
    else:
        assert detected == entry["provider"]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_corpus_check_sendable_agrees_with_the_provider(path: Path) -> None:
    entry = load(path)
    rows = read_document(entry["provider"], entry["payload"])
    assert [v.code for v in check_sendable(rows)] == entry["violations"]
    fmt, violations = check_payload(entry["payload"], entry["provider"])  # as the provider judges it
    assert (fmt, [v.code for v in violations]) == (entry["provider"], entry["violations"])


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_corpus_round_trip_is_the_identity(path: Path) -> None:
    entry = load(path)
    provider, payload = entry["provider"], entry["payload"]
    before = copy.deepcopy(payload)
    rows = read_document(provider, payload)
    written = write_document(provider, rows)
    assert payload == before, "reading must not change the payload"
    assert_valid(provider, written)
    if entry["sendable"]:
        assert written == history(payload, provider)
    else:
        assert written == write_document(provider, normalize(rows, keep_content=True).messages)
    back = read_document(provider, written)
    assert check_sendable(back) == []
    assert write_document(provider, back) == written


def _first_call_turn(rows: list[dict[str, Any]]) -> int | None:
    return next(
        (n for n, row in enumerate(rows) if row["role"] == "assistant" and row.get("tool_calls")),
        None,
    )


def _calls_first_at(path: Path) -> int | None:
    """The index of the first row of a corpus history that declares calls, or None."""
    entry = load(path)
    return _first_call_turn(read_document(entry["provider"], entry["payload"]))


WITH_CALLS = [path for path in FILES if _calls_first_at(path) is not None]


@pytest.mark.parametrize(
    "path", WITH_CALLS, ids=[f"{path.parent.name}/{path.stem}" for path in WITH_CALLS]
)
def test_corpus_interrupted_variant_heals(path: Path) -> None:
    """Cut after the first turn with calls (its results lost), append a user turn: healed, sendable."""
    entry = load(path)
    provider = entry["provider"]
    rows = read_document(provider, entry["payload"])
    turn = _first_call_turn(rows)
    assert turn is not None
    calls = rows[turn]["tool_calls"]
    buffer = append([], [*rows[: turn + 1], {"role": "user", "content": "continue"}]).messages
    written = write_document(provider, buffer)
    assert_valid(provider, written)
    back = read_document(provider, written)
    assert check_sendable(back) == []
    answered = {row["tool_call_id"]: row for row in back if row["role"] == "tool"}
    declared = {
        call["tool_call_id"] for row in back if row["role"] == "assistant" for call in row.get("tool_calls") or []
    }
    for call in calls:
        cid = call["tool_call_id"]
        if call_kind(call) in UNTEXTABLE_KINDS:
            assert cid not in declared and cid not in answered  # removed, not answered by text
        else:
            assert cid in declared
            result = answered[cid]
            text = result["content"] if isinstance(result["content"], str) else json.dumps(result)
            assert HEALED_CONTENT in text or "extra" in result
    if provider == "anthropic":
        first = rows[turn]["content"]
        if isinstance(first, list) and first and first[0]["type"] == "reasoning":
            use = next(
                m
                for m in written["messages"]
                if isinstance(m["content"], list)
                and any(b.get("type") == "tool_use" for b in m["content"])
            )
            assert use["content"][0]["type"] in ("thinking", "redacted_thinking")


@pytest.mark.parametrize("target", FORMATS)
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_corpus_converts_to_every_format_without_raising(path: Path, target: str) -> None:
    entry = load(path)
    rows = read_document(entry["provider"], entry["payload"])
    dropped: dict[str, int] = {}
    written = write_document(target, rows, dropped)
    assert_valid(target, written)
    assert check_sendable(read_document(target, written)) == []
    assert all(isinstance(count, int) and count > 0 for count in dropped.values())
    if target == entry["provider"]:
        assert dropped == {}


def test_corpus_histories_are_stored_and_read_back_equal_on_every_backend(store: Store) -> None:  # noqa: F811
    """Each history through the store's append (MEM rules) and back: the same rows, the same payload."""
    for number, path in enumerate(FILES):
        entry = load(path)
        provider = entry["provider"]
        rows = read_document(provider, entry["payload"])
        address = Address("session", f"corpus{number}", "chat")
        prepared = prepare(rows, 1_755_000_000)
        store.append(address, prepared)
        loaded = store.load(address)
        written = write_document(provider, loaded)
        assert_valid(provider, written)
        if entry["sendable"]:
            assert loaded == prepared, path.name
            assert written == history(entry["payload"], provider), path.name
        else:
            assert check_sendable(read_document(provider, written)) == [], path.name
