"""PostgreSQL's migration 28: a call's declaration and its answer in one row (decision 0159).

Until this migration a declared call wrote a ``buffer_calls`` row and its key, and its
result a ``buffer_answers`` row and its key: two heap rows and two index entries per
call and answer (issue 42 §1: about 190 bytes of WAL each). Since it both live in
``buffer_call_ids``, one row per call id's declaration and/or answer, found by one
non-unique index on ``(buffer_id, call_id)``:

- a declaration inserts a row (``declared_pos``, ``ord``, ``answered``; no answer); a row
  holds a declaration while its ``ord`` is set;
- an answer is set on a row of its call id that has none (a HOT update: its columns are
  in no index, about 110 bytes fewer than a row and a key), else it inserts a row of its
  own (an answer whose call is not declared, or a second answer);
- a declaration's deletion clears ``ord`` and ``answered`` of a row that holds an answer
  (a HOT update; the answer stays: a window evicts the turn first and its results after),
  else deletes the row; an answer's deletion likewise.

No index reads a column these updates write (``buffer_call_ids_moved``, the partial index
of a healing insert's moved declarations, reads ``declared_pos`` only), so they are HOT.

``buffer_calls`` and ``buffer_answers`` are views of it with the old tables' columns, so
every statement that reads them reads them as before; their writes go through one
``INSTEAD OF`` trigger that does the above (``flowmem_call_ids_write``). The statements
that need the table itself (a row's declarations found by ``ctid``, the shifts and the
unflips of a healing insert, a clear) are ``SQL`` here, in ``postgres/queries.py``'s place.
Since decision 0164 an append's writes (an answer, a declaration's or an answer's
deletion) are plain statements on the table too, no PL/pgSQL; the trigger serves the
archive's writes.

Since migration 34 (``CARRIED``, decision 0190, as SQLite's 28) an open call has no row:
the header's list is its only entry, and its answer inserts one row holding both the
declaration and the answer, never updated (``answer_carry``). A row of a declaration
alone is then a call answered already (declared again, or answered before it was
declared); the editor's ``CARRIED_ROW`` mode (``flowmem.store.editor``).
"""

from __future__ import annotations

