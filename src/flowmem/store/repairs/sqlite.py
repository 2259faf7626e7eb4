"""SQLite's repair log table (its migration) and its statements, by name.

The entries' bytes count against the buffer's owner's ``bytes`` quota in triggers, as
the buffers' own do (decision 0044): counted on insert (refused past the quota, the
write rolled back), uncounted on delete (a trim, the buffer's deletion). Since
migration 19 a trigger of the insert also trims the log to its newest ``KEPT`` entries
(decision 0124): an entry is one statement.

Since migration 24 (decision 0135) the log's bytes are the header's, as its rows' are
since migration 23 (decision 0137): ``buffers.log_bytes`` is the size of the buffer's
entries, an owner's bytes are ``user_usage``'s plus their buffers' rows and logs, and
the header's trigger checks the quota when the two together grew. An entry's insert has
no trigger under ``KEPT`` (no usage row, no quota function); the append adds the
entries' bytes in its own header update (``header_logged``), a write with no header
update of its own with ``repairs_counted``; the trim past ``KEPT`` takes the trimmed
bytes off the header; a deleted header takes its log's bytes with it.

Since migration 27 (decision 0148) the newest entries are held in the header row
(``log_held``: their texts newest first, each after a comma; ``log_count``: every entry the
log holds), written by the append's own header update: the page an entry used to add to
the commit (the log table's leaf) is written only when a trigger of that update moves the
held entries to the table, past ``HELD_CHARS``, or trims the log past ``KEPT`` (as the
insert's trigger did before).
"""

from __future__ import annotations

from flowmem.store import quotasql
from flowmem.store.repairs import KEPT
from flowmem.store.repairs.statements import statements

_OWNER = "(SELECT owner FROM buffers WHERE id = {row}.buffer_id)"

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_repairs (
        buffer_id INTEGER NOT NULL, seq INTEGER NOT NULL, entry TEXT NOT NULL,
        PRIMARY KEY (buffer_id, seq)) WITHOUT ROWID""",
    f"""CREATE TRIGGER usage_repairs_insert AFTER INSERT ON buffer_repairs BEGIN
        UPDATE user_usage SET bytes = bytes + length(CAST(NEW.entry AS BLOB))
            WHERE user_id = {_OWNER.format(row="NEW")};
        SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage
            WHERE user_id = {_OWNER.format(row="NEW")} AND flowmem_over_quota('bytes', user_id, bytes);
    END""",
    f"""CREATE TRIGGER usage_repairs_delete AFTER DELETE ON buffer_repairs BEGIN
        UPDATE user_usage SET bytes = bytes - length(CAST(OLD.entry AS BLOB))
            WHERE user_id = {_OWNER.format(row="OLD")};
    END""",
)

# the trim in a trigger of the insert (decision 0124): an entry is one statement; the
# trigger runs only when the entry's number puts older ones past ``KEPT`` (its WHEN: a
# log under the bound pays nothing more); a store keeping fewer (``SqlRepairs.kept``)
# trims again itself
TRIM_IN_TRIGGER: tuple[str, ...] = (
    f"""CREATE TRIGGER repairs_kept AFTER INSERT ON buffer_repairs WHEN NEW.seq > {KEPT} BEGIN
        DELETE FROM buffer_repairs WHERE buffer_id = NEW.buffer_id AND seq <= NEW.seq - {KEPT};
    END""",
)

# an owner's bytes since migration 24: user_usage's (records, vectors) and their buffers'
# rows and logs, summed from the headers (``usage_get`` too); only when a bytes quota is set
_BYTES_USED = quotasql.bytes_used("b.bytes + b.log_bytes")
_BYTES_CHECKED = quotasql.bytes_used("b.bytes + b.log_bytes", when_set=True)
_ENTRY_BYTES = "length(CAST(entry AS BLOB))"

# the log's bytes in the header, counted with its rows (decision 0135): the entries'
# bytes leave ``user_usage`` for ``buffers.log_bytes``; every trigger that checks the
# bytes quota sums them (the buffers' header, a record's write, a vector's insert)
IN_THE_HEADER: tuple[str, ...] = (
    "ALTER TABLE buffers ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0",
    f"""UPDATE buffers SET log_bytes = (SELECT COALESCE(SUM({_ENTRY_BYTES}), 0) FROM buffer_repairs
        WHERE buffer_id = buffers.id) WHERE id IN (SELECT buffer_id FROM buffer_repairs)""",
    """UPDATE user_usage SET bytes = bytes - (SELECT COALESCE(SUM(b.log_bytes), 0)
        FROM buffers AS b WHERE b.owner = user_usage.user_id)""",
    "DROP TRIGGER usage_repairs_insert",
    "DROP TRIGGER usage_repairs_delete",
    "DROP TRIGGER repairs_kept",
    f"""CREATE TRIGGER repairs_kept AFTER INSERT ON buffer_repairs WHEN NEW.seq > {KEPT} BEGIN
        UPDATE buffers SET log_bytes = log_bytes - (SELECT COALESCE(SUM({_ENTRY_BYTES}), 0)
            FROM buffer_repairs WHERE buffer_id = NEW.buffer_id AND seq <= NEW.seq - {KEPT})
            WHERE id = NEW.buffer_id;
        DELETE FROM buffer_repairs WHERE buffer_id = NEW.buffer_id AND seq <= NEW.seq - {KEPT};
    END""",
    "DROP TRIGGER usage_buffer_bytes",
    f"""CREATE TRIGGER usage_buffer_bytes AFTER UPDATE OF bytes, log_bytes ON buffers
        WHEN NEW.owner IS NOT NULL AND NEW.bytes + NEW.log_bytes > OLD.bytes + OLD.log_bytes
            AND flowmem_quota_set('bytes') BEGIN
        SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage AS u WHERE u.user_id = NEW.owner
            AND flowmem_over_quota('bytes', u.user_id, {_BYTES_USED});
    END""",
    "DROP TRIGGER usage_record_insert",
    quotasql.record_insert(_BYTES_CHECKED),
    "DROP TRIGGER usage_record_value",
    quotasql.record_value(_BYTES_CHECKED),
    "DROP TRIGGER usage_vectors_insert",
    quotasql.vectors_insert(_BYTES_CHECKED),
)

HELD_CHARS = 1500
"""The held entries' text a header keeps before they move to the table (decision 0148): about a dozen entries."""


