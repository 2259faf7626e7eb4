"""PostgreSQL's buffer headers as their readers see them: the stored header and its tail (decision 0195).

Since decision 0195 a plain PostgreSQL append (its rows at the end, the list of open
calls unchanged, no repair logged) leaves the header (``buffers``) unwritten while the
rows appended since its last write, its *tail*, are fewer than ``TAIL_ROWS`` and its
bytes stay inside the buffer's reservation (``SqlBufferEditor``'s ``header_skipped``).
The tail is the buffer's rows past the header's last major: an append writes at the
next major, and every other change of the rows (a removal, a replacement, an insertion
before the end) writes the header, so the tail is always whole majors after it.

Every reader of the counters derives them here, in one place:

- ``count``: the header's and the tail's rows;
- ``last_major``: the newest tail row's major (the header's when the tail is empty);
- ``bytes``: the header's and the tail's bodies' ``octet_length`` (their UTF-8 size);
- ``tokens``: the header's and the tail's ``tokens`` column;
- ``version``: ``version << 20`` and the tail's rows, which every change of the rows
  moves (a header write increments ``version``, an append without it lengthens the tail).

``HEADS`` is ``buffers`` with those columns derived (a derived table: ``FROM {HEADS} AS
b``); ``TAIL`` the tail's aggregate for a header aliased ``{h}`` (a ``LATERAL`` part);
``derived`` the derived columns over both. SQLite reads its ``buffers`` as they are
(its header is written on every append, decision 0178).
"""

from __future__ import annotations

TAIL_ROWS = 8
"""K of decision 0193: a tail of this many rows gets the header written (readers sum at most K-1)."""

# the rows past the header's last major, aggregated: one range of the rows' primary key
TAIL = """SELECT COUNT(*) AS n, COALESCE(MAX(r.pos), 0) AS top,
        COALESCE(SUM(octet_length(r.body)), 0) AS size, COALESCE(SUM(r.tokens), 0) AS tok
        FROM buffer_rows AS r WHERE r.buffer_id = {h}.id AND r.pos >= (({h}.last_major + 1) << 20)"""


def derived(h: str, t: str) -> dict[str, str]:
    """The counters' SQL for a header aliased ``h`` and its tail's aggregate aliased ``t``."""
    return {
        "count": f"{h}.count + {t}.n",
        "last_major": f"GREATEST({h}.last_major, {t}.top >> 20)",
        "bytes": f"{h}.bytes + {t}.size",
        "tokens": f"{h}.tokens + {t}.tok",
        "version": f"({h}.version << 20) + {t}.n",
    }


_COLUMNS = ", ".join(f"{sql} AS {name}" for name, sql in derived("h", "t").items())
HEADS = f"""(SELECT h.id, h.scope, h.scope_id, h.key, h.owner, h.unanswered, h.reserved,
        h.log_bytes, {_COLUMNS}
    FROM buffers AS h CROSS JOIN LATERAL ({TAIL.format(h="h")}) AS t)"""

# what an owned buffer may grow to with its header unwritten: its reservation less its repair
# log's bytes, when no bytes quota is in force or the reservation was checked under the one in
# force (``reserved_under``, migration 29): a growth inside it is one the reservation trigger
# returns from at once (migration 33's first test), the quota checked when the reservation
# grows (decision 0199); -1 under a quota the reservation was not checked against (the header
# written: the trigger checks it); NULL: owned by nobody
ROOM = """CASE WHEN {h}.owner IS NULL THEN NULL
        WHEN {h}.reserved_under <> COALESCE(current_setting('flowmem.quota_bytes', true), '')
            AND COALESCE(NULLIF(current_setting('flowmem.quota_bytes', true), '')::BIGINT, 0) > 0 THEN -1
        ELSE {h}.reserved - {h}.log_bytes END"""

__all__ = ["HEADS", "ROOM", "TAIL", "TAIL_ROWS", "derived"]
