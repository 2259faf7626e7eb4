"""SQLite checks a write's guard before creating its claimed session: equal to create-then-check.

``SqliteStore._check_guard`` is the speed twin of ``SqlStore._check_guard`` (the
oracle, decision 0070): for every state of the session (absent, owned by the
claimant or by another user, unowned, deleted, absent with its owner at the limit),
every token (none, valid, revoked) and every claim the service and the HTTP API
make, both give the same error (or none) and leave the same sessions and rows.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from flowmem.auth import create_token
from flowmem.core import prepare
from flowmem.store import Address, SessionRecord, WriteGuard
from flowmem.store.base import SessionClaim
from flowmem.store.sqlbase import SqlStore
from flowmem.store.sqlite import SqliteStore
from tests.migrated import migrated_sqlite_url

SID = "s"
KEY = Address("session", SID, "chat")
STATES = ("absent", "mine", "theirs", "unowned", "deleted", "at_limit")
TOKENS = ("none", "valid", "revoked")
CLAIMS = ("none", "create", "create_limited", "raw", "existing", "same", "concealed")


def _prepare(store: SqliteStore, state: str, token: str) -> tuple[str | None, float]:
    """Bring ``store`` to ``state``; return the token id and the session's creation time."""
    owners = {"mine": "alice", "theirs": "bob", "unowned": None, "deleted": "alice"}
    created = 0.0
    if state in owners:
        created = 1_700_000_000.5
        store.create_session(SessionRecord(SID, "", owners[state], created_at=created))
        store.append(KEY, prepare({"role": "user", "content": "before"}, 1))
    if state == "deleted":
        store.delete_session(SID)
    if state == "at_limit":
        store.create_session(SessionRecord("other", "", "alice", created_at=1.0))
    token_id = None
    if token != "none":
        token_id = create_token(store, "alice")[1].id
        if token == "revoked":
            store.revoke_token(token_id)
    return token_id, created


def _guard(claim: str, token_id: str | None, created: float) -> WriteGuard:
    claims: dict[str, SessionClaim | None] = {
        "none": None,
        "create": SessionClaim(owner="alice", create=True, created_at=5.0),
        "create_limited": SessionClaim(owner="alice", create=True, limit=1, created_at=5.0),
        "raw": SessionClaim(create=True, created_at=5.0, any_owner=True),
        "existing": SessionClaim(owner="alice"),
        "same": SessionClaim(owner="alice", created_at=created or 9.0),
        "concealed": SessionClaim(owner="alice", create=True, created_at=5.0, conceal=True),
    }
    return WriteGuard(token_id, SID, claims[claim])


def _outcome(store: SqliteStore, guard: WriteGuard, plain: bool) -> tuple[Any, ...]:
    if plain:  # the oracle: create the claimed session, then check
        store._check_guard = SqlStore._check_guard.__get__(store)  # type: ignore[method-assign]
    try:
        appended = store.append(KEY, prepare({"role": "user", "content": "now"}, 2), guard=guard)
        error: tuple[str, str] | None = None
        count = appended.count
    except Exception as exc:  # the error is the outcome compared
        error, count = (type(exc).__name__, str(exc)), -1
    with store._connection() as conn:
        sessions = conn.execute(
            "SELECT id, owner, status, created_at FROM sessions ORDER BY id"
        ).fetchall()
    return error, count, sessions, store.count(KEY)


@pytest.mark.parametrize(("state", "claim"), list(itertools.product(STATES, CLAIMS)))
def test_sqlite_guard_checked_first_equals_create_then_check(
    tmp_path: Path, state: str, claim: str
) -> None:
    for token in TOKENS:
        found = []
        for plain in (False, True):
            # a copy of the migrated template (tests/migrated.py): the guard is what is compared
            url = migrated_sqlite_url(tmp_path / f"{token}-{plain}.db")
            store = SqliteStore(f"{url}?synchronous=NORMAL")
            try:
                token_id, created = _prepare(store, state, token)
                found.append(_outcome(store, _guard(claim, token_id, created), plain))
            finally:
                store.close()
        assert found[0] == found[1], (state, claim, token)


def test_sqlite_append_to_an_existing_session_runs_one_guard_statement(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'g.db'}")
    guard = _guard("create", None, 0.0)
    store.append(KEY, prepare({"role": "user", "content": "creates"}, 1), guard=guard)
    seen: list[str] = []
    with store._connection() as conn:
        conn.set_trace_callback(seen.append)
    try:
        store.append(KEY, prepare({"role": "user", "content": "again"}, 2), guard=guard)
    finally:
        with store._connection() as conn:
            conn.set_trace_callback(None)
        store.close()
    assert not [s for s in seen if s.lstrip().startswith("INSERT INTO sessions")]
    assert len([s for s in seen if "FROM sessions" in s]) == 1