# one row per call id's declaration and/or answer; the old tables' rows copied as they
# are (a declaration's row, an answer's row: pairing them is not needed, only their
# later writes pair), then the old tables become views of it
MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_call_ids (
        buffer_id BIGINT NOT NULL, call_id TEXT NOT NULL,
        declared_pos BIGINT, ord INTEGER, answered BOOLEAN,
        answer_pos BIGINT, healed BOOLEAN)""",
    """INSERT INTO buffer_call_ids (buffer_id, call_id, declared_pos, ord, answered)
        SELECT buffer_id, call_id, declared_pos, ord, answered FROM buffer_calls""",
    """INSERT INTO buffer_call_ids (buffer_id, call_id, answer_pos, healed)
        SELECT buffer_id, call_id, pos, healed FROM buffer_answers""",
    "DROP TABLE buffer_calls",
    "DROP TABLE buffer_answers",
    "CREATE INDEX buffer_call_ids_key ON buffer_call_ids (buffer_id, call_id)",
    # entries only in the middle of a healing insert's shift (as migration 24's); not on
    # the answers' positions: a column an index reads (its predicate too) makes every
    # answer's update a new row version with a new key entry, not a HOT update
    "CREATE INDEX buffer_call_ids_moved ON buffer_call_ids (buffer_id) WHERE declared_pos < 0",
    # ``row_at``: the row's ctid, which a statement deleting declarations found by the
    # table's key names (``calls_delete``: one TID scan, whatever the plan)
    """CREATE VIEW buffer_calls AS SELECT buffer_id, call_id, declared_pos, ord, answered,
        ctid AS row_at FROM buffer_call_ids WHERE ord IS NOT NULL""",
    """CREATE VIEW buffer_answers AS SELECT buffer_id, call_id, answer_pos AS pos, healed
        FROM buffer_call_ids WHERE answer_pos IS NOT NULL""",
    # each row of a view written is one row's columns of the table: a declaration by its
    # (buffer, call id, position), an answer by its (buffer, call id, position)
    """CREATE FUNCTION flowmem_call_ids_write() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_TABLE_NAME = 'buffer_calls' THEN
                IF TG_OP = 'INSERT' THEN
                    INSERT INTO buffer_call_ids (buffer_id, call_id, declared_pos, ord, answered)
                        VALUES (NEW.buffer_id, NEW.call_id, NEW.declared_pos, NEW.ord, NEW.answered);
                    RETURN NEW;
                END IF;
                IF TG_OP = 'UPDATE' THEN
                    UPDATE buffer_call_ids SET buffer_id = NEW.buffer_id, call_id = NEW.call_id,
                        declared_pos = NEW.declared_pos, ord = NEW.ord, answered = NEW.answered
                        WHERE ctid = (SELECT ctid FROM buffer_call_ids WHERE buffer_id = OLD.buffer_id
                            AND call_id = OLD.call_id AND declared_pos = OLD.declared_pos AND ord IS NOT NULL LIMIT 1);
                    RETURN NEW;
                END IF;
                DELETE FROM buffer_call_ids WHERE ctid = (SELECT ctid FROM buffer_call_ids
                    WHERE buffer_id = OLD.buffer_id AND call_id = OLD.call_id
                    AND declared_pos = OLD.declared_pos AND ord IS NOT NULL LIMIT 1) AND answer_pos IS NULL;
                IF NOT FOUND THEN
                    UPDATE buffer_call_ids SET ord = NULL, answered = NULL
                        WHERE ctid = (SELECT ctid FROM buffer_call_ids WHERE buffer_id = OLD.buffer_id
                            AND call_id = OLD.call_id AND declared_pos = OLD.declared_pos AND ord IS NOT NULL LIMIT 1);
                END IF;
                RETURN OLD;
            END IF;
            IF TG_OP = 'INSERT' THEN
                UPDATE buffer_call_ids SET answer_pos = NEW.pos, healed = NEW.healed
                    WHERE ctid = (SELECT ctid FROM buffer_call_ids WHERE buffer_id = NEW.buffer_id
                        AND call_id = NEW.call_id AND answer_pos IS NULL LIMIT 1);
                IF NOT FOUND THEN
                    INSERT INTO buffer_call_ids (buffer_id, call_id, answer_pos, healed)
                        VALUES (NEW.buffer_id, NEW.call_id, NEW.pos, NEW.healed);
                END IF;
                RETURN NEW;
            END IF;
            IF TG_OP = 'UPDATE' THEN
                UPDATE buffer_call_ids SET buffer_id = NEW.buffer_id, call_id = NEW.call_id,
                    answer_pos = NEW.pos, healed = NEW.healed
                    WHERE ctid = (SELECT ctid FROM buffer_call_ids WHERE buffer_id = OLD.buffer_id
                        AND call_id = OLD.call_id AND answer_pos = OLD.pos LIMIT 1);
                RETURN NEW;
            END IF;
            DELETE FROM buffer_call_ids WHERE ctid = (SELECT ctid FROM buffer_call_ids
                WHERE buffer_id = OLD.buffer_id AND call_id = OLD.call_id AND answer_pos = OLD.pos
                LIMIT 1) AND ord IS NULL;
            IF NOT FOUND THEN
                UPDATE buffer_call_ids SET answer_pos = NULL, healed = NULL
                    WHERE ctid = (SELECT ctid FROM buffer_call_ids WHERE buffer_id = OLD.buffer_id
                        AND call_id = OLD.call_id AND answer_pos = OLD.pos LIMIT 1);
            END IF;
            RETURN OLD;
        END $$""",
    """CREATE TRIGGER buffer_calls_write INSTEAD OF INSERT OR UPDATE OR DELETE ON buffer_calls
        FOR EACH ROW EXECUTE FUNCTION flowmem_call_ids_write()""",
    """CREATE TRIGGER buffer_answers_write INSTEAD OF INSERT OR UPDATE OR DELETE ON buffer_answers
        FOR EACH ROW EXECUTE FUNCTION flowmem_call_ids_write()""",
)

# 32 (issue 42 §1, decision 0181): a tenth of each page kept for the answers. A call's row
# gets a second version when its answer comes, a HOT update only while the new version fits
# on its page. Once a vacuum has recorded the room pruning left on older pages (a server's
# autovacuum), the next declarations fill that room, and an answer that no longer fits was
# a new version on another page with a new key entry (and that page's image after a
# checkpoint). At 90 an insert leaves a tenth of the page free, where the answers fit (the
# bytes saved, with a vacuum and without: decision 0181, ``bench/wal_postgres.py
# --vacuumed``). No rewrite: pages filled from now on keep the room
ANSWERS_ROOM: tuple[str, ...] = ("ALTER TABLE buffer_call_ids SET (fillfactor = 90)",)

# 34 (issue 42 §1, decision 0190, as SQLite's 28, decision 0180): an open call's only entry
# is the header's list (migration 26 lists it already); its answer inserts one row holding
# the declaration it answers (``declared_pos``, ``ord``) and the answer, never updated: a
# call's append writes no row and no key entry, its result one row and one entry instead
# of a HOT update of the declaration's row. The open calls' rows go; an answered call's rows
# stay as they are (a row holding both is one whose answer carries its declaration, a row
# with a declaration alone an entry of its own). Run again it deletes nothing. A row is no
# longer updated when its answer comes, so the room migration 32 kept on each page for the
# answers goes (fillfactor 100 again: the pages filled from now on are full; decision 0190
# measured it in both regimes)
CARRIED: tuple[str, ...] = (
    """DELETE FROM buffer_call_ids AS c WHERE c.answer_pos IS NULL AND NOT EXISTS (SELECT 1
        FROM buffer_call_ids AS a WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id
            AND a.answer_pos IS NOT NULL)""",
    "ALTER TABLE buffer_call_ids SET (fillfactor = 100)",
)

# ``is_healed`` in SQL: ``metadata.healed`` or the top level's ``healed`` is JSON ``true``; read
# only of an answer found (the ``buffer_answers`` view's ``healed``), never written or indexed.
# Built-ins only, so it means the same under any search path
HEALED = """CREATE FUNCTION flowmem_healed(body text) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT COALESCE((body::json -> 'metadata' -> 'healed')::text = 'true', FALSE)
        OR COALESCE((body::json -> 'healed')::text = 'true', FALSE) $$"""

# 35 (issue 42 §1, decision 0194, decision 0193's "model 2"): an answer is its tool row, found
# by a partial key on ``buffer_rows`` (the buffer and the row's call id, ``call_id``: what
# ``flowmem.core.result_id`` reads of the row, written by the editor with it; NULL on every
# other row), and the declaration it answered, listed until then, is carried in that row's
# own columns (``declared_pos``, ``declared_ord``): an append writes nothing to
# ``buffer_call_ids`` for a result. What the table keeps is what the rows cannot say: a
# declaration of its own (a call declared again, or declared after its answer, or a carried
# declaration whose answer was removed while another answer is left). An answer's row of the
# table gives its row the call id (as ``result_id`` read it when it was written) and the
# declaration it carried; then the answers' rows go, and the table's answer columns with the
# views' write trigger (no statement writes the views now). The views stay, over the rows:
# ``buffer_answers`` the rows with a call id, ``buffer_calls`` the table's declarations and
# the rows' carried ones.
ANSWERED_ROWS: tuple[str, ...] = (
    HEALED,
    """ALTER TABLE buffer_rows ADD COLUMN call_id TEXT, ADD COLUMN declared_pos BIGINT,
        ADD COLUMN declared_ord INTEGER""",
    """UPDATE buffer_rows AS r SET call_id = c.call_id,
            declared_pos = CASE WHEN c.ord IS NOT NULL THEN c.declared_pos END, declared_ord = c.ord
        FROM buffer_call_ids AS c WHERE c.buffer_id = r.buffer_id AND c.answer_pos = r.pos""",
    "CREATE INDEX buffer_rows_answers ON buffer_rows (buffer_id, call_id) WHERE call_id IS NOT NULL",
    "DROP VIEW buffer_calls",
    "DROP VIEW buffer_answers",
    "DROP FUNCTION flowmem_call_ids_write()",
    "DELETE FROM buffer_call_ids WHERE answer_pos IS NOT NULL OR ord IS NULL",
    """ALTER TABLE buffer_call_ids DROP COLUMN answer_pos, DROP COLUMN healed,
        ALTER COLUMN declared_pos SET NOT NULL, ALTER COLUMN ord SET NOT NULL""",
    """CREATE VIEW buffer_answers AS SELECT buffer_id, call_id, pos, flowmem_healed(body) AS healed
        FROM buffer_rows WHERE call_id IS NOT NULL""",
    """CREATE VIEW buffer_calls AS SELECT buffer_id, call_id, declared_pos, ord, answered
            FROM buffer_call_ids
        UNION ALL SELECT buffer_id, call_id, declared_pos, declared_ord, TRUE
            FROM buffer_rows WHERE call_id IS NOT NULL AND declared_pos IS NOT NULL""",
)