def spill(buffer_id: str, kept: str) -> tuple[str, str, str]:
    """Move a header's held entries to the table, numbered after its newest, and keep the newest ``kept``.

    Three statements (for a store keeping fewer than ``KEPT``, and the undo of the upgrade tests):
    the held entries inserted (newest first in ``log_held``; ``json_each`` gives each
    entry's text back byte for byte: tests/store/test_repair_log_header.py), the header's
    held text emptied with its count capped at ``kept`` and the trimmed bytes taken off,
    the trimmed entries deleted.
    """
    past = f"(SELECT MAX(seq) FROM buffer_repairs WHERE buffer_id = {buffer_id}) - {kept}"
    held = f"('[' || substr((SELECT log_held FROM buffers WHERE id = {buffer_id}), 2) || ']')"
    return (
        f"""INSERT INTO buffer_repairs (buffer_id, seq, entry)
            SELECT {buffer_id}, n.base + json_array_length({held}) - h.key, h.value FROM json_each({held}) AS h,
                (SELECT COALESCE(MAX(seq), 0) AS base FROM buffer_repairs WHERE buffer_id = {buffer_id}) AS n""",
        f"""UPDATE buffers SET log_held = '', log_count = min(log_count, {kept}),
            log_bytes = log_bytes - (SELECT COALESCE(SUM({_ENTRY_BYTES}), 0) FROM buffer_repairs
                WHERE buffer_id = {buffer_id} AND seq <= {past}) WHERE id = {buffer_id}""",
        f"DELETE FROM buffer_repairs WHERE buffer_id = {buffer_id} AND seq <= {past}",
    )


