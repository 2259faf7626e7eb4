"""``held_lock`` (decision 0182: branches instead of a generator) equals the form it replaced.

The plain twin below is ``held_lock`` as it was before decision 0182; every guard (none,
a token, a session, both, with or without a claim, empty ids included) gets the same
lock statement and the same ids, in the same order (the token first: decision 0127).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("psycopg")

from hypothesis import given
from hypothesis import strategies as st

from flowmem.store import WriteGuard
from flowmem.store.postgres.queries import SQL
from flowmem.store.postgres.store import held_lock
from flowmem.store.values import SessionClaim


def _plain_held_lock(guard: WriteGuard | None) -> tuple[str, tuple[Any, ...]]:
    """``held_lock`` before decision 0182."""
    token = None if guard is None else guard.token_id
    session = None if guard is None else guard.session_id
    held = tuple(i for i in (token, session) if i is not None)
    if not held:
        return "timed_lock", ()
    kind = "both" if len(held) == 2 else ("token" if token is not None else "session")
    return f"timed_lock_held@{kind}", held


_IDS = st.none() | st.text(max_size=8)
_CLAIMS = st.none() | st.builds(SessionClaim, owner=st.none() | st.text(max_size=4))
_GUARDS = st.none() | st.builds(WriteGuard, token_id=_IDS, session_id=_IDS, claim=_CLAIMS)


@given(_GUARDS)
def test_held_lock_equals_its_plain_twin(guard: WriteGuard | None) -> None:
    found = held_lock(guard)
    assert found == _plain_held_lock(guard)
    assert found[0] in SQL


def test_the_token_is_held_before_the_session() -> None:
    assert held_lock(WriteGuard("t", "s")) == ("timed_lock_held@both", ("t", "s"))
    assert held_lock(WriteGuard(None, "")) == ("timed_lock_held@session", ("",))
    assert held_lock(WriteGuard("", None)) == ("timed_lock_held@token", ("",))
    assert held_lock(WriteGuard()) == ("timed_lock", ())
    assert held_lock(None) == ("timed_lock", ())
