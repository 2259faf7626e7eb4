"""What ``flowmem doctor`` checks the same way in every SQL back-end: the JSON texts, the buffers' counts.

``sqlite/doctor.py`` and ``postgres/doctor.py`` read their database their own way
(SQLite's integrity check on a read-only file; PostgreSQL's tables read whole) and
hand the rows to these: every JSON text flowmem stores (``TEXTS``: its table, key
columns and text column) decoded, and every buffer's row count (``COUNTS``) compared
with the rows it holds. Issue 38 §5.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

MAX_FINDINGS = 50  # findings reported per check; the rest are counted
# table -> (its key columns, the JSON text column flowmem writes)
TEXTS = {
    "records": ("scope, scope_id, key", "value"),
    "buffer_rows": ("buffer_id, pos", "body"),
    "sessions": ("id", "metadata"),
    "transcripts": ("session_id, seq", "body"),
    "tokens": ("id", "permissions"),
}
COUNTS = (
    "SELECT b.id, b.scope, b.key, b.count, "
    "(SELECT count(*) FROM buffer_rows r WHERE r.buffer_id = b.id) FROM buffers b"
)


def _as_is(value: Any) -> Any:
    return value


def not_json(
    table: str,
    keys: str,
    column: str,
    rows: Iterable[Sequence[Any]],
    parse: Callable[[Any], object],
    what: str = "JSON",
    text: Callable[[Any], Any] = _as_is,
) -> list[str]:
    """The rows (``keys``' values, then ``column``'s) that ``parse`` refuses, named by their keys (``text`` of each)."""
    found: list[str] = []
    bad = 0
    for *key, raw in rows:
        try:
            parse(raw)
        except (ValueError, AttributeError):  # UnicodeDecodeError is a ValueError
            bad += 1
            if len(found) < MAX_FINDINGS:
                names = keys.split(",")
                where = ", ".join(f"{n.strip()}={text(v)!r}" for n, v in zip(names, key, strict=True))
                found.append(f"{table} ({where}): {column} is not {what}")
    if bad > len(found):
        found.append(f"{table}: {bad - len(found)} more rows whose {column} is not {what}")
    return found


def miscounted(rows: Iterable[Sequence[Any]], text: Callable[[Any], Any] = _as_is) -> list[str]:
    """The buffers of ``COUNTS``' rows that hold other than the rows they count."""
    return [
        f"buffer {text(scope)}/{text(key)} (id {buffer_id}) counts {count} rows but holds {held}"
        for buffer_id, scope, key, count, held in rows
        if count != held
    ][:MAX_FINDINGS]


__all__ = ["COUNTS", "MAX_FINDINGS", "TEXTS", "miscounted", "not_json"]
