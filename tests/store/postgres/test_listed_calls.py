"""PostgreSQL's migration 26 (decision 0153): the header lists the unanswered calls, nothing flags them.

An upgrade from migration 25 keeps every declaration, answer, healed call and
placeholder, and lists the open calls in the header; the rules then run on the list
(MEM-1, MEM-3, MEM-10) as on the index before, checked against the pure ``append``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import append, call_ids, is_healed, prepare, result_id
from flowmem.core.tokens import estimate_tokens
from flowmem.store import Address
from flowmem.store.rows import utf8_size

psycopg = pytest.importorskip("psycopg")

from flowmem.store.editor import MINOR_BITS, dump_row  # noqa: E402
from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from tests.store.carried_cases import appended_messages  # noqa: E402
from tests.store.postgres.carried import layout_faults  # noqa: E402

pytestmark = pytest.mark.postgres

ADDRESS = Address("user", "alice", "chat")


def _call(cid: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": cid, "function": {"name": "f", "arguments": "{}"}}],
    }


# answered (c_ans), healed by the next user turn (c_heal, its placeholder stored), and open (c_open, c_two)
BEFORE: list[dict[str, Any]] = [
    {"role": "user", "content": "hi"},
    _call("c_ans"),
    {"role": "tool", "content": "sunny", "tool_call_id": "c_ans"},
    _call("c_heal"),
    {"role": "user", "content": "next"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c_open", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c_two", "function": {"name": "g", "arguments": "{}"}},
        ],
    },
]


def _at_25(conn: psycopg.Connection[Any], rows: list[dict[str, Any]]) -> None:
    """A database at migration 25 holding ``rows`` as flowmem wrote them then: flags and the open-calls index."""
    conn.execute(PostgresStore.SQL["schema_table"])
    for number, statements in enumerate(MIGRATIONS[:25], start=1):
        for statement in statements:
            conn.execute(statement)
        conn.execute(PostgresStore.SQL["schema_insert"], (number, time.time()))
    bid = conn.execute(
        "INSERT INTO buffers (scope, scope_id, key) VALUES (%s, %s, %s) RETURNING id",
        tuple(ADDRESS),
    ).fetchone()[0]  # type: ignore[index]
    answered = {rid for row in rows if (rid := result_id(row)) is not None}
    size = tokens = 0
    for n, row in enumerate(rows, start=1):
        pos, body = n << MINOR_BITS, dump_row(row)
        conn.execute(
            "INSERT INTO buffer_rows (buffer_id, pos, role, body, tokens) VALUES (%s, %s, %s, %s, %s)",
            (bid, pos, row["role"], body, estimate_tokens(row)),
        )
        for order, cid in enumerate(call_ids(row)):
            conn.execute(
                "INSERT INTO buffer_calls (buffer_id, call_id, declared_pos, ord, answered) VALUES (%s, %s, %s, %s, %s)",
                (bid, cid, pos, order, cid in answered),
            )
        rid = result_id(row)
        if rid is not None:
            conn.execute(
                "INSERT INTO buffer_answers (buffer_id, call_id, pos, healed) VALUES (%s, %s, %s, %s)",
                (bid, rid, pos, is_healed(row)),
            )
        size += utf8_size(body)
        tokens += estimate_tokens(row)
    conn.execute(
        "UPDATE buffers SET count = %s, last_major = %s, bytes = %s, tokens = %s WHERE id = %s",
        (len(rows), len(rows), size, tokens, bid),
    )


def test_mem_3_an_upgrade_from_25_lists_the_open_calls_and_keeps_every_answer_heal_and_placeholder(
    postgres_db_url: str,
) -> None:
    stored = append([], prepare(BEFORE, 1)).messages  # the healed placeholder of c_heal among them
    assert [result_id(r) for r in stored if is_healed(r)] == ["c_heal"]
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        _at_25(conn, stored)
    store = PostgresStore(postgres_db_url)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            listed = conn.execute("SELECT unanswered FROM buffers").fetchone()[0]  # type: ignore[index]
            indexes = {r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'buffer_calls' AND schemaname = current_schema()"
            )}  # fmt: skip
            kept = conn.execute(
                "SELECT call_id, declared_pos FROM buffer_calls ORDER BY declared_pos, ord"
            ).fetchall()
            answers = conn.execute(
                "SELECT call_id, healed FROM buffer_answers ORDER BY pos"
            ).fetchall()
        assert [entry[:1] + entry[2:] for entry in json.loads(listed)] == [
            ["c_open", 0],
            ["c_two", 1],
        ]
        assert [e[1] for e in json.loads(listed)] == [7 << MINOR_BITS] * 2
        assert "buffer_calls_open" not in indexes
        # since migration 34 (decision 0190) an open call is listed only: no row of its own
        assert [c for c, _ in kept] == ["c_ans", "c_heal"]
        assert answers == [("c_ans", False), ("c_heal", True)]
        assert store.load(ADDRESS) == stored
        # then the rules on the list: a duplicate result dropped (MEM-1), the placeholder
        # replaced by the real result (MEM-10), the open calls healed by a user turn (MEM-3)
        later = [
            {"role": "tool", "content": "again", "tool_call_id": "c_ans"},
            {"role": "tool", "content": "late", "tool_call_id": "c_heal"},
            {"role": "tool", "content": "two", "tool_call_id": "c_two"},
            {"role": "user", "content": "and now?"},
        ]
        expected = stored
        for n, message in enumerate(later, start=2):
            rows = prepare([message], n)
            store.append(ADDRESS, rows)
            expected = append(expected, rows).messages
            assert store.load(ADDRESS) == expected
        assert [result_id(r) for r in expected if is_healed(r)] == ["c_open"]
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert conn.execute("SELECT unanswered FROM buffers").fetchone()[0] == "[]"  # type: ignore[index]
        assert store.check_integrity() == []
    finally:
        store.close()


def test_mem_3_a_call_answered_and_unanswered_again_is_listed_again_and_healed(
    postgres_store_url: str,
) -> None:
    """A result's removal (the last row popped) puts its call's declaration back on the list."""
    store = PostgresStore(postgres_store_url)
    try:
        store.append(
            ADDRESS,
            prepare([_call("c1"), {"role": "tool", "content": "r", "tool_call_id": "c1"}], 1),
        )
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            assert conn.execute("SELECT unanswered FROM buffers").fetchone()[0] == "[]"  # type: ignore[index]
        store.pop_last(ADDRESS)
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            listed = json.loads(conn.execute("SELECT unanswered FROM buffers").fetchone()[0])  # type: ignore[index]
        assert listed == [["c1", 1 << MINOR_BITS, 0]]
        store.append(ADDRESS, prepare([{"role": "user", "content": "u"}], 2))  # heals it (MEM-3)
        rows = store.load(ADDRESS)
        assert [(r["role"], is_healed(r)) for r in rows] == [
            ("assistant", False),
            ("tool", True),
            ("user", False),
        ]
    finally:
        store.close()


_MESSAGE = appended_messages(st.sampled_from(["a", "b", "c", "d"]))


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    appends=st.lists(st.lists(_MESSAGE, min_size=1, max_size=3), min_size=1, max_size=12),
    window=st.sampled_from([0, 0, 4]),
)
def test_mem_3_the_header_lists_exactly_the_declarations_without_an_answer(
    postgres_store_url: str, appends: list[list[dict[str, Any]]], window: int
) -> None:
    """After any appends (heals, duplicates, a window's evictions) the list is the open declarations, and the buffer the pure append's."""
    store = PostgresStore(postgres_store_url)
    address = Address(
        "user", "alice", f"prop-{uuid.uuid4().hex[:8]}"
    )  # one database for every example
    try:
        expected: list[dict[str, Any]] = []
        evicted: tuple[str, ...] = ()
        for n, messages in enumerate(appends, start=1):
            rows = prepare(messages, n)
            store.append(address, rows, max_messages=window)
            done = append(expected, rows, max_messages=window, evicted=evicted)
            expected, evicted = done.messages, done.evicted
            with psycopg.connect(postgres_store_url, autocommit=True) as conn:
                listed = conn.execute(
                    "SELECT id, unanswered FROM buffers WHERE scope = %s AND scope_id = %s AND key = %s",
                    tuple(address),
                ).fetchone()
                assert listed is not None
                # since migration 34 (decision 0190) the list is an open call's only entry: the
                # oracle recomputes the list and the rows from the buffer's rows
                faults = layout_faults(conn)
            assert faults == []
            assert store.load(address) == expected
    finally:
        store.close()
