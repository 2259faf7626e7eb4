"""``flowmem doctor`` on a SQLite file: SQLite's integrity check, every stored text, every buffer's count.

Read only, on its own connection (no migration, no pragma that writes). SQLite's
``integrity_check`` finds damaged pages and cells, but not a flipped byte inside a
row's text (it does not read the texts): every JSON text flowmem stores is read back
as bytes and decoded, and every buffer's row count is compared with the rows it
holds (a page whose cells no longer parse reads short without an error), as
``flowmem.store.doctor`` checks them. Issue 38 §5.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from flowmem.store.doctor import COUNTS, TEXTS, miscounted, not_json


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
                texts = conn.execute(f"SELECT {keys}, CAST({column} AS BLOB) FROM {table}")
                findings += not_json(table, keys, column, texts, _json, "UTF-8 JSON", _text)
        if {"buffers", "buffer_rows"} <= tables:
            findings += miscounted(conn.execute(COUNTS), _text)
    except sqlite3.Error as exc:
        findings.append(f"the database cannot be read: {exc}")
    finally:
        conn.close()
    return findings


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _json(raw: bytes) -> object:
    """The JSON value of a stored text read as bytes (ValueError unless it is UTF-8 JSON)."""
    return json.loads(raw.decode("utf-8"))
