"""PostgreSQL appends decided on known facts, in one round trip (decision 0039).

The seam is ``known_buffers`` (on by default, ``known_buffers=0`` off). The
proofs: random histories written by two stores in turn, so that each one's
knowledge is often stale, load exactly what the core's pure ``append`` returns,
pops and clears included; what a store knows after its append is what the
buffer holds; a stale fact writes nothing. The rules on known facts without a
database: tests/store/test_known.py.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import Message, append, call_ids, prepare, result_id
from flowmem.errors import ConfigurationError
from flowmem.store import Address
from flowmem.store.known import MAX_KNOWN_OPEN, Known
from tests.store.test_same_rules import MESSAGE, SETTINGS

pytestmark = pytest.mark.postgres

pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore, parse_url  # noqa: E402
from flowmem.store.postgres.facts import known_of  # noqa: E402
from flowmem.store.postgres.queries import SQL  # noqa: E402

_keys = itertools.count()


def _truth(store: PostgresStore, address: Address) -> tuple[int, frozenset[str]]:
    """The buffer's row count and unanswered call ids, from its rows (not from any index)."""
    rows = store.load(address)
    answered = {rid for row in rows if (rid := result_id(row)) is not None}
    declared = {cid for row in rows for cid in call_ids(row)}
    return len(rows), frozenset(declared - answered)


def _read_known(store: PostgresStore, address: Address) -> Known | None:
    """What ``buffer_known`` reads of the buffer now (the statement known_after spares)."""
    with store._connection() as conn:
        return known_of(conn.execute(SQL["buffer_known"], tuple(address)).fetchall())


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["first", "second"]),
        st.one_of(
            st.lists(MESSAGE, min_size=1, max_size=3).map(lambda batch: ("append", batch)),
            st.just(("pop", None)),
            st.just(("clear", None)),
        ),
    ),
    min_size=1,
    max_size=14,
)


@SETTINGS
@given(steps=STEPS, window=st.sampled_from([0, 0, 0, 4]), owned=st.booleans())
def test_mem_1_2_3_10_14_two_stores_in_turn_equal_the_pure_append(
    two: tuple[PostgresStore, PostgresStore],
    steps: list[tuple[str, tuple[str, Any]]],
    window: int,
    owned: bool,
) -> None:
    """Stale knowledge never reaches the rules: every step equals the pure append's.

    Owned by a user under the default bytes quota (the header written on every change), or
    by nobody (a plain append may leave it unwritten, decision 0195: the other store's
    known position is then taken, and the rows' key sends it to the facts path).
    """
    stores = dict(zip(("first", "second"), two, strict=True))
    address = Address(*(("user", "7") if owned else ("global", "")), f"k{next(_keys)}")
    pure: list[Message] = []
    evicted: tuple[str, ...] = ()  # what the window evicted, remembered (MEM-1, MEM-2)
    for who, (action, batch) in steps:
        store = stores[who]
        if action == "pop":
            popped = store.pop_last(address)
            assert popped == (pure.pop() if pure else None)
        elif action == "clear":
            store.clear(address)
            pure, evicted = [], ()
        else:
            expected = append(pure, batch, max_messages=window, now=1, evicted=evicted)
            got = store.append(address, prepare(batch, 1), window)
            pure, evicted = expected.messages, expected.evicted
            assert (got.appended, got.count) == (expected.appended, expected.count)
            known = store._known.get(address)
            if known is not None:  # what it knows now is what the buffer holds
                assert (known.count, known.open) == _truth(store, address)
                # ... and what buffer_known reads, the oracle of known_after (0066)
                assert known == _read_known(store, address)
        assert store.load(address) == pure


