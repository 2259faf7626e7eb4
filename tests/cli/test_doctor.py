"""``flowmem doctor``: 0 and "no damage found" on a sound database; 9, the findings and what to do on a damaged one."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import RunCli
from tests.store.damage import filled, flip_text, truncate


def test_a_sound_database(run_cli: RunCli, tmp_path: Path) -> None:
    filled(tmp_path / "ok.db")
    result = run_cli("doctor", "--database", f"sqlite:///{tmp_path / 'ok.db'}")
    assert result.code == 0, result.err
    assert "no damage found" in result.out


def test_a_damaged_database_exits_9_with_what_was_found_and_what_to_do(run_cli: RunCli, tmp_path: Path) -> None:
    for damage in (flip_text, truncate):
        path = tmp_path / f"{damage.__name__}.db"
        filled(path)
        damage(path)
        before = path.read_bytes()
        result = run_cli("doctor", "--database", f"sqlite:///{path}")
        assert result.code == 9, (damage.__name__, result.out, result.err)
        assert result.out.strip()  # the findings
        assert "flowmem backup" in result.err and "integrity_check" in result.err
        assert path.read_bytes() == before  # read only


def test_a_memory_database_has_nothing_to_check(run_cli: RunCli) -> None:
    result = run_cli("doctor", "--database", "memory://")
    assert result.code == 0 and "no damage found" in result.out
