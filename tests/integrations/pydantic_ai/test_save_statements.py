"""What one pydantic-ai save runs on SQLite, counted (issue 42 §4): the line's end read once, the header written once,
the entries' places and messages in one statement each, the record and its line stamp in one.

A save of one turn (a prompt, a tool call, its result, the answer) after a history
of 100 messages: the statements its store's connections run are counted (each
``execute`` on them, the loan's pragmas and ``BEGIN``/``COMMIT`` included; a
trigger's work is not a statement of its own). Before: 38 statements, the line's
end (``MAX(pos)``) read three times and the buffer's header written three times,
each read of the transaction having flushed the header first. The reads of a save
read rows, calls, answers and entries, which the editor writes at once, never the
header; the line's end is kept by the line's own appends. The history stored is the
same (the conformance and rule suites), and so is each entry's place.

Decision 0171: 34 -> 27. Each entry's place (``pa_entries``) and message
(``pa_messages``) were one statement an entry; they are held back and written as one
multi-row statement each when the transaction flushes (or before a read of the places),
and the record is written with its line stamp read in the same statement.

Decision 0186: 27 -> 24. The load before it ran on the event loop in no-wait mode and
switched the one pooled connection's pragmas; the save switched them back (three
``PRAGMA`` statements). The pool now lends the save a connection already in its mode.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage

from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.store.sqlite import driver
from tests.integrations.pydantic_ai.messages import answer, call, prompt, result

SAVE_STATEMENTS = 24
"""At most this many statements a save of one turn runs, its transaction and the connection loan's pragmas included."""


def _turn(i: int) -> list[ModelMessage]:
    run = f"r{i}"
    return [
        prompt(f"question {i}", t=4 * i, run=run),
        call(f"c{i}", t=4 * i + 1, run=run),
        result(f"c{i}", t=4 * i + 2, run=run),
        answer(f"answer {i}", t=4 * i + 3, run=run),
    ]


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement run through a SQLite store's connections from now on, in order."""
    seen: list[str] = []

    def execute(conn: sqlite3.Connection, sql: str, *args: Any) -> sqlite3.Cursor:
        seen.append(" ".join(sql.split()))
        return sqlite3.Connection.execute(conn, sql, *args)

    monkeypatch.setattr(driver._Connection, "execute", execute)
    yield seen


def test_a_save_of_one_turn_reads_the_line_end_once_and_writes_the_header_once(
    tmp_path: Path, traced: list[str]
) -> None:
    async def scenario() -> list[str]:
        store = FlowmemConversationStore.from_url(f"sqlite:///{tmp_path / 'pa.db'}")
        try:
            history = [m for i in range(25) for m in _turn(i)]
            await store.save(Conversation(conversation_id="c1", messages=history))
            conversation = await store.load("c1")
            assert conversation is not None and len(conversation.messages) == 100
            conversation.messages.extend(_turn(25))
            traced.clear()
            await store.save(conversation)
            saved = list(traced)
            again = await store.load("c1")
            assert again is not None and again.messages == [*history, *_turn(25)]
            return saved
        finally:
            store.close()

    statements = asyncio.run(scenario())
    assert [s for s in statements if "MAX(pos) FROM buffer_rows" in s] != []
    assert len([s for s in statements if "MAX(pos) FROM buffer_rows" in s]) == 1
    assert len([s for s in statements if s.startswith("UPDATE buffers SET count")]) == 1
    assert len(statements) <= SAVE_STATEMENTS, "\n".join(statements)
    assert [s for s in statements if s.startswith("PRAGMA")] == []


def test_a_save_writes_its_entries_places_and_messages_in_one_statement_each(
    tmp_path: Path, traced: list[str]
) -> None:
    """Four entries: one INSERT into pa_entries and one into pa_messages, and no line stamp read of its own."""

    async def scenario() -> tuple[list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        store = FlowmemConversationStore.from_url(f"sqlite:///{tmp_path / 'pa.db'}")
        try:
            history = [m for i in range(3) for m in _turn(i)]
            await store.save(Conversation(conversation_id="c1", messages=history))
            conversation = await store.load("c1")
            assert conversation is not None
            conversation.messages.extend(_turn(3))
            traced.clear()
            await store.save(conversation)
            saved = list(traced)
            with store.memory.store.connection() as conn:  # type: ignore[attr-defined]
                places = conn.execute("SELECT entry_id, key, pos FROM pa_entries ORDER BY pos")
                kept = conn.execute("SELECT key, pos, entry_id FROM pa_messages ORDER BY pos")
                found = places.fetchall(), kept.fetchall()
            again = await store.load("c1")
            assert again is not None and again.messages == [*history, *_turn(3)]
            return saved, *found
        finally:
            store.close()

    statements, places, kept = asyncio.run(scenario())
    assert len([s for s in statements if s.startswith("INSERT INTO pa_entries")]) == 1
    assert len([s for s in statements if s.startswith("INSERT INTO pa_messages")]) == 1
    assert [s for s in statements if s.startswith("SELECT born, version FROM buffers")] == []
    assert len(places) == len(kept) == 16  # every entry placed, every message kept, once
    assert [p[2] for p in places] == [k[1] for k in kept]


def test_an_entry_that_adds_no_row_ends_where_the_line_does_after_this_saves_appends(
    tmp_path: Path,
) -> None:
    """A result saved again (MEM-1 drops it) is indexed at the line's end as the save's appends left it."""

    async def scenario() -> tuple[int, int]:
        store = FlowmemConversationStore.from_url(f"sqlite:///{tmp_path / 'pa.db'}")
        try:
            messages = [*_turn(0), prompt("next", t=10, run="r1"), call("c1", t=11, run="r1")]
            messages += [result("c1", t=12, run="r1"), result("c1", t=13, run="r1")]
            await store.save(Conversation(conversation_id="c1", messages=messages))
            stored = store.tables.get("c1")
            assert stored is not None
            head = str(stored.record["head_id"])
            with store.memory.store.connection() as conn:  # type: ignore[attr-defined]
                place = conn.execute("SELECT pos FROM pa_entries WHERE entry_id = ?", (head,)).fetchone()
                end = conn.execute("SELECT MAX(pos) FROM buffer_rows").fetchone()
            return int(place[0]), int(end[0])
        finally:
            store.close()

    position, end = asyncio.run(scenario())
    assert position == end
