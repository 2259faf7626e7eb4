"""Hypothesis strategies for histories the provider formats can carry (tests only)."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from flowmem.core import to_row

JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
ARGS = st.dictionaries(st.text(max_size=6), JSON_LEAF, max_size=3)
TEXT = st.text(max_size=24)
NONEMPTY = st.text(min_size=1, max_size=24)
LOWER = string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits


def word(
    alphabet: str, min_size: int = 0, max_size: int | None = None, first: str = ""
) -> st.SearchStrategy[str]:
    """Strings of one character of ``first`` (none when empty), then ``min_size``-``max_size`` of ``alphabet``.

    What ``st.from_regex(r"[first][alphabet]{min_size,max_size}", fullmatch=True)`` draws,
    in a few draws where the regex strategy's filtered draw costs several times more
    (decision 0211). Each module's ``REGEXES`` pairs its words with their patterns, and
    ``test_strategies.py`` checks the pairs.
    """
    rest = st.text(alphabet=alphabet, min_size=min_size, max_size=max_size)
    if not first:
        return rest
    return st.builds(str.__add__, st.sampled_from(first), rest)


NAME = word(LOWER + string.digits + "_", max_size=11, first=LOWER)
SUFFIX = word(ALNUM + "_-", max_size=8)
REGEXES = {r"[a-z][a-z0-9_]{0,11}": NAME, r"[A-Za-z0-9_-]{0,8}": SUFFIX}
"""This module's words and the patterns they stand for."""
KINDS = st.sampled_from(["system", "user", "assistant", "calls"])
# the generators' choosers, made once: a strategy made at each draw is built and validated again


@st.composite
def histories(draw: st.DrawFn, *, carrier: str = "openai") -> list[dict[str, Any]]:
    """Draw a history (flat or stored rows, calls in flowmem's spelling) ``carrier`` can carry.

    Every format gets: system rows anywhere (normalization moves them first),
    user and assistant text turns, assistant turns declaring 1–3 calls with results
    for a random subset in a random order (the rest get healed by normalization),
    and sometimes a stray leading tool row (stripped by normalization). Restrictions
    by carrier, each a documented loss (docs/formats.md):

    - ``anthropic``: at most one system row, with text (several are joined into one
      ``system`` string); user turns have text (empty text blocks are rejected).
    - ``anthropic`` and ``responses``: an assistant turn with calls and no text
      never directly follows an assistant text turn (both formats put a model
      turn's text and calls side by side, so the two would read back as one turn).
    """
    merges_turns = carrier in ("anthropic", "responses")
    rows: list[dict[str, Any]] = []
    if draw(st.booleans()):
        rows.append({"role": "tool", "content": draw(TEXT), "tool_call_id": "stray"})
    systems_left = 1 if carrier == "anthropic" else 3
    next_id = 0
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(KINDS)
        if kind == "system":
            if systems_left == 0:
                continue
            systems_left -= 1
            text = draw(NONEMPTY if carrier == "anthropic" else TEXT)
            rows.append({"role": "system", "content": text})
        elif kind == "user":
            rows.append(
                {"role": "user", "content": draw(NONEMPTY if carrier == "anthropic" else TEXT)}
            )
        elif kind == "assistant":
            rows.append({"role": "assistant", "content": draw(NONEMPTY)})
        else:
            after_text = bool(rows) and _last_non_system(rows) == "assistant"
            content = draw(NONEMPTY if merges_turns and after_text else TEXT)
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                next_id += 1
                suffix = draw(SUFFIX)
                calls.append(
                    {
                        "tool_call_id": f"call_{next_id}_{suffix}",
                        "name": draw(NAME),
                        "args": draw(ARGS),
                    }
                )
            rows.append({"role": "assistant", "content": content, "tool_calls": calls})
            answered = draw(st.permutations([c["tool_call_id"] for c in calls]))
            for cid in answered[: draw(st.integers(0, len(answered)))]:
                rows.append({"role": "tool", "content": draw(TEXT), "tool_call_id": cid})
    stored = draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    return [to_row(row) if as_row else row for row, as_row in zip(rows, stored, strict=True)]


def _last_non_system(rows: list[dict[str, Any]]) -> str:
    for row in reversed(rows):
        if row["role"] != "system":
            return str(row["role"])
    return ""


MESSY_ROLES = st.sampled_from(["system", "user", "assistant", "tool", "bogus", None])
SPELLINGS = st.sampled_from(["flowmem", "openai", "bare"])
ARGUMENTS = st.sampled_from(['{"a": 1}', "", "not json", "[1]"])
ID_POOL = st.sampled_from(["c1", "c2", "c3", " c1 ", 7, 0, "0", "", None, True])
ANY_CONTENT = st.one_of(
    st.none(), TEXT, st.integers(), st.booleans(), st.lists(st.text(max_size=3), max_size=2)
)
NOT_A_ROW = st.one_of(st.integers(), st.text(max_size=3), st.none())
BARE_ARGS = st.one_of(ARGS, TEXT, st.integers())


@st.composite
def messy_histories(draw: st.DrawFn) -> list[Any]:
    """Draw anything a caller might hand ``to_X``: bad ids, orphans, duplicates, odd content."""
    out: list[Any] = []
    for _ in range(draw(st.integers(0, 10))):
        role = draw(MESSY_ROLES)
        if role is None:
            out.append(draw(NOT_A_ROW))
            continue
        row: dict[str, Any] = {"role": role, "content": draw(ANY_CONTENT)}
        if role == "assistant" and draw(st.booleans()):
            calls: list[Any] = []
            for _ in range(draw(st.integers(0, 3))):
                spelling = draw(SPELLINGS)
                cid = draw(ID_POOL)
                if spelling == "flowmem":
                    calls.append({"tool_call_id": cid, "name": draw(NAME), "args": draw(ARGS)})
                elif spelling == "openai":
                    calls.append(
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": draw(NAME),
                                "arguments": draw(ARGUMENTS),
                            },
                        }
                    )
                else:
                    calls.append({"id": cid, "args": draw(BARE_ARGS)})
            row["tool_calls"] = calls
        if role == "tool":
            row["tool_call_id"] = draw(ID_POOL)
        if draw(st.booleans()) and role in ("user", "assistant", "tool", "system"):
            out.append(to_row(row))
        else:
            out.append(row)
    return out
