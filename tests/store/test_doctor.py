"""``flowmem doctor``'s checks on damaged databases (issue 38 §5): each damage named, a sound file passes."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from flowmem.store import open_store
from flowmem.store.sqlite.doctor import check_file
from tests.store.damage import KEY, checkpoint, filled, flip_cells, flip_text, rows, truncate


def test_a_sound_file_has_no_findings_and_neither_has_a_busy_one(tmp_path: Path) -> None:
    path = tmp_path / "ok.db"
    filled(path)
    assert check_file(str(path)) == []
    store = open_store(f"sqlite:///{path}")
    try:
        store.append(KEY, rows(5, start=1000))  # in the WAL, not checkpointed: read too
        assert check_file(str(path)) == []
    finally:
        store.close()


def test_a_flipped_byte_in_a_rows_text_is_found_where_sqlites_check_passes(tmp_path: Path) -> None:
    path = tmp_path / "text.db"
    filled(path)
    flip_text(path)
    findings = check_file(str(path))
    assert len(findings) == 1 and "buffer_rows" in findings[0] and "not UTF-8 JSON" in findings[0]


def test_scrambled_cells_are_found_by_the_integrity_check(tmp_path: Path) -> None:
    path = tmp_path / "cells.db"
    filled(path)
    flip_cells(path)
    findings = check_file(str(path))
    assert any(f.startswith("integrity_check:") for f in findings)


def test_a_truncated_file_is_found(tmp_path: Path) -> None:
    path = tmp_path / "cut.db"
    filled(path)
    truncate(path)
    assert check_file(str(path)) != []
    assert check_file(str(tmp_path / "none.db")) == [f"{tmp_path / 'none.db'}: no such file"]


def test_flipped_bytes_in_the_wal_drop_the_transactions_from_there_never_serve_them(tmp_path: Path) -> None:
    """SQLite checksums every WAL frame: recovery stops at the first bad one, as after a power loss."""
    path = tmp_path / "wal.db"
    filled(path)
    store = open_store(f"sqlite:///{path}")
    for n in range(4):  # four transactions, each in the WAL
        store.append(KEY, rows(10, start=1000 + 10 * n))
    copy = tmp_path / "copy"
    copy.mkdir()
    for suffix in ("", "-wal"):  # the files as a crash would leave them (the store still open)
        shutil.copy(f"{path}{suffix}", copy / f"wal.db{suffix}")
    store.close()
    wal = copy / "wal.db-wal"
    data = bytearray(wal.read_bytes())
    at = data.index(b"MARK1020")  # in the third transaction's frames
    data[at : at + 4] = b"XXXX"
    wal.write_bytes(bytes(data))
    crashed = open_store(f"sqlite:///{copy / 'wal.db'}")
    try:
        found = crashed.load(KEY)
        assert crashed.count(KEY) == len(found)  # the count and the rows agree
        assert found == rows(300) + rows(len(found) - 300, start=1000)  # a prefix, never garbage
        assert 300 <= len(found) < 340
    finally:
        crashed.close()
    checkpoint(copy / "wal.db")
    assert check_file(str(copy / "wal.db")) == []


@pytest.mark.postgres
def test_postgres_a_sound_database_passes_and_a_row_that_is_not_json_is_found(postgres_db_url: str) -> None:
    store = open_store(postgres_db_url)
    try:
        store.append(KEY, rows(20))
        assert store.check_integrity() == []  # type: ignore[attr-defined]
        with store._pool.connection() as conn:  # type: ignore[attr-defined]
            conn.execute("UPDATE buffer_rows SET body = '{\"role\": \"us' WHERE pos = (SELECT min(pos) FROM buffer_rows)")
            conn.execute("DELETE FROM buffer_rows WHERE pos = (SELECT max(pos) FROM buffer_rows)")
        findings = store.check_integrity()  # type: ignore[attr-defined]
    finally:
        store.close()
    assert any("buffer_rows" in f and "not JSON" in f for f in findings), findings
    assert any("counts 20 rows but holds 19" in f for f in findings), findings


def test_postgres_settings_that_lose_data_on_power_loss_are_named() -> None:
    from flowmem.store.postgres.store import durability_warnings

    safe = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
    assert durability_warnings(safe) == []
    assert durability_warnings({}) == []
    unsafe = durability_warnings({"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"})
    assert [w.split("=")[0] for w in unsafe] == ["fsync", "full_page_writes", "synchronous_commit"]


@pytest.mark.postgres
def test_postgres_a_server_without_fsync_is_named_at_start(
    postgres_db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    open_store(postgres_db_url).close()  # the test server runs with fsync=off
    said = [r.getMessage() for r in caplog.records if "fsync=off" in r.getMessage()]
    assert said and "power loss" in said[0]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_tokens_permissions_that_are_not_json_are_found(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A damaged token row makes every request with that token 503: the doctor names it."""
    from flowmem.auth import create_token

    url = f"sqlite:///{tmp_path / 't.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_db_url")
    store = open_store(url)
    create_token(store, "alice")
    damage = "UPDATE tokens SET permissions = '[\"sessions:cr'"
    if backend == "sqlite":
        store.close()
        with sqlite3.connect(tmp_path / "t.db") as conn:
            conn.execute(damage)
        conn.close()
        findings = check_file(str(tmp_path / "t.db"))
    else:
        with store._pool.connection() as conn:  # type: ignore[attr-defined]  # the test's own schema
            conn.execute(damage)
        findings = store.check_integrity()  # type: ignore[attr-defined]
        store.close()
    assert any("tokens" in f and "permissions" in f for f in findings), findings
