"""A LangGraph step's writes at once on PostgreSQL (decision 0201): the plain path's rows and errors.

``PostgresCheckpoints.at_once`` sends a step in fewer statements: a write on remembered
facts without the session's claim, its guard and lock as one statement and its rows,
header, blobs and checkpoint as one; a task's pending writes as one insert under the guard,
without the claim of a session this store claimed before. The same script of checkpoint
writes (lines, blobs, pending writes that keep the first or replace, the session deleted,
another user's thread, a session gone and forgotten) runs on two stores, one each way: the
tables and every error are the same, and the at-once store sent fewer statements.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService, kinds
from flowmem.store.checkpoints import (
    LINE_PREFIX,
    CheckpointPut,
    Head,
    LineAppend,
    PendingWrites,
    StoredBlob,
    StoredCheckpoint,
    StoredWrite,
)

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.postgres import checkpoints as pg_checkpoints  # noqa: E402
from flowmem.store.postgres.checkpoints import AT_ONCE_ROWS  # noqa: E402
from flowmem.store.postgres.pipeline import Pipeline  # noqa: E402

ANN, BOB = ExecutionContext(user_id="ann"), ExecutionContext(user_id="bob")
TABLES = {
    "lg_checkpoints": "SELECT * FROM lg_checkpoints ORDER BY 1, 2, 3",
    "lg_blobs": "SELECT * FROM lg_blobs ORDER BY 1, 2, 3, 4",
    "lg_writes": "SELECT * FROM lg_writes ORDER BY 1, 2, 3, 4, 5",
    "buffers": """SELECT scope, scope_id, key, count, last_major, bytes, version, tokens,
        unanswered, owner FROM buffers ORDER BY 1, 2, 3""",
    "buffer_rows": """SELECT b.scope_id, b.key, r.pos, r.role, r.body, r.tokens FROM buffer_rows r
        JOIN buffers b ON b.id = r.buffer_id ORDER BY 1, 2, 3""",
    "sessions": "SELECT id, owner, status, created_at FROM sessions ORDER BY 1",
    "deleted_sessions": "SELECT id FROM deleted_sessions ORDER BY 1",
}


class Sent:
    """Statements the pipelines sent (``Pipeline._send``), counted while installed."""

    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Count every statement a pipeline sends."""
    counter = Sent()
    original = Pipeline._send

    def counted(self: Pipeline, name: str, params: Any) -> int:
        counter.count += 1
        return original(self, name, params)

    monkeypatch.setattr(Pipeline, "_send", counted)
    return counter


@pytest.fixture
def stores(postgres_store_url: str, postgres_db_url: str) -> Iterator[list[PostgresStore]]:
    """Two stores on schemas of their own."""
    opened = [PostgresStore(postgres_store_url), PostgresStore(postgres_db_url)]
    try:
        yield opened
    finally:
        for store in opened:
            store.close()


def _checkpoint(thread: str, n: int) -> StoredCheckpoint:
    return StoredCheckpoint(
        thread_id=thread,
        ns="",
        checkpoint_id=f"cp-{n:03d}",
        parent_id=None if n == 0 else f"cp-{n - 1:03d}",
        checkpoint=("json", f'{{"n": {n}}}'.encode()),
        metadata=("json", b'{"source": "loop"}'),
        run_id="run-1",
        versions={"messages": f"{n:010d}.0", "agent": f"{n:010d}.1"},
    )


def _blobs(n: int) -> list[StoredBlob]:
    made = [StoredBlob("messages", f"{n:010d}.0", ("flowmem.rows", b'{"key": "langgraph"}'))]
    made += [
        StoredBlob(f"ch{c}", f"{n:010d}.{c}", ("msgpack", bytes([n, c, 0]))) for c in range(n % 4)
    ]
    if n == 5:  # more than one at-once statement takes
        return [
            StoredBlob(f"c{c}", f"{n:010d}.{c}", ("msgpack", bytes([c])))
            for c in range(AT_ONCE_ROWS + 3)
        ]
    return made[: n % 4]  # none, one, two or three blobs


