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
        # the rows up to a position, numbered on from an offset, in one statement
        "archive_insert": f"""INSERT INTO buffer_archive (buffer_id, seq, body)
            SELECT buffer_id, {p} + ROW_NUMBER() OVER (ORDER BY pos), body FROM buffer_rows
            WHERE buffer_id = {p} AND pos <= {p}""",
        # their call ids are remembered like an evicted turn's, but never trimmed
        "archive_calls": f"""INSERT INTO buffer_evicted (buffer_id, call_id, seq, archived)
            SELECT DISTINCT buffer_id, call_id, 0, {p} FROM buffer_calls
            WHERE buffer_id = {p} AND declared_pos <= {p}
            ON CONFLICT (buffer_id, call_id) DO UPDATE SET archived = excluded.archived""",
        # the rows after the first archived one leave the buffer and its indexes at once
        "archive_rows_drop": f"DELETE FROM buffer_rows WHERE buffer_id = {p} AND pos > {p} AND pos <= {p}",
        "archive_calls_drop": f"""DELETE FROM buffer_calls WHERE buffer_id = {p}
            AND declared_pos > {p} AND declared_pos <= {p}""",
        "archive_answers_drop": f"DELETE FROM buffer_answers WHERE buffer_id = {p} AND pos > {p} AND pos <= {p}",
        # a live call answered only by an archived result (one stored before its call) is open again
        "archive_reopen": f"""UPDATE buffer_calls SET answered = {p} WHERE buffer_id = {p} AND answered = {p}
            AND NOT EXISTS (SELECT 1 FROM buffer_answers a
                WHERE a.buffer_id = buffer_calls.buffer_id AND a.call_id = buffer_calls.call_id)""",
        # one statement, one snapshot: the archived rows (0), then the live ones (1)
        "archive_read": f"""SELECT part, body FROM (
            SELECT 0 AS part, seq AS n, body FROM buffer_archive WHERE buffer_id = {buffer}
            UNION ALL SELECT 1, pos, body FROM buffer_rows WHERE buffer_id = {buffer}) AS everything
            ORDER BY part, n""",
        "archive_drop": f"DELETE FROM buffer_archive WHERE buffer_id = {p}",
    }


# a page of the archive with its buffer's header (buffer stamp, version, count), one statement:
# the archive changes only with its buffer's version; ``archive.sql`` ends the page by size
SQLITE_PAGE = """SELECT b.born, b.version, b.count, a.seq, a.body, NULL FROM buffers b
    LEFT JOIN buffer_archive a ON a.buffer_id = b.id AND a.seq > ?
    WHERE b.scope = ? AND b.scope_id = ? AND b.key = ? ORDER BY a.seq LIMIT ?"""
# PostgreSQL's cuts the page by size on the server (as its ``page_read``): the client gets the page only
POSTGRES_PAGE = """SELECT b.id, b.version, b.count, p.seq, p.body, p.fetched FROM buffers b
    LEFT JOIN LATERAL (SELECT seq, body, fetched FROM (
        SELECT seq, body, COUNT(*) OVER () AS fetched, ROW_NUMBER() OVER (ORDER BY seq) AS n,
            SUM(octet_length(body)) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING)
                - octet_length(body) AS ahead
        FROM (SELECT seq, body FROM buffer_archive WHERE buffer_id = b.id AND seq > %s
            ORDER BY seq LIMIT %s) AS page) AS sized
    WHERE n = 1 OR (n <= %s AND ahead < %s)) AS p ON true
    WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s ORDER BY p.seq"""
