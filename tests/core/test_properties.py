"""Properties of the core over generated histories (hypothesis).

Histories mix crashes (calls never answered), retries (a turn re-declaring ids),
duplicate and orphan results, both id spellings at the top level and under
metadata, unusable ids, content of every JSON type, system rows anywhere and
entries that are not messages at all.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import (
    HEALED_CONTENT,
    CallIndex,
    IndexedListEditor,
    ListEditor,
    append,
    apply_append,
    call_ids,
    check_sendable,
    is_empty,
    is_healed,
    normalize,
    prepare,
    repair_tool_pairing,
    result_id,
    to_flat,
    to_row,
)
from tests.core.test_append import GappedEditor

Row = dict[str, Any]

PROPERTY_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

LIGHT_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

USABLE_IDS = st.sampled_from(["a", "b", "c", "d", " b ", 1, 2])
UNUSABLE_IDS: st.SearchStrategy[Any] = st.sampled_from([None, "", "  ", "0", 0, True, 1.5, {}])
ANY_ID = st.one_of(USABLE_IDS, USABLE_IDS, USABLE_IDS, UNUSABLE_IDS)
CONTENT = st.one_of(
    st.text(min_size=1, max_size=4),
    st.text(min_size=1, max_size=4),
    st.just(""),
    st.none(),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.booleans(),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2),
)


def _call(spelling: str, cid: Any) -> Row:
    return {spelling: cid, "name": "f"}


CALL = st.builds(_call, st.sampled_from(["id", "tool_call_id"]), ANY_ID)
USABLE_CALL = st.builds(_call, st.sampled_from(["id", "tool_call_id"]), USABLE_IDS)


def _assistant(content: Any, calls: list[Row], under_metadata: bool) -> Row:
    row: Row = {"role": "assistant", "content": content}
    if calls:
        if under_metadata:
            row["metadata"] = {"tool_calls": calls}
        else:
            row["tool_calls"] = calls
    return row


def _tool(content: Any, cid: Any, under_metadata: bool, healed: bool) -> Row:
    meta: Row = {"healed": True} if healed else {}
    row: Row = {"role": "tool", "content": content}
    if under_metadata:
        meta["tool_call_id"] = cid
    else:
        row["tool_call_id"] = cid
    row["metadata"] = meta
    return row


def _plain(role: str, content: Any) -> Row:
    return {"role": role, "content": content}


ASSISTANT = st.builds(_assistant, CONTENT, st.lists(CALL, max_size=3), st.booleans())
TOOL = st.builds(_tool, CONTENT, ANY_ID, st.booleans(), st.booleans() | st.just(False))
USER = st.builds(_plain, st.just("user"), CONTENT)
SYSTEM = st.builds(_plain, st.just("system"), CONTENT)
NOT_A_MESSAGE = st.sampled_from(
    [None, "junk", 3, ["user", "hi"], {"content": "no role"}, {"role": "robot", "content": "x"}]
)

MESSAGE = st.one_of(ASSISTANT, ASSISTANT, TOOL, TOOL, TOOL, USER, SYSTEM)
ENTRY = st.one_of(MESSAGE, MESSAGE, MESSAGE, MESSAGE, NOT_A_MESSAGE)
HISTORY = st.lists(ENTRY, max_size=25)
MESSAGES = st.lists(MESSAGE, max_size=15)


def _buffer(messages: list[Row]) -> list[Row]:
    """A stored buffer built the only way buffers are built: by appends."""
    return append([], messages).messages


def _tagged(messages: list[Row], prefix: str) -> list[Row]:
    """Give every message unique text content, so it can be found again."""
    return [{**m, "content": f"{prefix}{i}"} for i, m in enumerate(messages)]


# --- normalize -------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(HISTORY)
def test_mem_5_normalize_output_is_always_sendable(history: list[Any]) -> None:
    result = normalize(history)
    assert check_sendable(result.messages) == []


@PROPERTY_SETTINGS
@given(HISTORY)
def test_mem_5_normalize_is_idempotent(history: list[Any]) -> None:
    once = normalize(history)
    twice = normalize(once.messages)
    assert twice.messages == once.messages
    assert twice.dropped == 0


@LIGHT_SETTINGS
@given(HISTORY)
def test_mem_5_normalize_keeps_every_system_and_user_message(history: list[Any]) -> None:
    result = normalize(history)
    for role in ("system", "user"):
        given_count = sum(1 for e in history if isinstance(e, dict) and e.get("role") == role)
        kept = sum(1 for m in result.messages if m["role"] == role)
        assert kept == given_count


@LIGHT_SETTINGS
@given(HISTORY)
def test_mem_5_drop_count_is_every_removed_message_and_call(history: list[Any]) -> None:
    result = normalize(history)
    out = result.messages
    synthetic = sum(1 for m in out if m["role"] == "tool" and m["content"] == HEALED_CONTENT)
    removed_messages = len(history) - (len(out) - synthetic)
    calls_in = sum(len(flat.get("tool_calls", [])) for e in history if (flat := to_flat(e)))
    calls_out = sum(len(m.get("tool_calls", [])) for m in out)
    assert result.dropped == removed_messages + (calls_in - calls_out)


@PROPERTY_SETTINGS
@given(HISTORY)
def test_mem_5_repair_of_normalized_output_changes_nothing(history: list[Any]) -> None:
    repaired = repair_tool_pairing(normalize(history).messages)
    assert repaired.dropped == 0
    assert check_sendable(repaired.messages) == []


@PROPERTY_SETTINGS
@given(HISTORY)
def test_mem_5_without_step_2_the_output_is_sendable_where_systems_go_anywhere(
    history: list[Any],
) -> None:
    """``systems_first=False``: repaired for a provider that takes system messages anywhere."""
    repaired = normalize(history, systems_first=False).messages
    assert check_sendable(repaired, systems_first=False) == []
    assert normalize(repaired, systems_first=False).messages == repaired  # idempotent


@LIGHT_SETTINGS
@given(HISTORY)
def test_mem_5_without_step_2_no_message_moves_past_a_system_or_user_one(
    history: list[Any],
) -> None:
    """Only tool rows move (into their call's run); every other row keeps its place in the order."""
    tagged = [{**e, "content": f"t{i}"} if isinstance(e, dict) else e for i, e in enumerate(history)]
    out = normalize(tagged, systems_first=False).messages
    placed = [int(m["content"][1:]) for m in out if m["role"] != "tool"]
    assert placed == sorted(placed)
    given_order = [int(e["content"][1:]) for e in tagged if isinstance(e, dict) and e.get("role") in ("system", "user")]
    assert [n for n in placed if history[n]["role"] in ("system", "user")] == given_order


# --- append ---------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(MESSAGES, MESSAGES)
def test_mem_1_mem_2_append_never_loses_a_non_duplicate_message(
    existing: list[Row], incoming: list[Row]
) -> None:
    buffer = _buffer(_tagged(existing, "old"))
    batch = _tagged(incoming, "new")
    result = append(buffer, batch)
    out = result.messages
    answered = {rid for m in out if (rid := result_id(m)) is not None}
    declared = {cid for m in out for cid in call_ids(m)}
    # nothing already stored is lost (a placeholder may only give way to a real result)
    survivors = [m for m in out if not is_healed(m)]
    for row in buffer:
        if not is_healed(row):
            assert row in survivors
    # every incoming message is stored, unless it is a duplicate by MEM-1 / MEM-2
    for row in prepare(batch):
        rid, ids = result_id(row), call_ids(row)
        if row["role"] == "tool" and rid is not None:
            assert row in out or rid in answered
        elif row["role"] == "assistant" and ids:
            assert row in out or set(ids) <= declared
        else:
            assert row in out
    assert result.count == len(out)
    assert result.appended_any == (result.appended > 0)
    assert 0 <= result.appended <= len(batch)


@PROPERTY_SETTINGS
@given(MESSAGES, st.text(min_size=1, max_size=5))
def test_mem_3_after_a_user_append_nothing_dangles(existing: list[Row], text: str) -> None:
    result = append(_buffer(existing), {"role": "user", "content": text})
    answered = {rid for m in result.messages if (rid := result_id(m)) is not None}
    for row in result.messages:
        for cid in call_ids(row):
            assert cid in answered
    assert check_sendable(normalize(result.messages).messages) == []


@PROPERTY_SETTINGS
@given(
    MESSAGES,
    st.lists(
        st.one_of(
            TOOL,
            st.builds(
                _assistant, CONTENT, st.lists(USABLE_CALL, min_size=1, max_size=3), st.booleans()
            ),
        ),
        max_size=10,
    ),
)
def test_mem_1_mem_2_appending_the_same_batch_twice_adds_nothing(
    existing: list[Row], retried: list[Row]
) -> None:
    batch = [m for m in retried if m["role"] == "assistant" or result_id(m) is not None]
    first = append(_buffer(existing), batch)
    second = append(first.messages, batch)
    assert second.appended == 0
    assert second.appended_any is False
    assert second.messages == first.messages


@PROPERTY_SETTINGS
@given(MESSAGES, MESSAGES, st.integers(0, 6))
def test_window_holds_and_never_starts_with_a_tool_row(
    existing: list[Row], incoming: list[Row], window: int
) -> None:
    buffer = _buffer(existing)
    result = append(buffer, incoming, max_messages=window)
    if all(is_empty(row) for row in prepare(incoming)):
        # appending nothing is a pure read: the window is not applied (DESIGN.md §2)
        assert result.messages == [to_row(row) for row in buffer]
    elif window:
        assert result.count <= window
        # with a window, the buffer never starts with a tool row (DESIGN.md §2)
        assert not result.messages or result.messages[0]["role"] != "tool"
    assert result.count == len(result.messages)


@PROPERTY_SETTINGS
@given(MESSAGES, MESSAGES, st.integers(0, 6))
def test_apply_append_gives_the_same_buffer_on_any_editor(
    existing: list[Row], incoming: list[Row], window: int
) -> None:
    buffer = _buffer(existing)
    rows = prepare(incoming)
    expected = append(buffer, rows, max_messages=window)
    editor = GappedEditor([to_row(r) for r in buffer])
    outcome = apply_append(editor, [to_row(r) for r in rows], max_messages=window)
    assert editor.rows == expected.messages
    assert (outcome.appended, outcome.count) == (expected.appended, expected.count)
    plain = ListEditor([to_row(r) for r in buffer])
    assert (
        apply_append(plain, [to_row(r) for r in rows], max_messages=window).count == expected.count
    )
    indexed = IndexedListEditor([to_row(r) for r in buffer])  # the speed twin: the same buffer
    twin = apply_append(indexed, [to_row(r) for r in rows], max_messages=window)
    assert indexed.rows == plain.rows == expected.messages
    assert (twin.appended, twin.count) == (expected.appended, expected.count)


@PROPERTY_SETTINGS
@given(MESSAGES, MESSAGES, MESSAGES, st.integers(0, 6))
def test_an_editor_seeded_with_the_kept_call_index_is_the_one_that_indexes_its_rows(
    existing: list[Row], first: list[Row], second: list[Row], window: int
) -> None:
    """The index a store keeps after an append (``call_index``) seeds the next append's editor.

    The seeded editor answers every question the one that indexes the rows itself
    answers, so the second append leaves the same buffer, with the same outcome; and
    the seed is copied, never changed (an append that fails leaves it as it was).
    """
    editor = IndexedListEditor([to_row(r) for r in _buffer(existing)])
    apply_append(editor, [to_row(r) for r in prepare(first)], max_messages=window)
    kept = editor.call_index()
    before = (dict(kept.declared), dict(kept.answered), kept.open)
    incoming = [to_row(r) for r in prepare(second)]
    seeded = IndexedListEditor(list(editor.rows), index=kept)
    fresh = IndexedListEditor(list(editor.rows))
    assert _counted(seeded.call_index()) == _counted(fresh.call_index())
    outcome = apply_append(seeded, incoming, max_messages=window)
    expected = apply_append(fresh, incoming, max_messages=window)
    assert seeded.rows == fresh.rows
    assert (outcome.appended, outcome.replaced, outcome.count) == (
        expected.appended,
        expected.replaced,
        expected.count,
    )
    assert _counted(seeded.call_index()) == _counted(fresh.call_index())
    assert (kept.declared, kept.answered, kept.open) == before


def _counted(index: CallIndex) -> tuple[dict[str, int], dict[str, int], int]:
    """An index without its zero counts (an id whose rows were all removed is as absent)."""
    return (
        {k: n for k, n in index.declared.items() if n},
        {k: n for k, n in index.answered.items() if n},
        index.open,
    )


@PROPERTY_SETTINGS
@given(MESSAGES, MESSAGES)
def test_mem_1_mem_2_mem_3_mem_10_the_outcome_accounts_for_every_incoming_row(
    existing: list[Row], incoming: list[Row]
) -> None:
    """Each non-empty row is appended, replaces a placeholder or is a duplicate; heals are rows."""
    buffer = _buffer(existing)
    # incoming rows already marked healed are left out: they are placeholders of their own
    rows = [row for row in prepare(incoming) if not is_healed(row)]
    editor = ListEditor([to_row(r) for r in buffer])
    outcome = apply_append(editor, rows)
    if all(is_empty(row) for row in rows):
        assert (outcome.appended, outcome.healed, outcome.replaced, outcome.deduplicated) == (0,) * 4
        return
    assert outcome.appended + outcome.replaced + outcome.deduplicated == sum(
        not is_empty(row) for row in rows
    )
    # without a window nothing leaves: placeholders only come (healed) and go (replaced)
    assert outcome.count == len(buffer) + outcome.appended + outcome.healed
    healed_before = sum(is_healed(row) for row in buffer)
    healed_after = sum(is_healed(row) for row in editor.rows)
    assert healed_after == healed_before + outcome.healed - outcome.replaced
