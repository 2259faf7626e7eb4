"""PostgreSQL's migration 27: a buffer's bytes reserved in ``user_usage`` (decision 0153, as SQLite's 25).

Until this migration every growing write of an owned buffer updated its owner's
``user_usage`` row (``flowmem_buffer_grown``): one more WAL record on every guarded or
service append (about 70–140 bytes). Since it ``buffers.reserved`` is what
``user_usage.bytes`` counts for the buffer, so that

    user_usage.bytes = the owner's other bytes (records, vectors) + Σ reserved
    reserved >= bytes + log_bytes  (for every owned buffer)

and ``user_usage.bytes`` is an upper bound of the owner's bytes. A header that outgrows
its reservation reserves again with slack (``SLACK``, SQLite's: used + max(16 KiB,
used / 8)): a trigger after the header's update writes the usage row and the header's
``reserved`` again, once every ``SLACK`` bytes or more of the buffer's growth (not a
``BEFORE`` trigger setting it in the same row version: that trigger locks the row first,
one more WAL record, ``Heap LOCK``, on every update). A growing write
checks the bytes quota against the upper bound (one row read, no write); only when that
is over does it give back its own slack and the owner's other buffers' unused
reservations (``reserved = bytes + log_bytes``), which makes ``user_usage.bytes`` exact,
and refuse when the exact bytes are over. The records' and vectors' check
(``flowmem_quota_check``) gives back the same way before it refuses. A buffer's deletion
gives its reservation back; ``usage_get`` stays exact (``user_usage.bytes`` less the
unused reservations).

Concurrency: the owner's usage row is the one lock a reservation or a give-back waits
for; a give-back skips the buffers another transaction is writing (``SKIP LOCKED``: such
a writer may hold its header's row while it waits for the usage row, and waiting for it
would deadlock). A skipped buffer keeps its committed reservation in the count: the
total stays an upper bound (never over the quota), and a refusal is exact but for the
unused slack of a buffer being written at that moment whose slack no earlier give-back
took (one reserved far from the quota, written concurrently with the write that reaches
it). Near the quota every growing write gives back, so the buffers written there hold no
slack.
"""

from __future__ import annotations

from flowmem.store.headers import TAIL
from flowmem.store.repairs import KEPT
from flowmem.store.repairs.postgres import HELD_CHARS

# the repair log's columns (repairs/postgres.py's migrations 23 and 25), in their order
_LOG_COLUMNS = (
    ("log_bytes", "BIGINT NOT NULL DEFAULT 0"),
    ("log_count", "BIGINT NOT NULL DEFAULT 0"),
    ("log_held", "TEXT NOT NULL DEFAULT ''"),
)
_MOVED = ("owner", *(name for name, _ in _LOG_COLUMNS))  # the columns migration 27 writes anew

# slack of a new reservation, SQLite's: used + max(16 KiB, used / 8)
SLACK = "GREATEST(16384, {used} / 8)"

# the owner's other buffers' unused reservations given back (those not being written by
# another transaction), their sum taken off the usage row; the new upper bound returned
_GIVE_BACK = """CREATE OR REPLACE FUNCTION flowmem_give_back(who TEXT, kept BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE total BIGINT;
    BEGIN
        WITH slack AS (SELECT id, reserved - bytes - log_bytes AS unused FROM buffers
                WHERE owner = who AND id IS DISTINCT FROM kept AND reserved > bytes + log_bytes
                FOR UPDATE SKIP LOCKED),
            given AS (UPDATE buffers AS b SET reserved = b.bytes + b.log_bytes FROM slack
                WHERE b.id = slack.id RETURNING slack.unused)
        UPDATE user_usage SET bytes = bytes - (SELECT COALESCE(SUM(unused), 0) FROM given)
            WHERE user_id = who RETURNING bytes INTO total;
        RETURN total;
    END $$"""

_USED = "NEW.bytes + NEW.log_bytes"

