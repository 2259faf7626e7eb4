"""The store's engine (issue 39 §1): each back-end lends it, and the lint keeps kinds of data on it.

``flowmem.store.engine`` names what a kind of data may use of its back-end. Here: every
back-end's engine commits a write that returns and takes back one that raises, lends a
snapshot, serializes a write at an address, and checks a write guard inside the write;
and ``make lint``'s ruff, with the project's configuration, fails on a kind of data that
reaches into a back-end's private member (and passes on the store as it is).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flowmem.errors import NotFoundError
from flowmem.store import open_store
from flowmem.store.base import SESSION_SCOPE, Address, SessionRecord, Store, WriteGuard
from flowmem.store.editor import SqlBufferEditor

ROOT = Path(__file__).resolve().parents[2]
KIND = ROOT / "src" / "flowmem" / "store" / "checkpoints" / "sql.py"


class _Undo(Exception):
    """Raised inside a write to roll it back."""


def _ruff(source: str, path: Path) -> subprocess.CompletedProcess[str]:
    """ruff check of ``source`` as if it were ``path``, with the project's configuration."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", str(path), "-"],
        input=source,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_store_package_uses_no_private_member_of_another_object() -> None:
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "SLF001", "src/flowmem/store"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # the one exception is psycopg's own PGconn._encoding, per-file in pyproject.toml
    flagged = [line for line in found.stdout.splitlines() if "SLF001" in line]
    assert flagged == [] or all("postgres/pipeline.py" in line for line in flagged), found.stdout


def test_a_kind_of_data_reaching_into_its_back_end_fails_the_lint() -> None:
    source = KIND.read_text(encoding="utf-8")
    assert _ruff(source, KIND).returncode == 0, "the kind of data as it stands passes"
    reach = source.replace(
        "self.store.write_at(address, run)",
        "self.store._write_serialized(address, run)  # type: ignore",
        1,
    )
    assert reach != source
    found = _ruff(reach, KIND)
    assert found.returncode != 0
    assert "SLF001" in found.stdout and "_write_serialized" in found.stdout


def _engine_count(store: Store, address: Address) -> int:
    """How many rows the buffer holds, read through the engine's snapshot."""
    engine: Any = store
    with engine.reading() as conn:
        row = conn.execute(engine.statements["count"], tuple(address)).fetchone()
    return 0 if row is None else int(row[0])


def _append_in(store: Store, tx: Any, address: Address, text: str) -> None:
    """Add one row to the buffer inside the engine's open write (``tx``: what it lent)."""
    row = {"role": "user", "content": text}
    engine: Any = store
    editor = SqlBufferEditor(engine.runner(tx), address)
    editor.append_row(row)
    editor.flush()


def test_each_backend_commits_a_write_at_an_address(store: Store) -> None:
    engine: Any = store
    address = Address(SESSION_SCOPE, "s-engine", "chat")
    store.create_session(SessionRecord("s-engine", "", None))
    engine.write_at(address, lambda tx: _append_in(store, tx, address, "kept"))
    engine.write_at(address, lambda tx: _append_in(store, tx, address, "too"), hold=False)
    assert _engine_count(store, address) == 2
    assert [row["content"] for row in store.load(address)] == ["kept", "too"]


def test_a_sql_write_that_raises_changes_nothing(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    engine: Any = store
    address = Address(SESSION_SCOPE, "s-engine", "chat")
    store.create_session(SessionRecord("s-engine", "", None))
    engine.write(lambda tx: _append_in(store, tx, address, "kept"))

    def undone(tx: Any) -> None:
        _append_in(store, tx, address, "undone")
        raise _Undo

    try:
        with pytest.raises(_Undo):
            engine.write_at(address, undone)
        assert [row["content"] for row in store.load(address)] == ["kept"]
        assert _engine_count(store, address) == 1
    finally:
        store.close()


def test_each_backend_checks_a_write_guard_inside_the_write(store: Store) -> None:
    engine: Any = store
    with pytest.raises(NotFoundError):
        engine.write(lambda tx: engine.check_guard(tx, WriteGuard(session_id="s-missing")))
    store.create_session(SessionRecord("s-held", "", None))
    assert engine.write(lambda tx: engine.check_guard(tx, WriteGuard(session_id="s-held"))) is None
