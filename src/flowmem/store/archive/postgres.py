"""PostgreSQL's archive table (its migration) and its statements, by name."""

from __future__ import annotations

from flowmem.store.archive.statements import POSTGRES_PAGE, statements
from flowmem.store.headers import HEADS

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_archive (
        buffer_id BIGINT NOT NULL, seq BIGINT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (buffer_id, seq))""",
    # an archived call id is never trimmed from the evicted ones (decision 0083)
    "ALTER TABLE buffer_evicted ADD COLUMN archived BOOLEAN NOT NULL DEFAULT FALSE",
)

# a call listed in the header (``[call id, position, order]``, decision 0153)
_LISTED = "json_array_elements(b.unanswered::json) AS o(e)"

SQL: dict[str, str] = {
    **statements("%s"),
    # the buffer's version and count as read (decision 0195)
    "archive_page_sized": POSTGRES_PAGE.replace("FROM buffers b", f"FROM {HEADS} b", 1),
    # Since migration 34 (decision 0190, as SQLite's 28) an open call's declaration is listed
    # only, and an answer's row holds the declaration it answered: the archived rows' call ids
    # are taken from the rows and the list (the first parameter: archived; the buffer; the
    # last archived position). The drops go through the views' trigger (migration 28): an
    # archived declaration carried by a live answer is cleared from its row, and an archived
    # answer carrying a live declaration leaves that declaration a row of its own
    "archive_calls": f"""INSERT INTO buffer_evicted (buffer_id, call_id, seq, archived)
        SELECT DISTINCT p.b, d.cid, 0, p.f FROM (SELECT %s::boolean AS f, %s::bigint AS b,
                %s::bigint AS upto) AS p
            CROSS JOIN LATERAL (SELECT c.call_id AS cid FROM buffer_calls AS c
                    WHERE c.buffer_id = p.b AND c.declared_pos <= p.upto
                UNION ALL SELECT o.e ->> 0 FROM buffers AS b, {_LISTED}
                    WHERE b.id = p.b AND (o.e ->> 1)::bigint <= p.upto) AS d
        ON CONFLICT (buffer_id, call_id) DO UPDATE SET archived = excluded.archived""",
    # the list: its calls whose rows are left, and the live declarations left without an
    # answer (one answered by an archived result), whose rows then go (archive_reopened);
    # the first and third parameters: the flags the shared statement sets and reads
    "archive_reopen": f"""UPDATE buffers AS b SET unanswered = COALESCE((SELECT json_agg(json_build_array(
            l.cid, l.pos, l.ord) ORDER BY l.pos, l.ord)::text FROM (
                SELECT o.e ->> 0 AS cid, (o.e ->> 1)::bigint AS pos, (o.e ->> 2)::integer AS ord
                FROM {_LISTED} WHERE EXISTS (SELECT 1 FROM buffer_rows AS r
                    WHERE r.buffer_id = b.id AND r.pos = (o.e ->> 1)::bigint)
                UNION ALL SELECT c.call_id, c.declared_pos, c.ord FROM buffer_calls AS c
                WHERE c.buffer_id = b.id AND NOT EXISTS (SELECT 1 FROM buffer_answers AS a
                    WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id)) AS l), '[]')
        FROM (SELECT %s::boolean AS f, %s::bigint AS id, %s::boolean AS t) AS p
        WHERE b.id = p.id AND p.f IS DISTINCT FROM p.t""",
    "archive_reopened": """DELETE FROM buffer_call_ids AS c WHERE c.buffer_id = %s
        AND NOT EXISTS (SELECT 1 FROM buffer_answers AS a WHERE a.buffer_id = c.buffer_id
            AND a.call_id = c.call_id)""",
    # Since migration 35 (decision 0194) an answer is its row, carrying the declaration it
    # answered: the archived rows' answers go with them, in the rows' drop (one statement, on
    # the rows after the cut: the buffer's calls were read whole here before, by position),
    # which also clears an archived declaration from a live answer's row and gives a live
    # declaration an archived answer carried a row of its own (listed by archive_reopen when
    # no answer is left). A declaration of its own is a row of ``buffer_call_ids``, dropped by
    # position; there is no answers' drop.
    "archive_rows_drop": """WITH a AS (SELECT %s::bigint AS b, %s::bigint AS lo, %s::bigint AS hi),
        cleared AS (UPDATE buffer_rows AS t SET declared_pos = NULL, declared_ord = NULL FROM a
            WHERE t.buffer_id = a.b AND t.pos > a.hi AND t.declared_pos > a.lo AND t.declared_pos <= a.hi),
        kept AS (INSERT INTO buffer_call_ids (buffer_id, call_id, declared_pos, ord, answered)
            SELECT t.buffer_id, t.call_id, t.declared_pos, t.declared_ord, TRUE
            FROM buffer_rows AS t, a WHERE t.buffer_id = a.b AND t.pos > a.lo AND t.pos <= a.hi
                AND t.declared_pos > a.hi)
        DELETE FROM buffer_rows WHERE buffer_id = (SELECT b FROM a)
            AND pos > (SELECT lo FROM a) AND pos <= (SELECT hi FROM a)""",
    "archive_calls_drop": """DELETE FROM buffer_call_ids WHERE buffer_id = %s
        AND declared_pos > %s AND declared_pos <= %s""",
}
del SQL["archive_answers_drop"]

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    14: MIGRATION,  # what compactions archived (issue 28 §2)
}
