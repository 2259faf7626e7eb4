"""Properties of ``normalize(keep_content=True)`` over generated histories (decision 0021).

Histories mix part lists (reasoning, images, provider blocks), string and junk content,
``is_error`` and ``extra`` at the top level and under metadata, call kinds (text-result
and untextable ones), healed placeholders, crashes, retries, orphans and late results.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import (
    HEALED_CONTENT,
    UNTEXTABLE_KINDS,
    call_kind,
    check_sendable,
    coerce_content,
    entry_id,
    is_parts,
    normalize,
)

Row = dict[str, Any]

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

IDS = st.sampled_from(["a", "b", "c", "d", " b ", 1, "", None])
TEXT_KINDS = st.sampled_from([None, "function", "custom", "local_shell", "shell", "apply_patch"])
ANY_KIND = st.one_of(TEXT_KINDS, st.sampled_from(sorted(UNTEXTABLE_KINDS)))
# every part is a fresh object, so the tests can tell parts apart by identity
PART = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=3)),
    st.builds(lambda: {"type": "image", "url": "https://x/i.png", "detail": "auto"}),
    st.builds(lambda: {"type": "audio", "data": "UklG", "format": "wav"}),
    st.builds(lambda: {"type": "provider", "provider": "anthropic", "block": {"type": "x"}}),
)
PARTS = st.lists(PART, min_size=1, max_size=3)
CONTENT = st.one_of(st.text(max_size=3), PARTS, PARTS, st.none(), st.integers(0, 3), st.just([1]))
EXTRA = st.one_of(st.none(), st.just({"openai": {"name": "n"}}), st.just({"anthropic": {}}))


def _call(spelling: str, cid: Any, kind: str | None, extra: Row | None) -> Row:
    entry: Row = {spelling: cid, "name": "f", "args": {}}
    if kind is not None:
        entry["kind"] = kind
    if extra is not None:
        entry["extra"] = extra
    return entry


def _assistant(content: Any, reasoning: bool, calls: list[Row], stored: bool) -> Row:
    if reasoning:
        # the signature is made unique per turn by ``_tag``
        thinking = {"type": "reasoning", "text": "t", "signature": "", "provider": "anthropic"}
        content = [thinking] + (content if isinstance(content, list) else [])
    row: Row = {"role": "assistant", "content": content}
    if calls:
        if stored:
            row["metadata"] = {"tool_calls": calls}
        else:
            row["tool_calls"] = calls
    return row


def _tool(content: Any, cid: Any, stored: bool, healed: bool, is_error: Any, extra: Any) -> Row:
    row: Row = {"role": "tool", "content": content}
    meta: Row = {"healed": True} if healed else {}
    fields: Row = {"tool_call_id": cid}
    if is_error is not None:
        fields["is_error"] = is_error
    if extra is not None:
        fields["extra"] = extra
    if stored:
        meta.update(fields)
    else:
        row.update(fields)
    row["metadata"] = meta
    return row


def _plain(role: str, content: Any, extra: Any) -> Row:
    row: Row = {"role": role, "content": content}
    if extra is not None:
        row["extra"] = extra
    return row


def _history(kinds: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    call = st.builds(_call, st.sampled_from(["id", "tool_call_id"]), IDS, kinds, EXTRA)
    assistant = st.builds(
        _assistant, CONTENT, st.booleans(), st.lists(call, max_size=3), st.booleans()
    )
    result = st.builds(
        _tool,
        CONTENT,
        IDS,
        st.booleans(),
        st.booleans(),
        st.sampled_from([None, True, False, "x"]),
        EXTRA,
    )
    message = st.one_of(
        assistant,
        assistant,
        result,
        result,
        result,
        st.builds(_plain, st.just("user"), CONTENT, EXTRA),
        st.builds(_plain, st.just("system"), CONTENT, EXTRA),
    )
    entry = st.one_of(message, message, message, message, st.sampled_from([None, "junk"]))
    return st.lists(entry, max_size=20).map(_tag)


def _tag(history: list[Any]) -> list[Any]:
    """Give every reasoning part a signature naming its turn's position."""
    for index, entry in enumerate(history):
        if isinstance(entry, dict) and isinstance(entry.get("content"), list):
            for part in entry["content"]:
                if isinstance(part, dict) and part.get("type") == "reasoning":
                    part["signature"] = f"turn{index}"
    return history


