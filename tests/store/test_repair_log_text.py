"""A repair log entry's stored text (``flowmem.store.repairs.entry_text``): JSON as ``json.dumps`` writes it.

The text is written out by hand (decision 0124: the dict and its encoder cost more than
the entry's insert on SQLite); it must stay the text the log always stored, byte for
byte, and parse back to the same entry.
"""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import KINDS, Repair
from flowmem.store.repairs import entry_text, parse_entry

_TEXT = st.text(max_size=12)  # any code point: quotes, backslashes, controls, non-ASCII, surrogates
_INT = st.integers(min_value=0, max_value=2**53)


def _as_json_dumps(repair: Repair, at: float) -> str:
    """What the log stored before the text was written out: its dict through ``json.dumps``."""
    data: dict[str, object] = {
        "at": at,
        "rule": repair.rule,
        "kind": repair.kind,
        "call_ids": list(repair.call_ids),
        "count": repair.count,
    }
    if repair.positions:
        data["positions"] = list(repair.positions)
    if repair.archived is not None:
        data["archived"] = list(repair.archived)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


@given(
    rule=_TEXT,
    kind=st.sampled_from(sorted(set(KINDS.values()))),
    call_ids=st.lists(_TEXT, max_size=4),
    count=_INT,
    positions=st.lists(_INT, max_size=4),
    archived=st.none() | st.tuples(_INT, _INT),
    at=st.floats(allow_nan=True, allow_infinity=True),
)
def test_an_entrys_text_is_the_json_dumps_text_of_its_dict(
    rule: str,
    kind: str,
    call_ids: list[str],
    count: int,
    positions: list[int],
    archived: tuple[int, int] | None,
    at: float,
) -> None:
    repair = Repair(rule, tuple(call_ids), count, tuple(positions), archived, kind)
    text = entry_text(repair, at)
    assert text == _as_json_dumps(repair, at)
    if math.isfinite(at) and rule:
        entry = parse_entry(1, text)
        assert (entry.rule, entry.call_ids, entry.count, entry.positions) == (
            rule,
            call_ids,
            count,
            positions,
        )
        assert entry.at == at and entry.archived == archived
