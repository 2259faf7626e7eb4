"""The core's readers on the append path, against their plain definitions (decision 0168).

``call_ids``, ``entry_id`` and ``result_id`` skip ``usable_call_id`` for an absent
(None) id and read the calls without ``raw_tool_calls``' copy; ``text_tokens``
counts an ASCII text without encoding it; ``apply_append`` tests each row for
emptiness once. The plain definitions below are the functions as they were: over
any message hypothesis makes (any role, calls at the top or under metadata, ids of
every type, usable or not), each gives what its plain twin gives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from flowmem.core import ListEditor, apply_append
from flowmem.core.append import is_empty
from flowmem.core.messages import call_ids, entry_id, raw_tool_calls, result_id, usable_call_id
from flowmem.core.tokens import text_tokens


def plain_entry_id(call: object) -> str | None:
    """``entry_id`` as it was."""
    if not isinstance(call, Mapping):
        return None
    first = usable_call_id(call.get("tool_call_id"))
    return first if first is not None else usable_call_id(call.get("id"))


def plain_call_ids(message: Any) -> list[str]:
    """``call_ids`` as it was."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return []
    seen: dict[str, None] = {}
    for call in raw_tool_calls(message):
        cid = plain_entry_id(call)
        if cid is not None:
            seen.setdefault(cid, None)
    return list(seen)


def plain_result_id(message: Any) -> str | None:
    """``result_id`` as it was."""
    if not isinstance(message, Mapping) or message.get("role") != "tool":
        return None
    meta = message.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    found = usable_call_id(message.get("tool_call_id"))
    if found is None:
        found = usable_call_id(meta.get("tool_call_id"))
    return found


IDS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.sampled_from(["", " ", "0", " 0 ", "c1", " c1", "c2", "\udc80"]),
    st.text(max_size=4),
    st.floats(allow_nan=False, max_value=3, min_value=-3),
)
CALL = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"id": IDS, "tool_call_id": IDS, "name": st.text(max_size=3)}
    ),
    st.none(),
    st.integers(),
    st.text(max_size=2),
)
CALLS = st.one_of(st.none(), st.lists(CALL, max_size=4), st.tuples(CALL), st.text(max_size=2))
META = st.one_of(
    st.none(),
    st.integers(),
    st.fixed_dictionaries(
        {}, optional={"tool_calls": CALLS, "tool_call_id": IDS, "healed": st.booleans()}
    ),
)
MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["assistant", "tool", "user", "system", "other"])},
        optional={"tool_calls": CALLS, "tool_call_id": IDS, "metadata": META},
    ),
    st.none(),
    st.lists(st.integers(), max_size=1),
)


@settings(max_examples=600)
@given(MESSAGE)
@example({"role": "tool", "metadata": {"tool_call_id": "c1"}})
@example({"role": "tool", "tool_call_id": None, "metadata": {"tool_call_id": 0}})
@example(
    {
        "role": "assistant",
        "metadata": {"tool_calls": [{"id": "a"}, {"tool_call_id": " b", "id": "c"}]},
    }
)
@example({"role": "assistant", "tool_calls": (), "metadata": {"tool_calls": [{"id": "a"}]}})
def test_call_ids_and_result_id_read_what_their_plain_twins_read(message: Any) -> None:
    assert call_ids(message) == plain_call_ids(message)
    assert result_id(message) == plain_result_id(message)


@settings(max_examples=400)
@given(CALL)
def test_entry_id_reads_what_its_plain_twin_reads(call: Any) -> None:
    assert entry_id(call) == plain_entry_id(call)


@settings(max_examples=600)
@given(st.text())
def test_text_tokens_is_a_token_per_four_utf8_bytes_rounded_up(text: str) -> None:
    assert text_tokens(text) == math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)


def test_text_tokens_of_ascii_texts_of_every_length_to_a_kilobyte() -> None:
    for n in range(1025):
        assert text_tokens("a" * n) == math.ceil(n / 4)


ROW = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["assistant", "tool", "user"]),
        "content": st.sampled_from(["", "hi", None, []]),
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "tool_calls": st.lists(
                    st.fixed_dictionaries({"id": st.sampled_from(["a", "b", ""])}), max_size=2
                ),
                "tool_call_id": st.sampled_from(["a", "b"]),
            },
        ),
    }
)


def plain_apply(rows: list[dict[str, Any]], before: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
    """``apply_append`` row by row: an all-empty append is a pure read; else each row in turn."""
    editor = ListEditor(before)
    outcome = apply_append(editor, [], 0) if not rows else None
    for row in rows:
        outcome = apply_append(editor, [row], 0)
    return outcome, editor.rows


@settings(max_examples=300)
@given(st.lists(ROW, max_size=5), st.lists(ROW, max_size=5))
def test_an_append_skips_exactly_its_empty_rows(
    before: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> None:
    """The rows after an append of many equal those after appending each alone (empty ones too)."""
    editor = ListEditor(before)
    apply_append(editor, rows, 0)
    _, one_by_one = plain_apply(rows, before)
    assert editor.rows == one_by_one
    assert sum(map(is_empty, editor.rows)) == sum(map(is_empty, before))  # no empty row added
