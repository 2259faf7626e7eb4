"""SQLite's migration 28 (issue 42 §1, decision 0180): a call's declaration entry written with its answer.

An open call's only entry is the header's list; the answer of a listed call carries the
declaration it answers on its own entry (``buffer_answers.declared_pos``, ``ord``). Every
declaration is in exactly one place: the list (its call unanswered), an entry of its own
in ``buffer_calls`` (its call answered, but not carried), or an answer's entry. The
checks here recompute that from the stored rows alone (``layout_faults``, the oracle),
after random edits of the editor (inserts in the middle of a turn, replacements,
deletions), after a compaction and after the upgrade from migration 27; and a fresh
editor, reading only what is stored, answers every ``BufferEditor`` question as the
core's ``ListEditor`` does.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import ListEditor, append, call_ids, is_healed, prepare, result_id
from flowmem.store import Address, SessionRecord
from flowmem.store import sqlite as sqlite_backend
from flowmem.store.editor import SqlBufferEditor
from flowmem.store.sqlite import SqliteStore
from tests.store.carried_cases import call, compact_around_a_cut, result
from tests.store.edits import edit_like_the_list, edits, stored_rows
from tests.store.sqlite.editing import editing
from tests.store.undo_carried import undo_carried_calls

CHAT = Address("session", "s1", "chat")
EDITED = Address("global", "", "edited")
IDS = st.sampled_from(["a", "b", "c", "d"])
ROW = stored_rows(IDS, st.sampled_from(["", "x"]))
OPS = edits(ROW)


def layout_faults(conn: sqlite3.Connection) -> list[str]:
    """What differs between each buffer's stored call entries and what its rows declare and answer."""
    faults: list[str] = []
    for bid, unanswered in conn.execute(
        "SELECT id, unanswered FROM buffers ORDER BY id"
    ).fetchall():
        rows = [(int(pos), json.loads(body)) for pos, body in conn.execute(
            "SELECT pos, body FROM buffer_rows WHERE buffer_id = ? ORDER BY pos", (bid,))]  # fmt: skip
        declared = [
            (cid, pos, order) for pos, row in rows for order, cid in enumerate(call_ids(row))
        ]
        answers = sorted(
            (rid, pos, int(is_healed(row)))
            for pos, row in rows
            if (rid := result_id(row)) is not None
        )
        answered = {rid for rid, _, _ in answers}
        listed = sorted(
            (str(cid), int(pos), int(order)) for cid, pos, order in json.loads(unanswered)
        )
        entries = conn.execute(
            "SELECT call_id, declared_pos, ord FROM buffer_calls WHERE buffer_id = ?", (bid,)
        ).fetchall()
        carried = conn.execute(
            """SELECT call_id, declared_pos, ord FROM buffer_answers
            WHERE buffer_id = ? AND declared_pos IS NOT NULL""",
            (bid,),
        ).fetchall()
        stored = conn.execute(
            "SELECT call_id, pos, healed FROM buffer_answers WHERE buffer_id = ?", (bid,)
        ).fetchall()
        if listed != sorted(d for d in declared if d[0] not in answered):
            faults.append(
                f"buffer {bid}: listed {listed}, declared {declared}, answered {answered}"
            )
        if sorted(entries + carried) != sorted(d for d in declared if d[0] in answered):
            faults.append(
                f"buffer {bid}: entries {entries} and carried {carried}, declared {declared}"
            )
        if sorted(stored) != answers:
            faults.append(f"buffer {bid}: answers {sorted(stored)}, rows answer {answers}")
    return faults


def _positions(conn: sqlite3.Connection) -> list[int]:
    return [int(p) for (p,) in conn.execute("SELECT pos FROM buffer_rows ORDER BY pos")]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_mem_1_2_3_each_declaration_is_listed_or_in_one_entry_after_any_edit(
    tmp_path: Path, ops: list[Any]
) -> None:
    """After every edit the entries match the rows, and a fresh editor answers like ListEditor."""
    path = str(tmp_path / f"edits{abs(hash(repr(ops)))}.db")
    reference = ListEditor([])
    with editing(path) as (conn, runner):
        edit_like_the_list(
            ops,
            SqlBufferEditor(runner, EDITED),
            reference,
            lambda: _positions(conn),
            lambda: layout_faults(conn),
            lambda: SqlBufferEditor(runner, EDITED),
        )


def _store(path: Path) -> SqliteStore:
    store = SqliteStore(f"sqlite:///{path}")
    store.create_session(SessionRecord("s1", "s1", "alice"))
    return store


def test_a_compaction_keeps_the_entries_exact_around_its_cut(tmp_path: Path) -> None:
    """Archived declarations leave the list and the answers' entries; a live one answered by an archived result is listed."""
    store = _store(tmp_path / "compacted.db")

    def faults() -> list[str]:
        with sqlite3.connect(store.path) as conn:
            return layout_faults(conn)

    def listed() -> list[str]:
        with sqlite3.connect(store.path) as conn:
            text = conn.execute("SELECT unanswered FROM buffers").fetchone()[0]
        return [str(cid) for cid, _, _ in json.loads(text)]

    try:
        compact_around_a_cut(store, CHAT, faults, listed)
    finally:
        store.close()


def test_an_upgrade_from_27_keeps_open_answered_and_healed_calls_and_a_placeholder(
    tmp_path: Path,
) -> None:
    """Migration 28 on a database of migration 27: open calls' entries go, answered ones become one entry."""
    path = tmp_path / "older.db"
    store = _store(path)
    batches: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": "q"}, call("h1")],
        [{"role": "user", "content": "healed"}],  # MEM-3: h1's placeholder
        [call("c0", "c1", "c2"), result("c0"), result("c1")],  # c0, c1 answered; c2 open
        [call("c2", "c3")],  # c2 declared again, c3 new: both open
    ]
    pure: list[Any] = []
    for batch in batches:
        pure = append(pure, batch, now=1).messages
        store.append(CHAT, prepare(batch, 1))
    assert store.load(CHAT) == pure
    store.close()
    with sqlite3.connect(path, isolation_level=None) as conn:
        undo_carried_calls(conn)  # what migration 27 wrote: an entry per declaration
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 28")
        assert conn.execute("SELECT COUNT(*) FROM buffer_calls").fetchone() == (6,)
    again = SqliteStore(f"sqlite:///{path}")
    try:
        assert again.schema_version() == len(sqlite_backend.MIGRATIONS)
        with sqlite3.connect(path) as conn:
            assert layout_faults(conn) == []
            assert conn.execute("SELECT COUNT(*) FROM buffer_calls").fetchone() == (0,)
            carried = conn.execute(
                "SELECT call_id, healed FROM buffer_answers WHERE declared_pos IS NOT NULL ORDER BY call_id"
            ).fetchall()
            assert carried == [("c0", 0), ("c1", 0), ("h1", 1)]
        assert again.load(CHAT) == pure
        later: list[list[dict[str, Any]]] = [
            [
                result("h1", "late"),
                result("c0"),
            ],  # MEM-1: a late result replaces the placeholder; c0 again dropped
            [call("c1", "c4")],  # MEM-2: c1 known, c4 new: appended
            [result("c3")],
            [{"role": "user", "content": "next"}],  # MEM-3: c2 (twice declared) and c4 healed
        ]
        for batch in later:
            expected = append(pure, batch, now=1)
            got = again.append(CHAT, prepare(batch, 1))
            pure = expected.messages
            assert (got.appended, got.count) == (expected.appended, expected.count)
            assert again.load(CHAT) == pure
            with sqlite3.connect(path) as conn:
                assert layout_faults(conn) == []
    finally:
        again.close()