def test_a_stale_fact_writes_nothing_and_the_append_is_still_right(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two
    address = Address("global", "", "stale")
    first.append(address, prepare({"role": "user", "content": "q"}, 1))
    calls = [{"id": "c1", "name": "f"}]
    first.append(address, prepare({"role": "assistant", "content": "", "tool_calls": calls}, 1))
    stale = first._known.get(address)
    assert stale is not None and stale.open == {"c1"}
    # the other process answers c1 and declares c2: first's facts are stale
    second.append(address, prepare({"role": "tool", "content": "r", "tool_call_id": "c1"}, 1))
    second.append(
        address,
        prepare({"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "name": "f"}]}, 1),
    )
    # on its stale facts c1 would be open and c2 new: a second result for c1 and
    # a repeated declaration of c2 are both duplicates on the real buffer
    got = first.append(
        address,
        prepare(
            [
                {"role": "tool", "content": "again", "tool_call_id": "c1"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "name": "f"}]},
            ],
            1,
        ),
    )
    assert (got.appended, got.count) == (0, 4)
    assert [m["content"] for m in first.load(address)] == ["q", "", "r", ""]
    now = first._known.get(address)
    assert now is not None and now.version > stale.version and now.open == {"c2"}


def test_an_append_that_assumes_no_new_id_checks_the_header_alone_and_a_stale_one_writes_nothing(
    two: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision 0158: ``append_known_head`` (no subplan per id) unless an id is assumed new."""
    from flowmem.store.postgres.pipeline import Pipeline

    sent: list[str] = []
    send = Pipeline._send

    def recorded(self: Pipeline, name: str, params: Any) -> int:
        sent.append(name)
        return send(self, name, params)

    monkeypatch.setattr(Pipeline, "_send", recorded)
    first, second = two
    address = Address("global", "", "head")
    first.append(address, prepare({"role": "user", "content": "q"}, 1))
    calls = [{"id": "c1", "name": "f"}]
    sent.clear()
    first.append(address, prepare({"role": "assistant", "content": "", "tool_calls": calls}, 1))
    # the check folded into the writes' first statement (decision 0165)
    assert any(name.startswith("known_check+") for name in sent)  # c1 assumed new: checked absent
    sent.clear()
    first.append(address, prepare({"role": "tool", "content": "r", "tool_call_id": "c1"}, 1))
    assert any(name.startswith("known_check_head+") for name in sent)
    assert not any(name.startswith("known_check+") for name in sent)
    second.append(address, prepare({"role": "assistant", "content": "a"}, 1))
    sent.clear()  # first's header is stale: its check fails, nothing written, the plain path appends
    got = first.append(address, prepare({"role": "user", "content": "q2"}, 1))
    assert any(name.startswith("known_check_head+") for name in sent)
    assert any(name.startswith("append_facts") for name in sent)
    assert (got.appended, got.count) == (1, 5)
    assert [m["content"] for m in first.load(address)] == ["q", "", "r", "a", "q2"]


def test_a_writer_that_leaves_the_version_alone_is_still_seen(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    """A flowmem from before migration 6 (a rolling upgrade) writes without the version."""
    first, second = two
    address = Address("global", "", "old-writer")
    calls = [{"id": "c1", "name": "f"}]
    first.append(address, prepare({"role": "user", "content": "q"}, 1))
    first.append(address, prepare({"role": "assistant", "content": "", "tool_calls": calls}, 1))
    known = first._known.get(address)
    assert known is not None and known.open == {"c1"}
    second.append(address, prepare({"role": "tool", "content": "r", "tool_call_id": "c1"}, 1))
    with second._connection() as conn:  # as the old writer left it: the version unchanged
        conn.execute(
            "UPDATE buffers SET version = %s WHERE id = %s", (known.version, known.buffer_id)
        )
    # on first's facts c1 would be open: a second result would be appended
    got = first.append(
        address, prepare({"role": "tool", "content": "again", "tool_call_id": "c1"}, 1)
    )
    assert (got.appended, got.count) == (0, 3)
    assert [m["content"] for m in first.load(address)] == ["q", "", "r"]


def test_a_buffer_with_more_open_calls_than_kept_is_not_remembered(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    store, _ = two
    address = Address("global", "", "many-open")
    calls = [{"id": f"c{n}", "name": "f"} for n in range(MAX_KNOWN_OPEN + 1)]
    store.append(
        address, prepare({"role": "assistant", "content": "", "tool_calls": calls[:-1]}, 1)
    )
    known = store._known.get(address)
    assert known is not None and len(known.open) == MAX_KNOWN_OPEN
    store.append(
        address, prepare({"role": "assistant", "content": "", "tool_calls": calls[-1:]}, 1)
    )
    assert store._known.get(address) is None  # its appends take the plain path
    got = store.append(address, prepare({"role": "user", "content": "next"}, 1))
    assert (got.appended, got.count) == (1, 2 + len(calls) + 1)  # both turns, every call healed
    assert store._known.get(address) is not None and not store._known.get(address).open


def test_known_buffers_off_remembers_nothing(postgres_store_url: str) -> None:
    store = PostgresStore(f"{postgres_store_url}&known_buffers=0")
    try:
        address = Address("global", "", "off")
        store.append(address, prepare({"role": "user", "content": "q"}, 1))
        assert store._known.get(address) is None
        assert [m["content"] for m in store.load(address)] == ["q"]
    finally:
        store.close()


@pytest.mark.parametrize("value", ["-1", "1.5", "many"])
def test_known_buffers_must_be_a_whole_number_at_least_zero(value: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(f"postgresql://u@h/db?known_buffers={value}")


def test_parse_url_strips_known_buffers_before_connecting() -> None:
    conninfo, options = parse_url("postgresql://u@h/db?known_buffers=10&sslmode=disable")
    assert "known_buffers" not in conninfo and options["known_buffers"] == 10


def test_a_guarded_append_on_known_facts_refuses_a_revoked_token_and_writes_nothing(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    """The HTTP API's appends take the one-round-trip path too (decision 0067): the guard still holds."""
    from flowmem.auth import create_token, revoke_token
    from flowmem.errors import AuthenticationError
    from flowmem.store import SessionRecord, WriteGuard

    store, other = two
    store.create_session(SessionRecord("guarded-known", "s", "u1"))
    _, token = create_token(store, "u1")
    guard = WriteGuard(token.id, "guarded-known")
    address = Address("session", "guarded-known", "chat")
    store.append(address, prepare({"role": "user", "content": "q"}, 1), guard=guard)
    store.append(address, prepare({"role": "assistant", "content": "a"}, 1), guard=guard)
    known = store._known.get(address)
    assert known is not None and known.count == 2  # the next append goes on known facts
    revoke_token(other, token.id)  # another process revokes it
    with pytest.raises(AuthenticationError):
        store.append(address, prepare({"role": "user", "content": "late"}, 1), guard=guard)
    assert [m["content"] for m in store.load(address)] == ["q", "a"]
    assert other.usage("u1").bytes == sum(len(b) for b in _bodies(store, address))


def test_a_guarded_append_on_known_facts_refuses_a_deleted_session(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    from flowmem.errors import NotFoundError
    from flowmem.store import SessionRecord, WriteGuard

    store, other = two
    store.create_session(SessionRecord("gone-known", "s", "u2"))
    guard = WriteGuard(None, "gone-known")
    address = Address("session", "gone-known", "chat")
    store.append(address, prepare({"role": "user", "content": "q"}, 1), guard=guard)
    assert store._known.get(address) is not None
    other.delete_session("gone-known")
    with pytest.raises(NotFoundError):
        store.append(address, prepare({"role": "user", "content": "late"}, 1), guard=guard)
    assert store.load(address) == []


def _bodies(store: PostgresStore, address: Address) -> list[bytes]:
    """The stored bodies of a buffer, as UTF-8 (what the quota triggers count)."""
    with store._connection() as conn:
        found = conn.execute(
            "SELECT r.body FROM buffer_rows r JOIN buffers b ON b.id = r.buffer_id"
            " WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s",
            tuple(address),
        ).fetchall()
    return [str(row[0]).encode() for row in found]
