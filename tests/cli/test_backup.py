"""``flowmem backup``: a copy of a SQLite database; anything else is a clear refusal."""

from __future__ import annotations

from pathlib import Path

from flowmem.store import Address, open_store
from tests.cli.conftest import RunCli

KEY = Address("global", "", "k")


def test_backup_copies_the_database(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    store = open_store(url)
    store.put_record(KEY, "v", None)
    store.close()
    result = run_cli("backup", str(tmp_path / "copy.db"), "--database", url)
    assert result.code == 0, result.err
    assert "backed up" in result.out
    copy = open_store(f"sqlite:///{tmp_path / 'copy.db'}")
    assert copy.get_record(KEY, 0.0) == (True, "v")
    copy.close()


def test_backup_refusals(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    open_store(url).close()  # backup reads an existing database; it creates none
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"keep")
    exists = run_cli("backup", str(taken), "--database", url)
    assert exists.code == 5 and "never overwrites" in exists.err
    assert taken.read_bytes() == b"keep"
    memory = run_cli("backup", str(tmp_path / "m.db"), "--database", "memory://")
    assert memory.code == 2 and "pg_dump" in memory.err
    assert not (tmp_path / "m.db").exists()