def _writes(n: int) -> list[StoredWrite]:
    value = ("msgpack", bytes([n]))
    if n % 5 == 1:  # two channels of one task
        return [
            StoredWrite("task-a", 0, "messages", value),
            StoredWrite("task-a", 1, "agent", value, "p"),
        ]
    if n % 5 == 2:  # one index twice: the first is kept
        return [
            StoredWrite("task-a", 0, "x", value),
            StoredWrite("task-a", 0, "y", (*value[:1], b"2")),
        ]
    if n % 5 == 3:  # a special channel's write replaces (LangGraph's ERROR: -1)
        return [StoredWrite("task-b", -1, "__error__", value), StoredWrite("task-b", 0, "m", value)]
    if n % 5 == 4:
        return []
    if n == 10:  # more than one at-once statement takes
        return [StoredWrite("task-d", i, f"c{i}", value) for i in range(AT_ONCE_ROWS + 2)]
    return [StoredWrite("task-c", 0, "messages", value)]


def _outcome(run: Any) -> str:
    try:
        run()
    except Exception as exc:  # the error as a user sees it
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def _script(store: PostgresStore, at_once: bool) -> list[str]:
    """The same writes on ``store``, each path; every outcome in order."""
    memory = MemoryService(store, clock=lambda: 1_700_000_000.0)
    tables = kinds.checkpoints(memory)
    assert isinstance(tables, pg_checkpoints.PostgresCheckpoints)
    tables.at_once = at_once
    outcomes: list[str] = []
    counts: dict[str, int] = {}

    def step(thread: str, context: ExecutionContext, n: int) -> None:
        guard = memory.session_claim(thread, context)
        done = counts.get(thread, 0)
        if n:
            pending = PendingWrites(thread, "", f"cp-{n - 1:03d}", _writes(n), guard)
            outcomes.append(_outcome(lambda: tables.put_writes(pending)))
        rows = [{"role": "user" if n % 3 == 0 else "assistant", "content": f"{thread} {n}"}]
        rows += [{"role": "assistant", "content": "and more"}] * (n % 2)
        line = LineAppend(LINE_PREFIX, done, rows)
        head = Head(None if n == 0 else f"cp-{n - 1:03d}")
        put = CheckpointPut(_checkpoint(thread, n), _blobs(n), [line], guard, head)
        outcome = _outcome(lambda: tables.put_checkpoint(put))
        if outcome == "ok":
            counts[thread] = done + len(rows)
        outcomes.append(outcome)

    for n in range(8):
        step("t1", ANN, n)
    for n in range(3):
        step("t2", BOB, n)
    step("t2", ANN, 3)  # another user's thread, claimed by this store before: refused
    step("t1", ANN, 8)
    with store.connection() as conn:  # the thread's session deleted
        conn.execute("INSERT INTO deleted_sessions (id, deleted_at) VALUES ('t1', 1)")
        conn.execute("DELETE FROM sessions WHERE id = 't1'")
        conn.commit()
    step("t1", ANN, 9)
    step("t1", ANN, 10)
    step("t1", ANN, 10)  # refused with more writes than one statement takes
    for n in range(3):
        step("t3", ANN, n)
    with store.connection() as conn:  # gone, and forgotten: the next claim makes it again
        conn.execute("DELETE FROM sessions WHERE id = 't3'")
        conn.commit()
    step("t3", ANN, 3)
    step("t3", ANN, 4)
    return outcomes


def _tables(store: PostgresStore) -> dict[str, list[tuple[Any, ...]]]:
    with store.connection() as conn:
        return {name: conn.execute(query).fetchall() for name, query in TABLES.items()}


def test_the_steps_at_once_store_and_refuse_as_the_plain_path(
    stores: list[PostgresStore], sent: Sent
) -> None:
    plain_store, at_once_store = stores
    sent.count = 0
    plain = _script(plain_store, at_once=False)
    plain_sent, sent.count = sent.count, 0
    at_once = _script(at_once_store, at_once=True)
    assert at_once == plain
    refused = {o.split(":")[0] for o in plain if o != "ok"}
    assert refused == {"AccessDeniedError", "SessionDeletedError"}, plain
    assert plain[-4:] == ["ok"] * 4, plain  # t3 made again by its claim (each path's own way)
    assert _tables(at_once_store) == _tables(plain_store)
    assert sent.count < plain_sent * 0.7, (sent.count, plain_sent)  # what the seam is for