ANY_HISTORY = _history(ANY_KIND)
TEXT_HISTORY = _history(TEXT_KINDS)


def _as_default(row: Row) -> Row:
    """What the default normalization makes of a provider-flat row."""
    flat = {k: v for k, v in row.items() if k not in ("extra", "is_error")}
    flat["content"] = coerce_content(row["content"])
    return flat


@SETTINGS
@given(ANY_HISTORY)
def test_keep_content_output_is_always_sendable(history: list[Any]) -> None:
    assert check_sendable(normalize(history, keep_content=True).messages) == []


@SETTINGS
@given(ANY_HISTORY)
def test_keep_content_is_idempotent(history: list[Any]) -> None:
    once = normalize(history, keep_content=True)
    twice = normalize(once.messages, keep_content=True)
    assert twice.messages == once.messages
    assert twice.dropped == 0


@SETTINGS
@given(TEXT_HISTORY)
def test_keep_content_agrees_with_the_default_once_content_is_coerced(history: list[Any]) -> None:
    kept = normalize(history, keep_content=True)
    default = normalize(history)
    assert [_as_default(row) for row in kept.messages] == default.messages
    assert kept.dropped == default.dropped


@SETTINGS
@given(ANY_HISTORY)
def test_keep_content_never_reorders_or_changes_parts(history: list[Any]) -> None:
    sources = [
        index
        for index, entry in enumerate(history)
        if isinstance(entry, dict) and is_parts(entry.get("content")) and entry.get("content")
    ]
    seen: dict[str, list[int]] = {"system": [], "other": []}
    for row in normalize(history, keep_content=True).messages:
        if not isinstance(row["content"], list):
            continue
        # the very part objects of exactly one input row, in their order
        origin = [i for i in sources if _same_parts(history[i]["content"], row["content"])]
        assert len(origin) == 1
        if row["role"] != "tool":  # results may move into their call's run (MEM-5 step 3)
            seen["system" if row["role"] == "system" else "other"].append(origin[0])
    # systems move first (step 2); otherwise, rows with parts keep their order
    for indices in seen.values():
        assert indices == sorted(indices)


def _same_parts(given_parts: list[Any], output: list[Any]) -> bool:
    return len(given_parts) == len(output) and all(a is b for a, b in zip(given_parts, output, strict=True))


@SETTINGS
@given(ANY_HISTORY)
def test_keep_content_never_separates_reasoning_from_its_turns_calls(history: list[Any]) -> None:
    for row in normalize(history, keep_content=True).messages:
        if row["role"] != "assistant" or not row.get("tool_calls"):
            continue
        content = row["content"]
        thinking = [p for p in content if p["type"] == "reasoning"] if is_parts(content) else []
        if not thinking:
            continue
        turn = history[int(thinking[0]["signature"].removeprefix("turn"))]
        calls = turn.get("tool_calls") or turn.get("metadata", {}).get("tool_calls")
        # every call the output row carries is one of its own turn's calls, in order
        positions = [next(i for i, c in enumerate(calls) if c is kept) for kept in row["tool_calls"]]
        assert positions == sorted(positions)


@SETTINGS
@given(ANY_HISTORY)
def test_keep_content_never_heals_an_untextable_call(history: list[Any]) -> None:
    rows = normalize(history, keep_content=True).messages
    kinds = {entry_id(c): call_kind(c) for r in rows for c in r.get("tool_calls", [])}
    for row in rows:
        if row["role"] == "tool" and kinds.get(row["tool_call_id"]) in UNTEXTABLE_KINDS:
            assert row["content"] != HEALED_CONTENT
            assert any(_real_result(entry, row["tool_call_id"]) for entry in history)


def _real_result(entry: Any, cid: str) -> bool:
    """True when ``entry`` is an input tool row answering ``cid`` that is not healed."""
    if not isinstance(entry, dict) or entry.get("role") != "tool":
        return False
    meta = entry["metadata"]
    raw = entry["tool_call_id"] if "tool_call_id" in entry else meta.get("tool_call_id")
    return str(raw).strip() == cid and not meta.get("healed")
