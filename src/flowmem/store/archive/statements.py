"""The archive statements, written once and spelled per backend (the placeholder).

``statements`` is called by ``archive.sqlite`` and ``archive.postgres``; nothing
else reads it.
"""

from __future__ import annotations

_BUFFER = "(SELECT id FROM buffers WHERE scope = {p} AND scope_id = {p} AND key = {p})"


def statements(p: str) -> dict[str, str]:
    """The archive statements with placeholder ``p`` (``?`` or ``%s``)."""
    buffer = _BUFFER.format(p=p)
    return {
        "archive_prefix": f"""SELECT pos, body FROM buffer_rows WHERE buffer_id = {p} AND pos <= {p}
            ORDER BY pos""",
        "archive_last": f"SELECT COALESCE(MAX(seq), 0) FROM buffer_archive WHERE buffer_id = {p}",
        "archive_insert": f"INSERT INTO buffer_archive (buffer_id, seq, body) VALUES ({p}, {p}, {p})",
        # an archived call id is remembered like an evicted one, but never trimmed
        "archive_call": f"""INSERT INTO buffer_evicted (buffer_id, call_id, seq, archived)
            VALUES ({p}, {p}, 0, {p}) ON CONFLICT (buffer_id, call_id) DO UPDATE SET archived = excluded.archived""",
        # one statement, one snapshot: the archived rows (0), then the live ones (1)
        "archive_read": f"""SELECT part, body FROM (
            SELECT 0 AS part, seq AS n, body FROM buffer_archive WHERE buffer_id = {buffer}
            UNION ALL SELECT 1, pos, body FROM buffer_rows WHERE buffer_id = {buffer}) AS everything
            ORDER BY part, n""",
        "archive_drop": f"DELETE FROM buffer_archive WHERE buffer_id = {p}",
    }
