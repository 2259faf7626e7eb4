"""Decision 0174: a guarded PostgreSQL append reads its guard's rows once.

The guard's check of an append on known facts (``known_check…@kind``) is one subquery
whose value the verdict uses twice: in ``v`` (the writes run only if the guard held)
and as ``ok`` (the guard's own column, for the error). Pulled up into the verdict, the
subquery became two copies of the check, each an initPlan reading ``tokens`` and
``sessions`` again. Counted here: the index scans of ``tokens`` and ``sessions`` per
guarded append (the server's own statistics), once each; and the verdict of every
guard kind against the rows it checks (the check's meaning unchanged).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.store import Address, SessionRecord, WriteGuard
from flowmem.store.values import SessionClaim

pytestmark = pytest.mark.postgres
psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.postgres.facts import known_statements  # noqa: E402
from flowmem.store.postgres.pipeline import Pipeline  # noqa: E402
from flowmem.store.postgres.queries import GUARDS, SQL  # noqa: E402
from flowmem.store.rows import guard_form  # noqa: E402

CREATED = 1_700_000_000.5
# the bench's conversation: a user turn, a call, its result, an answer (every kind of check)
TURNS = [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c{n}", "name": "weather"}]},
    {"role": "tool", "content": "sunny", "tool_call_id": "c{n}"},
    {"role": "assistant", "content": "sunny"},
]


def _turn(i: int) -> dict[str, Any]:
    """The i-th message of the conversation (call ids numbered by turn)."""
    message = dict(TURNS[i % 4])
    if "tool_calls" in message:
        message["tool_calls"] = [{"id": f"c{i // 4}", "name": "weather"}]
    if "tool_call_id" in message:
        message["tool_call_id"] = f"c{i // 4}"
    return message


@pytest.fixture
def store(postgres_store_url: str) -> Iterator[PostgresStore]:
    """A store with one connection on a pooled schema (for tests that count no statistics)."""
    opened = PostgresStore(f"{postgres_store_url}&pool_min=1&pool_max=1")
    yield opened
    opened.close()


@pytest.fixture
def counted(postgres_db_url: str) -> Iterator[PostgresStore]:
    """A store with one connection on a fresh schema: the appends and the statistics' flush
    share its backend, and no earlier test's backend can report scans of its tables late
    (a pooled schema's tables keep their statistics, which a backend reports as it exits).
    """
    opened = PostgresStore(f"{postgres_db_url}&pool_min=1&pool_max=1")
    yield opened
    opened.close()


def _scans(store: PostgresStore) -> dict[str, int]:
    """The index scans of ``tokens`` and ``sessions`` in this schema so far (the backend's flushed)."""
    with store._connection() as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")  # flushed when the statement ends
        rows = conn.execute(
            """SELECT relname, idx_scan FROM pg_stat_user_tables
            WHERE schemaname = current_schema() AND relname IN ('tokens', 'sessions')"""
        ).fetchall()
    return {str(name): int(count) for name, count in rows}


def _guards(token: str) -> dict[str, tuple[WriteGuard, set[str]]]:
    """A guard of each kind (no claim that creates) and the tables its check reads."""
    same = SessionClaim(owner="u1", created_at=CREATED)
    owned = SessionClaim(owner="u1")
    return {
        "token": (WriteGuard(token), {"tokens"}),
        "session": (WriteGuard(None, "s1"), {"sessions"}),
        "both": (WriteGuard(token, "s1"), {"tokens", "sessions"}),
        "owned": (WriteGuard(None, "s1", owned), {"sessions"}),
        "both_owned": (WriteGuard(token, "s1", owned), {"tokens", "sessions"}),
        "same": (WriteGuard(None, "s1", same), {"sessions"}),
        "both_same": (WriteGuard(token, "s1", same), {"tokens", "sessions"}),
    }


@pytest.mark.parametrize("kind", sorted(GUARDS))
def test_a_guarded_known_append_reads_its_guard_once(counted: PostgresStore, kind: str) -> None:
    """Each table the guard checks is scanned once per append on known facts (twice before 0174)."""
    store = counted
    from flowmem.auth import create_token

    store.create_session(SessionRecord("s1", "s1", "u1", created_at=CREATED))
    _, token = create_token(store, "u1")
    guard, tables = _guards(token.id)[kind]
    assert guard_form(guard)[0] == kind
    address = Address("session", "s1", f"once-{kind}")
    store.append(address, prepare(_turn(0), 1), guard=guard)  # reads the facts: known from here
    before = _scans(store)
    appends = 8
    for i in range(1, appends + 1):
        store.append(address, prepare(_turn(i), 1), guard=guard)
        assert store._known.get(address) is not None  # each on known facts
    after = _scans(store)
    per_append = {name: (after[name] - before[name]) / appends for name in after}
    assert per_append == {name: 1.0 if name in tables else 0.0 for name in after}
    assert len(store.load(address)) == appends + 1


def _truth(conn: Any, kind: str, checks: tuple[Any, ...]) -> bool:
    """Whether the guard holds, read with plain statements (the check's meaning, not its SQL)."""
    session = token = True
    names = {
        "token": ("token",),
        "session": ("session",),
        "both": ("session", "token"),
        "owned": ("session", "owner"),
        "both_owned": ("session", "owner", "token"),
        "same": ("session", "owner", "created"),
        "both_same": ("session", "owner", "created", "token"),
    }[kind]
    given = dict(zip(names, checks, strict=True))
    if "token" in given:
        found = conn.execute(
            "SELECT revoked FROM tokens WHERE id = %s", (given["token"],)
        ).fetchone()
        token = found is not None and not found[0]
    if "session" in given:
        found = conn.execute(
            "SELECT owner, created_at FROM sessions WHERE id = %s", (given["session"],)
        ).fetchone()
        session = found is not None
        if session and "owner" in given:
            session = found[0] == given["owner"]
        if session and "created" in given:
            session = found[1] == given["created"]
    return session and token


def test_every_guard_kinds_verdict_is_its_rows_and_the_facts(store: PostgresStore) -> None:
    """``v`` is the facts and the guard, ``ok`` the guard: for every kind, guard state and head."""
    from flowmem.auth import create_token, revoke_token

    store.create_session(SessionRecord("s1", "s1", "u1", created_at=CREATED))
    _, valid = create_token(store, "u1")
    _, revoked = create_token(store, "u1")
    revoke_token(store, revoked.id)
    address = Address("global", "", "verdicts")
    store.append(address, prepare(_turn(0), 1))
    known = store._known.get(address)
    assert known is not None
    head = (known.buffer_id, known.version, *known.stored())  # as stored (decision 0195)
    stale = (known.buffer_id, known.version + 1, *head[2:])
    tokens = [valid.id, revoked.id, "no-such-token"]
    sessions = [
        ("s1", "u1", CREATED),
        ("s1", "u2", CREATED),
        ("s1", "u1", 1.0),
        ("s2", "u1", CREATED),
    ]
    checked = 0
    with store._connection() as conn:
        for (sid, owner, created), token, facts in itertools.product(
            sessions, tokens, (head, stale)
        ):
            claims = {
                "token": WriteGuard(token),
                "session": WriteGuard(None, sid),
                "both": WriteGuard(token, sid),
                "owned": WriteGuard(None, sid, SessionClaim(owner=owner)),
                "both_owned": WriteGuard(token, sid, SessionClaim(owner=owner)),
                "same": WriteGuard(None, sid, SessionClaim(owner=owner, created_at=created)),
                "both_same": WriteGuard(token, sid, SessionClaim(owner=owner, created_at=created)),
            }
            for kind, guard in claims.items():
                form, checks = guard_form(guard)
                assert form == kind
                holds = _truth(conn, kind, checks)
                for check in ("known_check_head", "known_check"):
                    fresh = (head[0], head[0], head[0], ["c-new"]) if check == "known_check" else ()
                    (name, params), *_ = known_statements(
                        f"{check}@{kind}", (*facts, *fresh, *checks), []
                    )
                    with Pipeline(conn, SQL) as db:
                        db.send("begin", ())
                        found = db.send(name, params)
                        db.send("rollback", ())
                        db.finish()
                        (v, ok), *_ = db.result(found)
                    assert (v, ok) == (holds and facts == head, holds), (kind, check, guard, facts)
                    checked += 1
    assert checked == len(sessions) * len(tokens) * 2 * len(claims) * 2
