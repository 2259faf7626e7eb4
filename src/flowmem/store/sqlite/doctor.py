"""``flowmem doctor`` on a SQLite file: SQLite's integrity check, every stored text, every buffer's count.

Read only, on its own connection (no migration, no pragma that writes). SQLite's
``integrity_check`` finds damaged pages and cells, but not a flipped byte inside a
row's text (it does not read the texts): every JSON text flowmem stores is read back
as bytes and decoded, and every buffer's row count is compared with the rows it
holds (a page whose cells no longer parse reads short without an error). Issue 38 §5.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

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


def check_file(path: str) -> list[str]:
    """What is damaged in the flowmem database at ``path`` (an empty list: nothing found)."""
    file = Path(path)
    if not file.is_file():
        return [f"{path}: no such file"]
    try:
        conn = sqlite3.connect(f"file:{file.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return [f"{path}: cannot be opened: {exc}"]
    findings: list[str] = []
    try:
        conn.text_factory = bytes
        rows = conn.execute("PRAGMA integrity_check(100)").fetchall()
        findings += [
            f"integrity_check: {line}"
            for (text,) in rows
            for line in _text(text).splitlines()
            if line != "ok"
        ]
        tables = {_text(name) for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, (keys, column) in TEXTS.items():
            if table in tables:
                findings += _texts(conn, table, keys, column)
        if {"buffers", "buffer_rows"} <= tables:
            findings += _counts(conn)
    except sqlite3.Error as exc:
        findings.append(f"the database cannot be read: {exc}")
    finally:
        conn.close()
    return findings


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _texts(conn: sqlite3.Connection, table: str, keys: str, column: str) -> list[str]:
    """The rows of ``table`` whose ``column`` is not UTF-8 JSON, named by their keys."""
    found: list[str] = []
    bad = 0
    for row in conn.execute(f"SELECT {keys}, CAST({column} AS BLOB) FROM {table}"):
        *key, raw = row
        try:
            json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, AttributeError):
            bad += 1
            if len(found) < MAX_FINDINGS:
                where = ", ".join(f"{name.strip()}={_text(value)!r}" for name, value in zip(keys.split(","), key, strict=True))
                found.append(f"{table} ({where}): {column} is not UTF-8 JSON")
    if bad > len(found):
        found.append(f"{table}: {bad - len(found)} more rows whose {column} is not UTF-8 JSON")
    return found


def _counts(conn: sqlite3.Connection) -> list[str]:
    """The buffers that hold other than the rows they count."""
    return [
        f"buffer {_text(scope)}/{_text(key)} (id {buffer_id}) counts {count} rows but holds {held}"
        for buffer_id, scope, key, count, held in conn.execute(COUNTS)
        if count != held
    ][:MAX_FINDINGS]