def _kept_in_trigger() -> str:
    """The body of the header's trigger: the held entries moved past ``HELD_CHARS``, the log trimmed past ``KEPT``.

    The move (the first statement, only when the held text is over ``HELD_CHARS``) inserts
    them numbered after the table's newest; the trim takes the ``log_count - KEPT`` oldest
    entries off (the table's: the held ones are the newest), their bytes off the header.
    A log past its bound (a windowed buffer's, logging each eviction) pays the trim per
    entry, as the insert's trigger made it pay before, and no move.
    """
    held = "('[' || substr(NEW.log_held, 2) || ']')"
    oldest = f"(SELECT MIN(seq) FROM buffer_repairs WHERE buffer_id = NEW.id) + NEW.log_count - {KEPT}"
    return ";\n        ".join((
        f"""INSERT INTO buffer_repairs (buffer_id, seq, entry)
            SELECT NEW.id, n.base + json_array_length({held}) - h.key, h.value FROM json_each({held}) AS h,
                (SELECT COALESCE(MAX(seq), 0) AS base FROM buffer_repairs WHERE buffer_id = NEW.id) AS n
            WHERE length(NEW.log_held) > {HELD_CHARS}""",
        f"""UPDATE buffers SET log_held = CASE WHEN length(log_held) > {HELD_CHARS} THEN '' ELSE log_held END,
            log_count = min(log_count, {KEPT}), log_bytes = log_bytes - (SELECT COALESCE(SUM({_ENTRY_BYTES}), 0)
                FROM buffer_repairs WHERE buffer_id = NEW.id AND seq < {oldest}) WHERE id = NEW.id""",
        f"DELETE FROM buffer_repairs WHERE buffer_id = NEW.id AND seq < {oldest}",
    ))


_BODY = _kept_in_trigger()

# the newest entries held in the header row (decision 0148): an append that logs writes
# its entries' text into the header's own update (``log_held``, a page the append writes
# anyway), with their bytes and number (``log_count``, every entry the log holds); a
# trigger of that update moves them to the table once they pass ``HELD_CHARS`` and trims
# the log to the newest ``KEPT`` once it passes it: the insert's trim trigger goes. Reads
# merge the held entries, numbered after the table's newest.
HELD: tuple[str, ...] = (
    "ALTER TABLE buffers ADD COLUMN log_count INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE buffers ADD COLUMN log_held TEXT NOT NULL DEFAULT ''",
    """UPDATE buffers SET log_count = (SELECT COUNT(*) FROM buffer_repairs WHERE buffer_id = buffers.id)
        WHERE id IN (SELECT buffer_id FROM buffer_repairs)""",
    "DROP TRIGGER repairs_kept",
    f"""CREATE TRIGGER repairs_held AFTER UPDATE OF log_held ON buffers
        WHEN length(NEW.log_held) > {HELD_CHARS} OR NEW.log_count > {KEPT} BEGIN
        {_BODY};
    END""",
)

_SPILL = spill("?1", "?2")
_HELD_READ = "b.log_held, (SELECT COALESCE(MAX(seq), 0) FROM buffer_repairs WHERE buffer_id = b.id)"

SQL: dict[str, str] = {
    **statements("?"),
    # since migration 27 (decision 0148): a write's entries held in its header's own update
    # (``header_logged``) or, for a write with none of its own, in ``repairs_counted``: their
    # bytes, their texts before the held ones (newest first, each after a comma) and their number
    "header_logged": """UPDATE buffers SET count = ?, last_major = ?, bytes = ?, tokens = tokens + ?,
        log_bytes = log_bytes + ?, log_held = ? || log_held, log_count = log_count + ?, version = version + 1
        WHERE id = ?""",
    "header_listed_logged": """UPDATE buffers SET count = ?, last_major = ?, bytes = ?, tokens = tokens + ?,
        unanswered = ?, log_bytes = log_bytes + ?, log_held = ? || log_held, log_count = log_count + ?,
        version = version + 1 WHERE id = ?""",
    "repairs_counted": """UPDATE buffers SET log_bytes = log_bytes + ?, log_held = ? || log_held,
        log_count = log_count + ? WHERE id = ?""",
    # a store keeping fewer than ``KEPT``: the held entries moved and the log trimmed now
    "repairs_spill": _SPILL[0],
    "repairs_spill_header": _SPILL[1],
    "repairs_spill_trim": _SPILL[2],
    # the held entries and the table's newest number (the held ones follow it)
    "repairs_held": f"SELECT {_HELD_READ} FROM buffers AS b WHERE b.id = ?",
    "repairs_held@address": f"""SELECT {_HELD_READ} FROM buffers AS b
        WHERE b.scope = ? AND b.scope_id = ? AND b.key = ?""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    17: MIGRATION,  # the buffers' repair logs, counted against the owner's bytes quota (issue 37 §2)
    19: TRIM_IN_TRIGGER,  # the log's trim in a trigger of its insert: one statement an entry (decision 0124)
    24: IN_THE_HEADER,  # the log's bytes in the header, counted with its rows (decision 0135)
    27: HELD,  # the newest entries held in the header, moved to the table in batches (decision 0148)
}
