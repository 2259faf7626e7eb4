"""SQLite's migration 25: a buffer's bytes reserved in ``user_usage`` (decision 0137, "the reservation").

Since migration 23 an append writes no usage row; an owner's bytes were ``user_usage``'s
plus the sum over their buffers' headers, and every growing write summed them where a
bytes quota is set (the default): O(the owner's buffers) an append. Since this one
``buffers.reserved`` is what ``user_usage.bytes`` counts for the buffer, so that

    user_usage.bytes = the owner's other bytes (records, vectors) + Σ reserved
    reserved >= bytes + log_bytes  (for every owned buffer)

and ``user_usage.bytes`` is an upper bound of the owner's bytes. A header that outgrows
its reservation reserves again with slack (``SLACK``): the one usage-row write, every
``SLACK`` bytes or more of the buffer's growth. A growing write checks the bytes quota
against the upper bound (one row read); only when that is over does the trigger give
the owner's unused reservations back (``reserved = bytes + log_bytes``: the sum over
their buffers, near the quota only), which makes ``user_usage.bytes`` exact, and refuse
when the exact bytes are over. After a write that passed, the upper bound is under the
quota, so a header growing inside its reservation is never past it. A buffer's deletion
gives its reservation back. ``usage_get`` stays exact (``user_usage.bytes`` less the
unused reservations).
"""

from __future__ import annotations

from flowmem.store import quotasql

# slack of a new reservation: used + max(16 KiB, used / 8). 16 KiB is ~30-150 messages
# of a small buffer (one usage-row write for them); used / 8 keeps a big buffer's
# rewrites geometric (one per 12.5% growth) and its overcount bounded by 12.5%
SLACK = "max(16384, ({used}) / 8)"
_USED = "NEW.bytes + NEW.log_bytes"


def give_back(owners: str) -> str:
    """The statement that gives the unused reservations back of ``owners`` (a subquery) past the quota.

    Runs over their buffers only when the upper bound (``user_usage.bytes``) is over the
    bytes quota: the ``IN`` list is then empty and no buffer is visited.
    """
    return f"""UPDATE buffers SET reserved = bytes + log_bytes
        WHERE owner IN (SELECT u.user_id FROM user_usage AS u WHERE u.user_id IN ({owners})
            AND flowmem_over_quota('bytes', u.user_id, u.bytes))
        AND reserved > bytes + log_bytes"""


def _buffer_bytes(gate: str = "") -> str:
    """The trigger of a header's growth: reserve again past the reservation, give back and check past the quota.

    ``gate``: more of its ``WHEN`` (migration 26: the body runs only when it has work).
    """
    return f"""CREATE TRIGGER usage_buffer_bytes AFTER UPDATE OF bytes, log_bytes ON buffers
        WHEN NEW.owner IS NOT NULL AND {_USED} > OLD.bytes + OLD.log_bytes{gate} BEGIN
        UPDATE buffers SET reserved = {_USED} + {SLACK.format(used=_USED)}
            WHERE id = NEW.id AND {_USED} > NEW.reserved;
        {give_back("NEW.owner")};
        SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage AS u WHERE u.user_id = NEW.owner
            AND flowmem_over_quota('bytes', u.user_id, u.bytes);
    END"""


_GREW = "length(CAST(NEW.value AS BLOB)) > length(CAST(OLD.value AS BLOB))"
_RECORD = "SELECT owner FROM records WHERE scope = NEW.scope AND scope_id = NEW.scope_id AND key = NEW.key"

MIGRATION: tuple[str, ...] = (
    "ALTER TABLE buffers ADD COLUMN reserved INTEGER NOT NULL DEFAULT 0",
    "UPDATE buffers SET reserved = bytes + log_bytes WHERE owner IS NOT NULL",
    """UPDATE user_usage SET bytes = bytes + (SELECT COALESCE(SUM(b.reserved), 0)
        FROM buffers AS b WHERE b.owner = user_usage.user_id)""",
    # every change of a reservation is counted in the owner's usage row
    """CREATE TRIGGER usage_buffer_reserved AFTER UPDATE OF reserved ON buffers
        WHEN NEW.owner IS NOT NULL BEGIN
        UPDATE user_usage SET bytes = bytes + NEW.reserved - OLD.reserved WHERE user_id = NEW.owner;
    END""",
    "DROP TRIGGER usage_buffer_bytes",
    _buffer_bytes(),
    "DROP TRIGGER usage_buffer_delete",
    """CREATE TRIGGER usage_buffer_delete AFTER DELETE ON buffers WHEN OLD.owner IS NOT NULL BEGIN
        UPDATE user_usage SET buffers = buffers - 1, bytes = bytes - OLD.reserved WHERE user_id = OLD.owner;
    END""",
    "DROP TRIGGER usage_record_insert",
    # the records' and vectors' triggers check the upper bound, after the give-back
    quotasql.record_insert("u.bytes", give_back=give_back(_RECORD)),
    "DROP TRIGGER usage_record_value",
    quotasql.record_value("u.bytes", give_back=give_back(f"SELECT NEW.owner WHERE {_GREW}")),
    "DROP TRIGGER usage_vectors_insert",
    quotasql.vectors_insert("u.bytes", give_back=give_back("NEW.owner")),
)

# SQLite's migration 26 (decision 0144): the growth trigger's body runs only when it has
# work, i.e. the header outgrew its reservation or the upper bound is over the bytes
# quota. Otherwise its three statements change nothing (no reservation to make, an empty
# give-back, no refusal), yet every growing append ran them, at about 40 % of its time
# (bench/repair_log.py, synchronous=OFF: a plain append's p50 0.160 -> 0.098 ms, the
# give-back's two temporary tables most of it). The quota is still checked
# on every growth (a quota lowered since the last write is seen), against the usage
# row's upper bound, read once in the WHEN.
GATED: tuple[str, ...] = (
    "DROP TRIGGER usage_buffer_bytes",
    _buffer_bytes(f"""
            AND ({_USED} > NEW.reserved OR flowmem_over_quota('bytes', NEW.owner,
                (SELECT bytes FROM user_usage WHERE user_id = NEW.owner)))"""),
)

# what ``usage_get`` reads: the exact bytes, ``user_usage.bytes`` less the unused reservations
EXACT_BYTES = """{u}.bytes - (SELECT COALESCE(SUM(b.reserved - b.bytes - b.log_bytes), 0)
    FROM buffers AS b WHERE b.owner = {u}.user_id)"""

__all__ = ["EXACT_BYTES", "GATED", "MIGRATION", "SLACK", "give_back"]
