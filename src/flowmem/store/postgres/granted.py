"""PostgreSQL's migration 29: a reservation's bytes quota checked when it is granted (decision 0158).

Migration 27 (``reserved``) reserved a buffer's bytes in its owner's usage row, so that
a growth inside the reservation writes no usage row; but with a bytes quota set (the
default, 1 GiB) every growth of an owned buffer still ran ``flowmem_buffer_reserve``
to read the usage row and compare it with the quota, and every header update of any
buffer, owned or not, paid for its trigger's ``WHEN``: PostgreSQL reads a trigger's
condition from its stored text and prepares it anew in every statement that updates
its columns (about 20–30 µs of server CPU per append on a quiet machine, most of it
for ``current_setting(…)``'s ``NULLIF`` and cast, measured with pgbench and ``perf``).

Since this migration the quota is checked when a reservation is granted (or given back)
and again when the quota in force is not the one it was checked against:

    buffers.reserved_under = the bytes quota setting (``flowmem.quota_bytes``, as text)
                             the reservation was last checked against ('' = none)

A check leaves the owner's upper bound (``user_usage.bytes``) at or under the quota;
every write that raises the bound checks it (a reservation here, a record's or a
vector's ``flowmem_quota_check``), so a growth inside a reservation checked against the
quota in force, which leaves the bound as it is, would pass the check: it is not made.
The trigger's condition is the growth of an owned buffer past its reservation or under
another quota than its last check's, with no cast; it calls no function otherwise.

One thing differs from migration 27: processes that give one owner different bytes
quotas. Each checks its own quota whenever the bound rises and whenever it writes a
buffer another quota checked last, but a growth inside a reservation it checked
itself is not checked again when a process with a higher quota raised the bound since
(migration 27 refused it when the owner's exact bytes were over the lower quota).
"""

from __future__ import annotations

from flowmem.store.postgres.reserved import SLACK

_USED = "NEW.bytes + NEW.log_bytes"
_QUOTA = "current_setting('flowmem.quota_bytes', true)"

# migration 27's function, with the quota it checked recorded in the header beside the
# reservation; a growth checked under another quota than the reservation's is checked
# on the upper bound like any growth (given back past it, refused on the exact bytes)
_RESERVE = f"""CREATE OR REPLACE FUNCTION flowmem_buffer_reserve() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE used BIGINT := {_USED}; kept BIGINT := NEW.reserved; total BIGINT; quota_limit BIGINT;
        under TEXT := COALESCE({_QUOTA}, '');
    BEGIN
        quota_limit := NULLIF(under, '')::BIGINT;
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
        IF kept <> NEW.reserved OR under <> NEW.reserved_under THEN
            UPDATE buffers SET reserved = kept, reserved_under = under WHERE id = NEW.id;
        END IF;
        RETURN NULL;
    END $$"""

MIGRATION: tuple[str, ...] = (
    # a new column at the row's end: the header's HOT update carries only the changed
    # middle of the tuple, and appends do not change it
    "ALTER TABLE buffers ADD COLUMN IF NOT EXISTS reserved_under TEXT NOT NULL DEFAULT ''",
    "DROP TRIGGER IF EXISTS buffers_reserve ON buffers",
    _RESERVE,
    # ('' under a quota set: checked at the next growth, as every buffer after this upgrade)
    f"""CREATE TRIGGER buffers_reserve AFTER UPDATE OF bytes, log_bytes ON buffers FOR EACH ROW
        WHEN (NEW.owner IS NOT NULL AND {_USED} > OLD.bytes + OLD.log_bytes
            AND ({_USED} > NEW.reserved OR NEW.reserved_under <> {_QUOTA}))
        EXECUTE FUNCTION flowmem_buffer_reserve()""",
)

# 30 (decision 0158): migration 29's condition moved into the function, the trigger's own
# ``WHEN`` left with the owner alone. PostgreSQL reads a trigger's condition from its
# stored text and prepares it in every statement that updates the trigger's columns,
# every append's header update (29's: about 10 µs of server CPU, owned buffer or not);
# a PL/pgSQL function's expressions are prepared once per session, so an owned buffer's
# growth inside its checked reservation costs less as a call that returns at once than
# as that condition (measured: ``bench/pg_append_cpu.py``, docs/performance.md)
_GATED = _RESERVE.replace(
    """    BEGIN
        quota_limit := NULLIF(under, '')::BIGINT;""",
    """    BEGIN
        -- migration 29's condition: an owned buffer's growth past its reservation or under
        -- another quota than its last check's (an unset quota is none: nothing to check)
        IF used <= OLD.bytes + OLD.log_bytes OR (used <= kept AND under IN (NEW.reserved_under, '')) THEN
            RETURN NULL;
        END IF;
        quota_limit := NULLIF(under, '')::BIGINT;""",
)
if _GATED == _RESERVE:  # pragma: no cover - an edit of _RESERVE missed the anchor
    raise RuntimeError("migration 30's function lost its gate")

GATED: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS buffers_reserve ON buffers",
    _GATED,
    """CREATE TRIGGER buffers_reserve AFTER UPDATE OF bytes, log_bytes ON buffers FOR EACH ROW
        WHEN (NEW.owner IS NOT NULL) EXECUTE FUNCTION flowmem_buffer_reserve()""",
)

# 33 (decision 0189): migration 30's function with a first test of the common case, an
# owned buffer's growth inside a reservation checked under the quota in force, which returns
# before anything else: PL/pgSQL evaluates a block's DECLARE initializers (the used bytes,
# the reservation, the quota's setting) at every entry, so migration 30's function did that
# work on every header update of an owned buffer before its gate returned. Its block, the
# rest unchanged, runs for every other case (server instructions per header update of an
# owned buffer, the update alone: +42k over one owned by nobody with migration 30's, +29k
# with this; unowned: no call either way). Checking the reservation in the writers'
# statements instead (no trigger) was measured dearer: decision 0189.
_FIRST = f"NEW.bytes + NEW.log_bytes <= NEW.reserved AND NEW.reserved_under = {_QUOTA}"
_HEAD, _BODY = _GATED.split(" AS $$\n", 1)
_FAST = (
    f"{_HEAD} AS $$\n    BEGIN\n        IF {_FIRST} THEN\n            RETURN NULL;\n        END IF;\n"
    + _BODY.removesuffix(" $$")
    + ";\n    END $$"
)
if not _BODY.endswith("END $$"):  # pragma: no cover - an edit of _RESERVE moved its end
    raise RuntimeError("migration 33's function lost its block")

FIRST_TEST: tuple[str, ...] = (_FAST,)

__all__ = ["FIRST_TEST", "GATED", "MIGRATION"]
