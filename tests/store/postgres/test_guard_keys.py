"""Decision 0127: a guarded PostgreSQL append holds its guard with advisory keys, not row locks.

The append holds the token's and the session's keys shared from its lock statement to
its commit; a revocation and a session delete take the key exclusively, so each waits
for an append holding it, and an append that comes while one is in progress waits for
it and is then refused, nothing written (decision 0014's property). A connection of
the test stands in for the other side, holding the key as the statements do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from flowmem.core import prepare
from flowmem.errors import AuthenticationError, NotFoundError
from flowmem.store import Address, SessionRecord, WriteGuard

pytestmark = pytest.mark.postgres
psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.postgres.queries import SESSION_KEYS, SQL, TOKEN_KEYS  # noqa: E402

HELD = "SELECT pg_advisory_xact_lock_shared(%s, hashtext(%s))"


@pytest.fixture(params=["known", "plain"])
def store(request: pytest.FixtureRequest, postgres_store_url: str) -> Iterator[PostgresStore]:
    """A store appending on known facts (one round trip) or always reading them (known_buffers=0)."""
    off = "&known_buffers=0" if request.param == "plain" else ""
    opened = PostgresStore(f"{postgres_store_url}{off}")
    yield opened
    opened.close()


def _guarded(store: PostgresStore, session: str) -> tuple[WriteGuard, Address]:
    from flowmem.auth import create_token

    store.create_session(SessionRecord(session, "s", "u1"))
    _, token = create_token(store, "u1")
    address = Address("session", session, "chat")
    guard = WriteGuard(token.id, session)
    store.append(address, prepare({"role": "user", "content": "q"}, 1), guard=guard)
    return guard, address


def _waits(work: threading.Thread) -> bool:
    work.start()
    work.join(0.5)
    return work.is_alive()


def test_a_revocation_waits_for_an_append_holding_its_token(
    store: PostgresStore, postgres_store_url: str
) -> None:
    guard, _ = _guarded(store, "s-revoke-waits")
    with psycopg.connect(postgres_store_url) as append:  # an append between its lock and its commit
        append.execute(HELD, (TOKEN_KEYS, guard.token_id))
        revoking = threading.Thread(target=store.revoke_token, args=(guard.token_id,))
        assert _waits(revoking)
        append.commit()
    revoking.join(10)
    assert not revoking.is_alive()
    assert [t.revoked for t in store.list_tokens() if t.id == guard.token_id] == [True]


def test_a_session_delete_waits_for_an_append_holding_its_session(
    store: PostgresStore, postgres_store_url: str
) -> None:
    guard, _ = _guarded(store, "s-delete-waits")
    with psycopg.connect(postgres_store_url) as append:
        append.execute(HELD, (SESSION_KEYS, guard.session_id))
        deleting = threading.Thread(target=store.delete_session, args=(guard.session_id,))
        assert _waits(deleting)
        append.commit()
    deleting.join(10)
    assert not deleting.is_alive() and store.get_session(str(guard.session_id)) is None


def test_an_append_waits_for_a_revocation_in_progress_and_is_refused(
    store: PostgresStore, postgres_store_url: str
) -> None:
    guard, address = _guarded(store, "s-append-waits")
    refused: list[BaseException] = []

    def late() -> None:
        try:
            store.append(address, prepare({"role": "user", "content": "late"}, 2), guard=guard)
        except AuthenticationError as exc:
            refused.append(exc)

    with psycopg.connect(postgres_store_url) as revoker:  # the revocation, not committed yet
        assert revoker.execute(SQL["token_revoke"], (guard.token_id,)).rowcount == 1
        appending = threading.Thread(target=late)
        assert _waits(appending)
        revoker.commit()
    appending.join(10)
    assert refused and [m["content"] for m in store.load(address)] == ["q"]


def test_an_append_waits_for_a_session_delete_in_progress_and_is_refused(
    store: PostgresStore, postgres_store_url: str
) -> None:
    guard, address = _guarded(store, "s-append-waits-delete")
    refused: list[BaseException] = []

    def late() -> None:
        try:
            store.append(address, prepare({"role": "user", "content": "late"}, 2), guard=guard)
        except NotFoundError as exc:
            refused.append(exc)

    with psycopg.connect(
        postgres_store_url
    ) as deleter:  # the delete's first statement, not committed
        assert deleter.execute(SQL["session_delete"], (guard.session_id,)).fetchone() is not None
        appending = threading.Thread(target=late)
        assert _waits(appending)
        deleter.commit()
    appending.join(10)
    assert refused and not any(m.get("content") == "late" for m in store.load(address))
