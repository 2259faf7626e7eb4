"""Python calls per PostgreSQL append, counted (load-independent): a bound that regressions break.

A plain and a guarded single-message append on known facts (decision 0039), the four
kinds of ``bench/store.py``'s conversation in turn (a user turn, a call, its result,
an answer), counted by cProfile: 305 and 308 per append before decisions 0167 and
0168 (87cf6aa), about 232 and 235 after (docs/performance.md); since decision 0182 the
guarded append makes no more calls than the plain one (3 more before: the lock's ids
gathered by a generator).
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


def _calls_per_append(url: str, guarded: bool, session: str = "s1") -> float:
    """Python calls per single-message append on known facts (80 appends after 40 to warm)."""
    from flowmem.auth import create_token
    from flowmem.store.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        guard = None
        if guarded:
            store.create_session(SessionRecord(session, "bench", "bench"))
            _, record = create_token(store, "bench")
            guard = WriteGuard(record.id, session)
        address = Address("session", session, "chat")
        rows = [prepare(_turn(i), 1_755_000_000 + i)[0] for i in range(120)]
        for row in rows[:40]:  # warm: prepared statements, known facts
            store.append(address, [row], guard=guard)
        profile = cProfile.Profile()
        profile.enable()
        for row in rows[40:]:
            store.append(address, [row], guard=guard)
        profile.disable()
        assert store.count(address) == 120
        return float(pstats.Stats(profile).total_calls) / 80  # type: ignore[attr-defined]
    finally:
        store.close()


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
def test_a_single_message_append_makes_at_most_the_bounded_python_calls(
    postgres_store_url: str, guarded: bool
) -> None:
    calls = _calls_per_append(postgres_store_url, guarded)
    assert calls <= BOUND, f"{calls:.1f} Python calls per append"


def test_a_guarded_append_makes_no_more_python_calls_than_a_plain_one(
    postgres_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision 0182: the guard's client part is its parameters, no calls of its own.

    Both write their header on every append (an owned buffer under the bytes quota does,
    decision 0195; a plain one may leave it unwritten, which is not the guard's cost).
    """
    monkeypatch.setattr("flowmem.store.editor.header_skipped", lambda *_: False)
    plain = _calls_per_append(postgres_store_url, False, "free")
    guarded = _calls_per_append(postgres_store_url, True, "owned")
    assert guarded <= plain, f"guarded {guarded:.2f} against plain {plain:.2f} calls per append"
