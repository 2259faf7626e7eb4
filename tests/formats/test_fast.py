"""The formats' speed twin equals its oracle: ``fast.provider_rows`` is ``normalized``, every ``to_X`` its plain twin."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import to_row
from flowmem.formats import (
    from_anthropic,
    from_gemini,
    from_openai,
    from_responses,
    plain,
    to_anthropic,
    to_gemini,
    to_openai,
    to_responses,
)
from flowmem.formats._common import normalized, read_entry
from flowmem.formats.fast import plain_call, provider_rows, sendable_rows
from tests.formats import members as M
from tests.formats.gemini_members import gemini_histories
from tests.formats.strategies import histories, messy_histories

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# made once, not at every draw: the same choices
_SOURCES = st.sampled_from(["openai", "responses", "anthropic", "gemini"])
_CHAT, _RESPONSES, _ANTHROPIC = M.chat_histories(), M.responses_histories(), M.anthropic_histories()
_GEMINI = gemini_histories()


def _rich(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows read from a provider payload using every member (parts, kinds, extras), some as stored rows."""
    source = draw(_SOURCES)
    if source == "openai":
        rows = from_openai(draw(_CHAT))
    elif source == "responses":
        rows = from_responses(draw(_RESPONSES))
    elif source == "anthropic":
        body = draw(_ANTHROPIC)
        rows = from_anthropic(body.get("system"), body["messages"])
    else:
        rows = from_gemini(*draw(_GEMINI))
    stored = draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    return [to_row(row) if as_row else row for row, as_row in zip(rows, stored, strict=True)]


ANY_HISTORY = st.one_of(
    histories(carrier="openai"),
    histories(carrier="anthropic"),
    messy_histories(),
    st.composite(_rich)(),
)


@SETTINGS
@given(ANY_HISTORY, st.booleans())
def test_mem_5_provider_rows_equal_the_plain_normalization(history: list[Any], systems_first: bool) -> None:
    assert provider_rows(history, systems_first) == normalized(history, systems_first)


@SETTINGS
@given(ANY_HISTORY, st.booleans(), st.booleans())
def test_mem_5_a_normalized_history_is_read_in_one_scan(
    history: list[Any], systems_first: bool, stored: bool
) -> None:
    """What normalization gives back (and a store keeps) takes the fast path, and reads back the same."""
    rows = normalized(history, systems_first)
    given_rows = [to_row(row) for row in rows] if stored else rows
    kinds = {str(call.get("kind")) for row in rows for call in row.get("tool_calls") or []}
    if kinds & {"computer", "mcp_approval"}:
        return  # a call text cannot answer always takes the plain path
    assert sendable_rows(given_rows, systems_first) == rows


def test_mem_5_a_history_needing_repair_takes_the_plain_path() -> None:
    call = {"tool_call_id": "c1", "name": "f", "args": {}}
    needing = [
        [{"role": "assistant", "content": "", "tool_calls": [call]}],  # unanswered
        [{"role": "tool", "content": "x", "tool_call_id": "c1"}],  # orphan
        [{"role": "user", "content": "hi"}, {"role": "system", "content": "s"}],  # system late
        [{"role": "assistant", "content": ""}],  # empty turn
        [{"role": "user", "content": 3}],  # content coerced
        [{"role": "bogus", "content": "x"}],  # unreadable
    ]
    for history in needing:
        assert sendable_rows(history) is None, history
        assert provider_rows(history) == normalized(history)


def _both(convert: Any, oracle: Any, history: list[Any], **options: Any) -> None:
    fast_dropped: dict[str, int] = {}
    plain_dropped: dict[str, int] = {}
    assert convert(history, fast_dropped, **options) == oracle(history, plain_dropped, **options)
    assert fast_dropped == plain_dropped


@SETTINGS
@given(ANY_HISTORY)
def test_every_to_x_equals_its_plain_oracle(history: list[Any]) -> None:
    _both(to_openai, plain.to_openai, history)
    _both(to_anthropic, plain.to_anthropic, history)
    _both(to_responses, plain.to_responses, history)
    _both(to_responses, plain.to_responses, history, systems_first=False)
    _both(to_gemini, plain.to_gemini, history)


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-1, 2), st.sampled_from(["", " ", "0", "c1", " c2 ", "custom", "function", "mcp"]))
_CALL_ENTRIES = st.one_of(
    st.dictionaries(
        st.sampled_from(["tool_call_id", "id", "name", "args", "arguments", "input", "kind", "type", "custom", "extra", "function"]),
        st.one_of(_VALUES, st.dictionaries(st.sampled_from(["name", "input", "arguments", "openai"]), _VALUES, max_size=2)),
    ),
    st.builds(
        lambda cid, name, args, kind: {"tool_call_id": cid, "name": name, "args": args, **kind},
        st.sampled_from(["c1", " c2 "]),
        st.sampled_from(["search", ""]),
        st.one_of(st.none(), st.just({"q": 1}), st.just("text")),
        st.sampled_from([{}, {"kind": "function"}, {"type": "custom"}, {"kind": "custom"}, {"extra": None}]),
    ),
)


@SETTINGS
@given(_CALL_ENTRIES)
def test_the_plain_call_reader_equals_read_entry_wherever_it_answers(call: Any) -> None:
    found = plain_call(call)
    if found is not None:
        entry = read_entry(call)
        assert (entry.id, entry.name, entry.args, entry.kind) == (*found, "function")
        assert not call.get("extra")


def test_the_plain_call_reader_answers_for_the_common_entry() -> None:
    assert plain_call({"tool_call_id": "c1", "name": "search", "args": {"q": 1}}) == ("c1", "search", {"q": 1})
    assert plain_call({"tool_call_id": "c1", "name": "search", "args": {}, "extra": {"openai": {}}}) is None


def _elsewhere(row: Any) -> Any:
    """A row with an ``extra`` of another format on itself, its call entries and its parts (no format reads it)."""
    if not isinstance(row, dict):
        return row
    out = dict(row)
    if isinstance(row.get("content"), list):
        out["content"] = [_tagged(p) if isinstance(p, dict) and p.get("type") != "provider" else p for p in row["content"]]
    meta = row.get("metadata")
    if isinstance(meta, dict):  # a stored row keeps its extra and calls in its metadata
        out["metadata"] = _with_calls(meta)
        return out
    return _with_calls(out)


def _with_calls(fields: dict[str, Any]) -> dict[str, Any]:
    out = _tagged(fields)
    if isinstance(out.get("tool_calls"), list):
        out["tool_calls"] = [_tagged(c) if isinstance(c, dict) else c for c in out["tool_calls"]]
    return out


def _tagged(obj: dict[str, Any]) -> dict[str, Any]:
    extra = obj.get("extra")
    if extra is not None and not isinstance(extra, dict):
        return obj
    return {**obj, "extra": {**(extra or {}), "elsewhere": {"note": 1}}}


@SETTINGS
@given(st.one_of(histories(carrier="openai"), histories(carrier="anthropic"), st.composite(_rich)()))
def test_the_writers_shortcuts_for_entries_without_extras_equal_their_general_path(history: list[Any]) -> None:
    # an extra of another format sends every row, call and part down the general path, which must write the same
    tagged = [_elsewhere(row) for row in history]
    _same(to_openai, history, tagged)
    _same(to_responses, history, tagged)
    _same(to_gemini, history, tagged)


def _same(convert: Any, history: list[Any], tagged: list[Any]) -> None:
    dropped: dict[str, int] = {}
    tagged_dropped: dict[str, int] = {}
    assert convert(history, dropped) == convert(tagged, tagged_dropped)
    assert dropped == tagged_dropped
