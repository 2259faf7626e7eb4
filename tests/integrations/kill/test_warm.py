"""The fork server does once what a program's turn would do lazily in each child (decision 0219)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integrations.kill import harness
from tests.integrations.kill.harness import CONTROL, FLOWMEM, PROGRAMS
from tests.integrations.kill.script import QUESTION
from tests.integrations.kill.warm import lazy_in_turn
from tests.migrated import migrated_sqlite_url


def _lazy(program: str, store: str, place: str, tmp_path: Path) -> dict[str, list[str]]:
    """What an unarmed turn of ``program`` imported and completed in a child of the matrix's server."""
    out = tmp_path / "lazy.json"
    module = f"tests.integrations.kill.programs.{program}"
    process = harness._fork_server().Process(
        target=lazy_in_turn, args=(module, store, place, "warm", QUESTION, str(out))
    )
    process.start()
    process.join(harness.CHILD_SECONDS)
    error = Path(str(out) + ".error")
    assert process.exitcode == 0, error.read_text(encoding="utf-8") if error.exists() else ""
    found: dict[str, list[str]] = json.loads(out.read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_programs_turn_imports_no_module_and_completes_no_model_in_the_child(
    program: str, tmp_path: Path
) -> None:
    place = migrated_sqlite_url(tmp_path / "flowmem.db")
    assert _lazy(program, FLOWMEM, place, tmp_path) == {"imported": [], "completed": []}


@pytest.mark.postgres
def test_a_turn_on_postgresql_imports_no_module_in_the_child(
    postgres_store_url: str, tmp_path: Path
) -> None:
    """``create_agent``'s ``FlowmemStore`` lists by the backend's own module (the other
    programs' PostgreSQL paths were found to import what their SQLite paths do)."""
    lazy = _lazy("langgraph_create_agent", FLOWMEM, postgres_store_url, tmp_path)
    assert lazy == {"imported": [], "completed": []}


@pytest.mark.parametrize("program", ["adk", "langgraph_create_agent"])
def test_a_control_turn_imports_no_module_and_completes_no_model_in_the_child(
    program: str, tmp_path: Path
) -> None:
    assert _lazy(program, CONTROL, str(tmp_path), tmp_path) == {"imported": [], "completed": []}
