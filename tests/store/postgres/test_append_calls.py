"""Python calls per PostgreSQL append, counted (load-independent): a bound that regressions break.

A plain and a guarded single-message append on known facts (decision 0039), the four
kinds of ``bench/store.py``'s conversation in turn (a user turn, a call, its result,
an answer), counted by cProfile: 305 and 308 per append before decisions 0167 and
0168 (87cf6aa), about 232 and 235 after (docs/performance.md).
"""

from __future__ import annotations

import cProfile
import pstats
from typing import Any

import pytest

pytest.importorskip("psycopg")

from flowmem.core import prepare
from flowmem.store import Address, SessionRecord, WriteGuard

BOUND = 270  # calls per append; 305 (plain) and 308 (guarded) before


def _turn(i: int) -> dict[str, Any]:
    """bench/store.py's ``turn``: the i-th message of a tool-using conversation."""
    cid = f"call_{i // 4}"
    kind = i % 4
    if kind == 0:
        return {"role": "user", "content": f"question {i}: what is the weather in city {i}?"}
    if kind == 1:
        call = {
            "id": cid,
            "type": "function",
            "function": {"name": "weather", "arguments": f'{{"city": {i}}}'},
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if kind == 2:
        return {"role": "tool", "content": f"sunny, {i % 30} degrees", "tool_call_id": cid}
    return {"role": "assistant", "content": f"It is sunny in city {i - 3}."}


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
def test_a_single_message_append_makes_at_most_the_bounded_python_calls(
    postgres_store_url: str, guarded: bool
) -> None:
    from flowmem.auth import create_token
    from flowmem.store.postgres import PostgresStore

    store = PostgresStore(postgres_store_url)
    try:
        guard = None
        if guarded:
            store.create_session(SessionRecord("s1", "bench", "bench"))
            _, record = create_token(store, "bench")
            guard = WriteGuard(record.id, "s1")
        address = Address("session", "s1", "chat")
        rows = [prepare(_turn(i), 1_755_000_000 + i)[0] for i in range(120)]
        for row in rows[:40]:  # warm: prepared statements, known facts
            store.append(address, [row], guard=guard)
        profile = cProfile.Profile()
        profile.enable()
        for row in rows[40:]:
            store.append(address, [row], guard=guard)
        profile.disable()
        calls = pstats.Stats(profile).total_calls / 80  # type: ignore[attr-defined]
        assert store.count(address) == 120
        assert calls <= BOUND, f"{calls:.1f} Python calls per append"
    finally:
        store.close()
