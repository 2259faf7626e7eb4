"""``SessionBuffers``: a session's buffers and its lines' heads, the same on every backend, in bounded reads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from flowmem.errors import InvalidInputError
from flowmem.service.conversation import conversations
from flowmem.store import Address, Store, open_store
from flowmem.store.heads import session_buffers_of
from tests.api.langgraph_thread import heal_thread, write_thread

ROW = [{"role": "user", "content": "x"}]


def test_buffers_newest_and_counts_agree_on_every_backend(store: Store) -> None:
    store.append(Address("session", "s1", "chat_history"), ROW * 2)
    store.append(Address("session", "s1", "agent_items"), ROW * 3)
    store.append(Address("session", "s2", "chat_history"), ROW)
    facts = session_buffers_of(store)
    assert [(b.key, b.count) for b in facts.buffers("s1", 10)] == [("agent_items", 3), ("chat_history", 2)]
    assert [b.key for b in facts.buffers("s1", 1)] == ["agent_items"]
    newest = facts.newest(["s1", "s2", "none"])
    assert {sid: (b.key, b.count) for sid, b in newest.items()} == {
        "s1": ("agent_items", 3), "s2": ("chat_history", 1)
    }
    counted = facts.counts([("s1", "chat_history"), ("s2", "chat_history"), ("s2", "gone")])
    assert {k: b.count for k, b in counted.items()} == {("s1", "chat_history"): 2, ("s2", "chat_history"): 1}
    assert counted[("s1", "chat_history")].born < newest["s1"].born
    store.append(Address("session", "s1", "notes"), ROW)
    assert facts.newest(["s1"])["s1"].key == "notes"  # created last
    store.clear(Address("session", "s1", "notes"))
    assert facts.newest(["s1"])["s1"].key == "agent_items"  # a non-empty one first


def test_a_thread_head_is_its_latest_checkpoints_line_on_every_backend(store: Store) -> None:
    write_thread(store, "plain", "alice", ["one"])
    heal_thread(store, "healed", "alice")
    facts = session_buffers_of(store)
    lines = facts.graph_lines(["plain", "healed", "none"])
    assert lines["plain"] == {"langgraph": "langgraph"}
    assert lines["healed"]["langgraph"].startswith("langgraph#")
    assert "none" not in lines
    # lines are no candidates of ``newest``: the thread's head comes from its checkpoint
    assert facts.newest(["healed"]) == {}
    found = conversations(store, ["plain", "healed"])
    assert (found["plain"].messages, found["healed"].messages) == (2, 5)


def test_more_sessions_than_a_page_at_once_are_refused(store: Store) -> None:
    facts = session_buffers_of(store)
    with pytest.raises(InvalidInputError):
        facts.newest([f"s{i}" for i in range(101)])


@pytest.fixture
def sql_store(sql_store_url: str) -> Iterator[Store]:
    """A SQLite or PostgreSQL store."""
    opened = open_store(sql_store_url)
    try:
        yield opened
    finally:
        opened.close()


@contextmanager
def _counting(store: Any) -> Iterator[list[str]]:
    """Count the statements a SQL store runs while the block runs."""
    statements: list[str] = []
    lend = store._connection

    class Counted:
        def __init__(self, conn: Any) -> None:
            self.conn = conn

        def execute(self, sql: str, *args: Any) -> Any:
            statements.append(sql)
            return self.conn.execute(sql, *args)

    @contextmanager
    def connection() -> Iterator[Any]:
        with lend() as conn:
            yield Counted(conn)

    store._connection = connection
    try:
        yield statements
    finally:
        del store._connection


def test_the_conversations_of_a_page_cost_the_same_reads_as_of_one_session(sql_store: Store) -> None:
    for i in range(40):
        write_thread(sql_store, f"t{i}", "alice", ["hi"])
        sql_store.append(Address("session", f"c{i}", "chat_history"), ROW)
    with _counting(sql_store) as one:
        conversations(sql_store, ["t0"])
    ids = [f"t{i}" for i in range(40)] + [f"c{i}" for i in range(40)]
    with _counting(sql_store) as page:
        found = conversations(sql_store, ids)
    # newest, the threads' latest checkpoints and their blobs, conversation heads, counts
    assert len(page) == len(one) == 5
    assert {found[f"t{i}"].buffer for i in range(40)} == {"langgraph"}
    assert {found[f"c{i}"].messages for i in range(40)} == {1}

