"""The per-user quota's SQL that several migrations write (decision 0044), spelled once.

``OWNER_OF``: whose quota data at a scope counts against (``flowmem.store.base.quota_owner``
in SQL; both dialects). The rest is SQLite's: the usage triggers of records and vectors,
which migrations 23, 24 (``repairs/sqlite.py``) and 25 (``sqlite/reserved.py``) each
rewrote with another measure of an owner's bytes (``bytes_used``) and, since 25, the
statement that gives unused reservations back before the check (``give_back``). And
PostgreSQL's end of ``flowmem_buffer_grown``, which migrations 12 and 23
(``repairs/postgres.py``) wrote with another growth (``pg_grown_end``).

Released migrations are pinned by digest (``tests/store/test_migrations.py``): these
functions give each migration its text byte for byte, its indentation included
(``end``: the column of its ``END``, the depth the migration was written at).
"""

from __future__ import annotations

OWNER_OF = """CASE {t}.scope WHEN 'user' THEN {t}.scope_id
    WHEN 'session' THEN (SELECT owner FROM sessions WHERE sessions.id = {t}.scope_id) END"""

# an owner's bytes: their usage row's (records, vectors) and ``summed`` over their buffers
_BYTES_USED = """{u}.bytes + (SELECT COALESCE(SUM({summed}), 0) FROM buffers AS b
    WHERE b.owner = {u}.user_id)"""

# the triggers, written with their END at column 0 (``_at`` moves them)
_RECORD_INSERT = """CREATE TRIGGER usage_record_insert AFTER INSERT ON records BEGIN
    UPDATE records SET owner = {owner}
        WHERE scope = NEW.scope AND scope_id = NEW.scope_id AND key = NEW.key;
    INSERT INTO user_usage (user_id, bytes, buffers, records)
        SELECT owner, length(CAST(value AS BLOB)), 0, 1 FROM records
        WHERE scope = NEW.scope AND scope_id = NEW.scope_id AND key = NEW.key
            AND owner IS NOT NULL
        ON CONFLICT (user_id) DO UPDATE SET bytes = bytes + excluded.bytes, records = records + 1;
    {give_back}"""
# its check since migration 23, on ``{bytes}``; migration 12's, on the usage row unaliased
_RECORD_CHECK = """SELECT RAISE(ABORT, 'flowmem_quota') FROM records JOIN user_usage AS u ON u.user_id = owner
        WHERE scope = NEW.scope AND scope_id = NEW.scope_id AND key = NEW.key
        AND (flowmem_over_quota('records', u.user_id, u.records)
            OR flowmem_over_quota('bytes', u.user_id, {bytes}));
END"""
_RECORD_CHECK_12 = """SELECT RAISE(ABORT, 'flowmem_quota') FROM records JOIN user_usage ON user_id = owner
        WHERE scope = NEW.scope AND scope_id = NEW.scope_id AND key = NEW.key
        AND (flowmem_over_quota('records', user_id, user_usage.records)
            OR flowmem_over_quota('bytes', user_id, user_usage.bytes));
END"""

_RECORD_VALUE = """CREATE TRIGGER usage_record_value AFTER UPDATE OF value ON records
    WHEN NEW.owner IS NOT NULL BEGIN
    UPDATE user_usage SET bytes = bytes + length(CAST(NEW.value AS BLOB))
        - length(CAST(OLD.value AS BLOB)) WHERE user_id = NEW.owner;
    {give_back}SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage AS u WHERE u.user_id = NEW.owner
        AND length(CAST(NEW.value AS BLOB)) > length(CAST(OLD.value AS BLOB))
        AND flowmem_over_quota('bytes', u.user_id, {bytes});
END"""

_VECTORS_INSERT = """CREATE TRIGGER usage_vectors_insert AFTER INSERT ON record_vectors
    WHEN NEW.owner IS NOT NULL BEGIN
    UPDATE user_usage SET bytes = bytes + length(NEW.vec) WHERE user_id = NEW.owner;
    {give_back}SELECT RAISE(ABORT, 'flowmem_quota') FROM user_usage AS u WHERE u.user_id = NEW.owner
        AND flowmem_over_quota('bytes', u.user_id, {bytes});
END"""


# flowmem_buffer_grown's end (PostgreSQL): the owner's first usage row, then the bytes quota
# checked written out (flowmem_quota_check's test on the row just updated: no call per append)
_PG_GROWN_END = """IF NOT FOUND THEN
    used := flowmem_usage_add(NEW.owner, {grown}, 0, 0);
END IF;
IF {grew} THEN
    quota_limit := NULLIF(current_setting('flowmem.quota_bytes', true), '')::BIGINT;
    IF quota_limit > 0 AND used.bytes > quota_limit THEN
        RAISE EXCEPTION 'flowmem_quota'
            USING DETAIL = 'bytes ' || quota_limit, HINT = NEW.owner;
    END IF;
END IF;
RETURN NULL;"""


def _moved(template: str, pad: str) -> str:
    """``template`` with every line after its first moved right by ``pad``."""
    first, *rest = template.split("\n")
    return "\n".join([first, *(pad + line for line in rest)])


def bytes_used(summed: str, *, when_set: bool = False, u: str = "u") -> str:
    """An owner's bytes in SQL: ``{u}.bytes`` and ``summed`` over their buffers (``b``).

    ``when_set``: summed only when a bytes quota is set, else NULL (``flowmem_over_quota``
    then says no).
    """
    used = _BYTES_USED.format(u=u, summed=summed)
    return f"CASE WHEN flowmem_quota_set('bytes') THEN {used} END" if when_set else used


def _at(template: str, end: int, used: str, give_back: str, **values: str) -> str:
    """``template`` with its END at column ``end``, filled in (``give_back``: a statement or "")."""
    pad = " " * end
    before = f"{give_back};\n{pad}    " if give_back else ""
    return _moved(template, pad).format(bytes=used, give_back=before, **values)


def record_insert(used: str | None, *, end: int = 4, give_back: str = "") -> str:
    """SQLite's ``usage_record_insert``: the record's owner, its bytes and count, the quota check on ``used``.

    ``used`` None: migration 12's check, on the usage row's own bytes.
    """
    check = _RECORD_CHECK_12 if used is None else _RECORD_CHECK
    return _at(_RECORD_INSERT + check, end, used or "", give_back, owner=OWNER_OF.format(t="NEW"))


def record_value(used: str, *, end: int = 4, give_back: str = "") -> str:
    """SQLite's ``usage_record_value``: a record's change of size counted, a growth checked on ``used``."""
    return _at(_RECORD_VALUE, end, used, give_back)


def vectors_insert(used: str, *, end: int = 4, give_back: str = "") -> str:
    """SQLite's ``usage_vectors_insert``: a vector's bytes counted and checked on ``used``."""
    return _at(_VECTORS_INSERT, end, used, give_back)


def pg_grown_end(grown: str, grew: str, *, at: int) -> str:
    """PostgreSQL's ``flowmem_buffer_grown`` from its usage row's update on: ``grown`` bytes, checked when ``grew``.

    ``at``: the column its first line stands at in the migration.
    """
    return _moved(_PG_GROWN_END, " " * at).format(grown=grown, grew=grew)


__all__ = [
    "OWNER_OF",
    "bytes_used",
    "pg_grown_end",
    "record_insert",
    "record_value",
    "vectors_insert",
]
