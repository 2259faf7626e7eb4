"""An append on known facts: its check folded into the writes' statement (decision 0165).

``known_statements`` groups the writes as ``Pipeline.run`` would send them (its
oracle here: the pipeline itself, fed the same writes), puts the check first in the
first statement and its verdict last; the later statements read the verdict the
check set. On a server: the statements per append, the writes split over two
statements landing whole when the facts held and not at all when they did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import prepare
from flowmem.store import Address

pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore
from flowmem.store.postgres.facts import known_statements
from flowmem.store.postgres.pipeline import Pipeline
from flowmem.store.postgres.queries import SQL

# PostgreSQL's foreseeable writes (an answer is its row since migration 35, decision 0194)
FORESEEN = ["row_insert", "call_insert", "header_update", "header_listed"]


def _as_the_pipeline_sends(
    writes: Sequence[tuple[str, Sequence[Any]]],
) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements ``Pipeline.run`` sends for the writes' ``?`` variants (no server)."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    db = Pipeline.__new__(Pipeline)
    db.held, db.held_params, db.held_reads, db.held_writes = [], [], set(), set()
    db._send = lambda name, params: sent.append((name, tuple(params)))  # type: ignore[method-assign]
    for name, params in writes:
        db.run(f"{name}?", params)
    db._release()
    return sent


@given(
    st.lists(st.sampled_from(FORESEEN), max_size=8),
    st.sampled_from(["known_check", "known_check_head@both"]),
)
def test_the_writes_are_grouped_as_the_pipeline_groups_them_the_check_first(
    names: list[str], check: str
) -> None:
    writes = [(name, (n, name)) for n, name in enumerate(names)]
    found = known_statements(check, ("c1", "c2"), writes)
    piped = _as_the_pipeline_sends(writes)
    first, *later = found
    assert first[0].startswith(f"{check}+") and first[0].endswith("+known_verdict")
    assert first[1][:2] == ("c1", "c2")
    # the same writes in the same statements, in order, with their parameters
    groups = [name.split("+")[1:] for name, _ in found]
    groups[0] = groups[0][:-1]  # known_verdict
    assert all(name.startswith("known_again+") for name, _ in later)
    if piped:
        assert groups == [name.split("+") for name, _ in piped]
        assert [params for _, params in found] == [
            (("c1", "c2") if n == 0 else ()) + params for n, (_, params) in enumerate(piped)
        ]
    else:
        assert found == [(f"{check}+known_verdict", ("c1", "c2"))]


def test_every_check_and_write_has_its_part_form() -> None:
    """Each check's CTE is lifted (``/with``); every ``?`` write reads it, none the setting."""
    checks = [name for name in SQL if name.startswith("known_check") and "/" not in name]
    assert {"known_check", "known_check_head", "known_check@both", "known_check_head@both"} <= set(
        checks
    )
    for check in checks:
        assert SQL[f"{check}/with"].startswith(
            "known AS MATERIALIZED (SELECT set_config('flowmem.known'"
        )
    for name in FORESEEN:
        text = SQL.get(f"{name}?", "") + SQL.get(f"{name}?/with", "") + SQL.get(f"{name}?/main", "")
        assert "(SELECT v FROM known)" in text and "current_setting" not in text, name


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the statements the pipelines send."""
    names: list[str] = []
    send = Pipeline._send

    def recorded(self: Pipeline, name: str, params: Any) -> int:
        names.append(name)
        return send(self, name, params)

    monkeypatch.setattr(Pipeline, "_send", recorded)
    return names


def _call_rows(store: PostgresStore, address: Address) -> list[tuple[Any, ...]]:
    with store._connection() as conn:
        return conn.execute(
            """SELECT a.call_id, r.declared_pos, a.pos FROM buffer_answers a
                JOIN buffer_rows r ON r.buffer_id = a.buffer_id AND r.pos = a.pos
                JOIN buffers b ON b.id = a.buffer_id WHERE b.key = %s
            UNION ALL SELECT c.call_id, c.declared_pos, NULL FROM buffer_call_ids c
                JOIN buffers b ON b.id = c.buffer_id WHERE b.key = %s ORDER BY 1""",
            (address.key, address.key),
        ).fetchall()


TWO_CALLS = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "name": "f"}, {"id": "c2", "name": "f"}],
}


def test_a_known_append_is_the_lock_and_one_statement(
    two: tuple[PostgresStore, PostgresStore], sent: list[str]
) -> None:
    """The check is the first part of the writes' statement: two statements, not three.

    A plain append writes its row alone, no header (decision 0195).
    """
    first, _ = two
    address = Address("global", "", "one-statement")
    first.append(address, prepare({"role": "user", "content": "q"}, 1))
    sent.clear()
    got = first.append(address, prepare({"role": "assistant", "content": "a"}, 1))
    assert (got.appended, got.count) == (1, 2)
    assert len(sent) == 2 and sent[0].startswith("timed_lock"), sent
    assert sent[1] == "known_check_head+row_insert?+known_verdict", sent


TWO_RESULTS = [
    {"role": "tool", "content": "r1", "tool_call_id": "c1"},
    {"role": "tool", "content": "r2", "tool_call_id": "c2"},
]


def test_writes_split_over_two_statements_all_land_when_the_facts_held(
    two: tuple[PostgresStore, PostgresStore], sent: list[str]
) -> None:
    """Two answers (one table, two statements): the later one reads the verdict the check set.

    Since migration 34 (decision 0190) a declaration of an open call writes no row (the
    header lists it); since 35 (decision 0194) each answer is its row, carrying its declaration.
    """
    first, _ = two
    address = Address("global", "", "split-held")
    first.append(address, prepare({"role": "user", "content": "q"}, 1))
    first.append(address, prepare(TWO_CALLS, 1))
    assert _call_rows(first, address) == []  # listed only
    sent.clear()
    got = first.append(address, prepare(TWO_RESULTS, 1))
    assert (got.appended, got.count) == (2, 4)
    assert sent[1].startswith("known_check") and sent[2].startswith(
        "known_again+row_insert?"
    ), sent
    assert len(sent) == 3, sent
    (c1, at1, answer1), (c2, at2, answer2) = _call_rows(first, address)
    assert (c1, c2) == ("c1", "c2") and at1 == at2 and None not in (at1, answer1, answer2)
    assert answer1 < answer2
    known = first._known.get(address)
    assert known is not None and known.open == frozenset()


def test_writes_split_over_two_statements_write_nothing_when_a_fact_went_stale(
    two: tuple[PostgresStore, PostgresStore], sent: list[str], postgres_store_url: str
) -> None:
    """Another process answered c2: the check fails, neither statement writes; the plain path appends."""
    first, second = two
    address = Address("global", "", "split-stale")
    first.append(address, prepare({"role": "user", "content": "q"}, 1))
    first.append(address, prepare(TWO_CALLS, 1))
    second.append(address, prepare(TWO_RESULTS[1], 1))
    sent.clear()
    # on its stale facts c1 and c2 are open: c2's second answer is dropped on the buffer (MEM-1)
    got = first.append(address, prepare(TWO_RESULTS, 1))
    assert sent[1].startswith("known_check") and sent[2].startswith("known_again+"), sent
    assert any(name.startswith("append_facts") for name in sent[3:]), sent  # the plain path
    # the same appends by a store that knows nothing (the plain path alone): the same buffer
    plain = PostgresStore(f"{postgres_store_url}&known_buffers=0")
    try:
        oracle = Address("global", "", "split-stale-plain")
        plain.append(oracle, prepare({"role": "user", "content": "q"}, 1))
        plain.append(oracle, prepare(TWO_CALLS, 1))
        plain.append(oracle, prepare(TWO_RESULTS[1], 1))
        expected = plain.append(oracle, prepare(TWO_RESULTS, 1))
        assert (got.appended, got.count) == (expected.appended, expected.count) == (1, 4)
        assert first.load(address) == plain.load(oracle)
        assert _call_rows(first, address) == _call_rows(
            plain, oracle
        )  # nothing more of the known path's writes
    finally:
        plain.close()
    assert first._known.get(address) is not None


def test_a_guarded_known_append_checks_its_guard_in_the_writes_statement(
    two: tuple[PostgresStore, PostgresStore], sent: list[str]
) -> None:
    """The guard's check is in the same statement (under the locks): a revoked token writes nothing."""
    from flowmem.auth import create_token, revoke_token
    from flowmem.errors import AuthenticationError
    from flowmem.store.base import SessionRecord, WriteGuard

    first, _ = two
    first.create_session(SessionRecord("s1", "s1", "u1"))
    _, token = create_token(first, "u1")
    guard = WriteGuard(token.id, "s1")
    address = Address("session", "s1", "guarded")
    first.append(address, prepare({"role": "user", "content": "q"}, 1), guard=guard)
    sent.clear()
    first.append(address, prepare({"role": "assistant", "content": "a"}, 1), guard=guard)
    assert len(sent) == 2 and sent[1].startswith("known_check_head@both+"), sent
    revoke_token(first, token.id)
    with pytest.raises(AuthenticationError):
        first.append(address, prepare({"role": "user", "content": "again"}, 1), guard=guard)
    assert [m["content"] for m in first.load(address)] == ["q", "a"]