# a header's growth: reserve again past the reservation, check the upper bound, and past the
# quota give back (its own slack, then the owner's others') and check the exact bytes. An
# AFTER trigger, which writes the header again only for a new reservation: a BEFORE trigger
# would set it in the same row version, but its row lock is a WAL record on every update
_RESERVE = f"""CREATE OR REPLACE FUNCTION flowmem_buffer_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE used BIGINT := {_USED}; kept BIGINT := NEW.reserved; total BIGINT; quota_limit BIGINT;
    BEGIN
        quota_limit := NULLIF(current_setting('flowmem.quota_bytes', true), '')::BIGINT;
        IF used > kept THEN
            kept := used + {SLACK.format(used="used")};
            total := (flowmem_usage_add(NEW.owner, kept - NEW.reserved, 0, 0)).bytes;
        ELSIF quota_limit > 0 THEN
            SELECT u.bytes INTO total FROM user_usage AS u WHERE u.user_id = NEW.owner;
        END IF;
        IF quota_limit > 0 AND total > quota_limit THEN
            UPDATE user_usage SET bytes = bytes - (kept - used) WHERE user_id = NEW.owner;
            kept := used;
            total := flowmem_give_back(NEW.owner, NEW.id);
            IF total > quota_limit THEN
                RAISE EXCEPTION 'flowmem_quota' USING DETAIL = 'bytes ' || quota_limit, HINT = NEW.owner;
            END IF;
        END IF;
        IF kept <> NEW.reserved THEN
            UPDATE buffers SET reserved = kept WHERE id = NEW.id;
        END IF;
        RETURN NULL;
    END $$"""

# the trigger runs only on a growth that outgrows the reservation or is checked (a bytes
# quota set): without a quota, a growth inside the reservation calls no function at all
_QUOTA_SET = "NULLIF(current_setting('flowmem.quota_bytes', true), '')::BIGINT > 0"

MIGRATION: tuple[str, ...] = (
    # idempotent, as the upgrade tests run it again on a schema taken back in parts
    "DROP TRIGGER IF EXISTS buffers_usage_update ON buffers",
    "DROP TRIGGER IF EXISTS buffers_reserve ON buffers",
    "DROP TRIGGER IF EXISTS buffers_repairs_held ON buffers",
    "DROP TRIGGER IF EXISTS buffers_usage_insert ON buffers",
    "DROP TRIGGER IF EXISTS buffers_usage_delete ON buffers",
    # the owner and the repair log's columns written anew after the list of open calls,
    # the reservation among them (the old ones dropped): a HOT update's WAL record carries
    # the tuple's changed middle, so what most appends change (count … tokens, the list of
    # open calls) comes first, then what they leave (the owner, the reservation, the log's
    # bytes and count), then the held log, which a logging append prepends to (its older
    # entries: the tuple's unchanged end). The owner was in that middle: 8-16 bytes an append
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS owner_moved TEXT",
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS reserved BIGINT NOT NULL DEFAULT 0",
    *(
        f"ALTER TABLE buffers ADD COLUMN IF NOT EXISTS {name}_moved {kind}"
        for name, kind in _LOG_COLUMNS
    ),
    # the usage rows count each owned header's bytes exactly already (migration 12's trigger)
    f"""UPDATE buffers SET owner_moved = owner, {", ".join(f"{name}_moved = {name}" for name in _MOVED[1:])},
        reserved = CASE WHEN owner IS NULL THEN 0 ELSE bytes + log_bytes END""",
    *(f"ALTER TABLE buffers DROP COLUMN {name}" for name in _MOVED),
    *(f"ALTER TABLE buffers RENAME COLUMN {name}_moved TO {name}" for name in _MOVED),
    # migration 12's triggers of the owner's buffer count, on the owner's new column
    """CREATE TRIGGER buffers_usage_insert AFTER INSERT ON buffers FOR EACH ROW
        WHEN (NEW.owner IS NOT NULL) EXECUTE FUNCTION flowmem_buffer_grown()""",
    """CREATE TRIGGER buffers_usage_delete AFTER DELETE ON buffers FOR EACH ROW
        WHEN (OLD.owner IS NOT NULL) EXECUTE FUNCTION flowmem_buffer_dropped()""",
    f"""CREATE TRIGGER buffers_repairs_held AFTER UPDATE OF log_held ON buffers FOR EACH ROW
        WHEN (length(NEW.log_held) > {HELD_CHARS} OR NEW.log_count > {KEPT})
        EXECUTE FUNCTION flowmem_repairs_held()""",
    "CREATE INDEX IF NOT EXISTS buffers_owner ON buffers (owner) WHERE owner IS NOT NULL",
    _GIVE_BACK,
    _RESERVE,
    f"""CREATE TRIGGER buffers_reserve AFTER UPDATE OF bytes, log_bytes ON buffers FOR EACH ROW
        WHEN (NEW.owner IS NOT NULL AND {_USED} > OLD.bytes + OLD.log_bytes
            AND ({_USED} > NEW.reserved OR {_QUOTA_SET}))
        EXECUTE FUNCTION flowmem_buffer_reserve()""",
    # a buffer's deletion gives its reservation back (what the usage row counts for it)
    """CREATE OR REPLACE FUNCTION flowmem_buffer_dropped() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM flowmem_usage_add(OLD.owner, -OLD.reserved, -1, 0);
            RETURN NULL;
        END $$""",
    # a new header reserves what it holds (nothing, as the editor makes one)
    """CREATE OR REPLACE FUNCTION flowmem_buffer_new() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.reserved := CASE WHEN NEW.owner IS NULL THEN 0 ELSE NEW.bytes + NEW.log_bytes END;
            RETURN NEW;
        END $$""",
    # (after ``buffers_owner``, which sets the owner: BEFORE triggers run in their names' order)
    "DROP TRIGGER IF EXISTS buffers_reserve_new ON buffers",
    """CREATE TRIGGER buffers_reserve_new BEFORE INSERT ON buffers FOR EACH ROW
        EXECUTE FUNCTION flowmem_buffer_new()""",
    """CREATE OR REPLACE FUNCTION flowmem_buffer_grown() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE used user_usage%ROWTYPE;
        BEGIN
            used := flowmem_usage_add(NEW.owner, NEW.reserved, 1, 0);
            PERFORM flowmem_quota_check(NEW.owner, 'buffers', used.buffers);
            RETURN NULL;
        END $$""",
    # the records', vectors' and repair log's check: past the quota on the upper bound, the
    # owner's unused reservations are given back and the exact bytes checked
    """CREATE OR REPLACE FUNCTION flowmem_quota_check(who TEXT, quota TEXT, used BIGINT) RETURNS void
        LANGUAGE plpgsql AS $$
        DECLARE
            quota_limit BIGINT := NULLIF(current_setting('flowmem.quota_' || quota, true), '')::BIGINT;
        BEGIN
            IF quota_limit > 0 AND used > quota_limit THEN
                IF quota = 'bytes' THEN
                    used := flowmem_give_back(who, NULL);
                END IF;
                IF used > quota_limit THEN
                    RAISE EXCEPTION 'flowmem_quota' USING DETAIL = quota || ' ' || quota_limit, HINT = who;
                END IF;
            END IF;
        END $$""",
)

