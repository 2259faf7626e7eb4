"""The repair log's statements, written once and spelled per backend (the placeholder).

``statements`` is called by ``repairs.sqlite`` and ``repairs.postgres``; nothing else
reads it.
"""

from __future__ import annotations

_BUFFER = "(SELECT id FROM buffers WHERE scope = {p} AND scope_id = {p} AND key = {p})"


def statements(p: str) -> dict[str, str]:
    """The repair log's statements with placeholder ``p`` (``?`` or ``%s``)."""
    buffer = _BUFFER.format(p=p)
    return {
        # the index of the row answering a call id now: the rows before it
        "repairs_row": f"""SELECT (SELECT COUNT(*) FROM buffer_rows r
                WHERE r.buffer_id = a.buffer_id AND r.pos < a.pos)
            FROM buffer_answers a WHERE a.buffer_id = {buffer} AND a.call_id = {p}
            ORDER BY a.pos LIMIT 1""",
        # the index of the newest row answering it: a replacement's (decision 0123: a LangGraph
        # line keeps the placeholder and appends the real result; elsewhere the same row)
        "repairs_row_last": f"""SELECT (SELECT COUNT(*) FROM buffer_rows r
                WHERE r.buffer_id = a.buffer_id AND r.pos < a.pos)
            FROM buffer_answers a WHERE a.buffer_id = {buffer} AND a.call_id = {p}
            ORDER BY a.pos DESC LIMIT 1""",
        "repairs_newest": f"SELECT seq, entry FROM buffer_repairs WHERE buffer_id = {p} ORDER BY seq DESC LIMIT 1",
        "repairs_newest@address": f"""SELECT seq, entry FROM buffer_repairs WHERE buffer_id = {buffer}
            ORDER BY seq DESC LIMIT 1""",
        "repairs_page": f"""SELECT seq, entry FROM buffer_repairs WHERE buffer_id = {buffer} AND seq < {p}
            ORDER BY seq DESC LIMIT {p}""",
        "repairs_drop": f"DELETE FROM buffer_repairs WHERE buffer_id = {p}",
    }
