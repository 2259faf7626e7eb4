"""``flowmem.store.conversations.sqlite``: a line's declarations read by the call id's key range (decision 0191).

``DECLARATIONS`` (what a save runs) reads only the ``buffer_calls`` and ``buffer_answers``
entries whose call id is the one asked or starts with its qualified prefix (``<id>@``);
``PLAIN_DECLARATIONS`` reads all of the line's and filters them. After random edits of a
conversation's line (appends, mid-turn inserts, replacements, deletions, with plain,
qualified and look-alike call ids), before the editor's flush (rows past the stored
header, read from the rows) and after it, both give the same rows in the same order for
every id asked.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.store import Address
from flowmem.store.conversations import LINE
from flowmem.store.conversations import sqlite as conversations_sqlite
from flowmem.store.conversations.lines import QUALIFIER
from flowmem.store.editor import SqlBufferEditor
from tests.store.edits import edits, stored_rows
from tests.store.sqlite.editing import editing

LINE_ADDRESS = Address("session", "c1", LINE)
OTHER_LINE = Address("session", "c1", f"{LINE}#e9")  # another line of the conversation
# ids and what they could be mistaken for: qualified by a run, a longer id, a prefix
IDS = ["a", "a@r1", "a@r2", "a@", "ab", "a@r1@x", "b", "b@r1", "@", "A", "a\u00e9@r"]
ROW = stored_rows(st.sampled_from(IDS), st.sampled_from(["", "x"]))
OPS = edits(ROW)


def _positions(conn: sqlite3.Connection, editor: SqlBufferEditor) -> list[int]:
    found = conn.execute(
        "SELECT pos FROM buffer_rows WHERE buffer_id = ? ORDER BY pos", (editor.buffer_id,)
    )
    return [int(p) for (p,) in found]


def _both(conn: sqlite3.Connection, key: str, call_id: str) -> tuple[list[Any], list[Any]]:
    prefix = call_id + QUALIFIER
    params = ("c1", key, call_id, len(prefix), prefix)  # as _SqlTx.declarations passes them
    return (
        conn.execute(conversations_sqlite.DECLARATIONS, params).fetchall(),
        conn.execute(conversations_sqlite.PLAIN_DECLARATIONS, params).fetchall(),
    )


def test_a_save_reads_declarations_by_their_key_range() -> None:
    assert conversations_sqlite.SQL["pa_declarations"] == conversations_sqlite.DECLARATIONS


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, other=OPS)
def test_declarations_by_key_range_equal_the_plain_statement_after_any_edit(
    tmp_path: Path, ops: list[Any], other: list[Any]
) -> None:
    """Flushed or not, in a line beside another, every id's declarations are the plain statement's."""
    path = str(tmp_path / f"decl{abs(hash(repr((ops, other))))}.db")
    with editing(path) as (conn, runner):
        for address, edited in ((OTHER_LINE, other), (LINE_ADDRESS, ops)):
            editor = SqlBufferEditor(runner, address)
            for op in edited:
                where = _positions(conn, editor) if editor.buffer_id is not None else []
                if op[0] == "append":
                    editor.append_row(op[1])
                elif not where:
                    continue
                elif op[0] == "insert":
                    editor.insert_after(where[op[1] % len(where)], op[2])
                elif op[0] == "replace":
                    editor.replace(where[op[1] % len(where)], op[2])
                else:
                    editor.delete(where[op[1] % len(where)])
                if address == LINE_ADDRESS:
                    for cid in IDS:
                        fast, plain = _both(conn, LINE, cid)  # rows past the stored header
                        assert fast == plain
                if op[0] != "append" or len(where) % 3 == 0:
                    editor.flush()
            editor.flush()
        for key in (LINE, OTHER_LINE.key):
            for cid in [*IDS, "", "c"]:
                fast, plain = _both(conn, key, cid)
                assert fast == plain
