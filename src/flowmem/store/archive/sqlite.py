"""SQLite's archive table (its migration) and its statements, by name."""

from __future__ import annotations

from flowmem.store.archive.statements import SQLITE_PAGE, statements

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_archive (
        buffer_id INTEGER NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (buffer_id, seq)) WITHOUT ROWID""",
    # an archived call id is never trimmed from the evicted ones (decision 0083)
    "ALTER TABLE buffer_evicted ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
)

# a call listed in the header (``[call id, position, order]``, decision 0137): its id, its position
_LISTED_ID = "json_extract(j.value, '$[0]')"
_LISTED_POS = "json_extract(j.value, '$[1]')"

SQL: dict[str, str] = {
    **statements("?"),
    "archive_page": SQLITE_PAGE,
    # SQLite flags no answered call (its migration 23, decision 0137): the header lists the
    # open ones, listed again from the declarations left without an answer (?1 and ?3: the
    # flags PostgreSQL's statement sets and reads)
    #
    # Since its migration 28 (decision 0180) an open call's declaration is listed only and an
    # answer's entry carries the declaration it answered: the archived rows' call ids are
    # taken from all three (?1: archived, ?2: the buffer, ?3: the last archived position)
    "archive_calls": f"""INSERT INTO buffer_evicted (buffer_id, call_id, seq, archived)
            SELECT DISTINCT ?2, cid, 0, ?1 FROM (
                SELECT call_id AS cid FROM buffer_calls WHERE buffer_id = ?2 AND declared_pos <= ?3
                UNION ALL SELECT call_id FROM buffer_answers WHERE buffer_id = ?2 AND declared_pos <= ?3
                UNION ALL SELECT {_LISTED_ID} FROM buffers AS b, json_each(b.unanswered) AS j
                    WHERE b.id = ?2 AND {_LISTED_POS} <= ?3) AS archived WHERE cid IS NOT NULL
            ON CONFLICT (buffer_id, call_id) DO UPDATE SET archived = excluded.archived""",
    # before the drops (?1: the buffer, the archived rows after ?2 up to ?3): an archived answer
    # gives a live declaration it carried an entry of its own (listed below when no answer is
    # left), and a live answer no longer carries an archived declaration
    "archive_carried_kept": """INSERT INTO buffer_calls (buffer_id, call_id, declared_pos, ord, answered)
        SELECT buffer_id, call_id, declared_pos, ord, 1 FROM buffer_answers WHERE buffer_id = ?1
            AND pos > ?2 AND pos <= ?3 AND declared_pos IS NOT NULL
            AND NOT (declared_pos > ?2 AND declared_pos <= ?3)
        ON CONFLICT DO NOTHING""",
    "archive_carried_drop": """UPDATE buffer_answers SET declared_pos = NULL, ord = NULL
        WHERE buffer_id = ?1 AND declared_pos > ?2 AND declared_pos <= ?3""",
    # the list: its calls whose rows are left, and the live declarations left without an answer
    # (one stored before its call, archived), whose entries then go (archive_reopened)
    "archive_reopen": f"""UPDATE buffers SET unanswered = (SELECT json_group_array(json_array(cid,
            pos, ord)) FROM (SELECT {_LISTED_ID} AS cid, {_LISTED_POS} AS pos,
                json_extract(j.value, '$[2]') AS ord FROM json_each(buffers.unanswered) AS j
                WHERE EXISTS (SELECT 1 FROM buffer_rows AS r WHERE r.buffer_id = ?2 AND r.pos = {_LISTED_POS})
            UNION ALL SELECT c.call_id, c.declared_pos, c.ord FROM buffer_calls AS c
            WHERE c.buffer_id = ?2 AND NOT EXISTS (SELECT 1 FROM buffer_answers AS a
                WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id)
            ORDER BY 2, 3))
        WHERE id = ?2 AND ?1 IS NOT ?3""",
    "archive_reopened": """DELETE FROM buffer_calls WHERE buffer_id = ? AND NOT EXISTS (SELECT 1
        FROM buffer_answers AS a WHERE a.buffer_id = buffer_calls.buffer_id AND a.call_id = buffer_calls.call_id)""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    14: MIGRATION,  # what compactions archived (issue 28 §2)
}