# what ``usage_get`` reads: the exact bytes, ``user_usage.bytes`` less the unused reservations
EXACT_BYTES = """{u}.bytes - (SELECT COALESCE(SUM(b.reserved - b.bytes - b.log_bytes), 0)
    FROM buffers AS b WHERE b.owner = {u}.user_id)"""

# 36 (decision 0199): the give-back over each buffer's bytes as derived with its header's tail
# (decision 0195: a plain append may leave the header unwritten, its rows counted by readers
# from the tail, headers.TAIL). Migration 27's read the stored ``bytes``: a buffer with a tail
# was given back to less than it holds, and its owner's usage counted low by the tail until the
# header's next write. Every other buffer's reservation is set to what it holds (given back
# past it, raised to it when a tail outgrew it), so the total returned is exact: those that
# another transaction is writing are skipped and keep theirs, as before
DERIVED_GIVE_BACK = f"""CREATE OR REPLACE FUNCTION flowmem_give_back(who TEXT, kept BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE total BIGINT;
    BEGIN
        WITH slack AS (SELECT h.id, h.reserved - h.bytes - t.size - h.log_bytes AS unused
                FROM buffers AS h CROSS JOIN LATERAL ({TAIL.format(h="h")}) AS t
                WHERE h.owner = who AND h.id IS DISTINCT FROM kept
                    AND h.reserved <> h.bytes + t.size + h.log_bytes
                FOR UPDATE OF h SKIP LOCKED),
            given AS (UPDATE buffers AS b SET reserved = b.reserved - slack.unused FROM slack
                WHERE b.id = slack.id RETURNING slack.unused)
        UPDATE user_usage SET bytes = bytes - (SELECT COALESCE(SUM(unused), 0) FROM given)
            WHERE user_id = who RETURNING bytes INTO total;
        RETURN total;
    END $$"""

DERIVED: tuple[str, ...] = (DERIVED_GIVE_BACK,)

__all__ = ["DERIVED", "EXACT_BYTES", "MIGRATION", "SLACK"]
