"""The fork server does once what a program's turn would do lazily in each child (decision 0219)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integrations.kill import harness
from tests.integrations.kill.harness import CONTROL, FLOWMEM, PROGRAMS
from tests.integrations.kill.script import QUESTION
from tests.integrations.kill.warm import lazy_in_turns
from tests.migrated import migrated_sqlite_url

NOTHING = {"imported": [], "completed": []}


def _lazy(turns: list[tuple[str, str, str, str]], tmp_path: Path) -> dict[str, object]:
    """What each turn imported and completed, run in turn in one child of the matrix's server."""
    out = tmp_path / "lazy.json"
    process = harness._fork_server().Process(target=lazy_in_turns, args=(turns, QUESTION, str(out)))
    process.start()
    process.join(harness.CHILD_SECONDS)
    error = Path(str(out) + ".error")
    assert process.exitcode == 0, error.read_text(encoding="utf-8") if error.exists() else ""
    found: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return found


def _module(program: str) -> str:
    return f"tests.integrations.kill.programs.{program}"


def test_no_programs_turn_imports_a_module_or_completes_a_model_in_the_child(
    tmp_path: Path,
) -> None:
    """Every program on SQLite, and the ADK and ``create_agent`` controls."""
    turns = [
        (_module(p), FLOWMEM, migrated_sqlite_url(tmp_path / f"{p}.db"), "warm") for p in PROGRAMS
    ]
    for program in ("adk", "langgraph_create_agent"):
        place = tmp_path / f"{program}-control"
        place.mkdir()
        turns.append((_module(program), CONTROL, str(place), "warm"))
    assert _lazy(turns, tmp_path) == {f"{m} {s}": NOTHING for m, s, _, _ in turns}


@pytest.mark.postgres
def test_a_turn_on_postgresql_imports_no_module_in_the_child(
    postgres_store_url: str, tmp_path: Path
) -> None:
    """``create_agent``'s ``FlowmemStore`` lists by the backend's own module (the other
    programs' PostgreSQL paths were found to import what their SQLite paths do)."""
    turns = [(_module("langgraph_create_agent"), FLOWMEM, postgres_store_url, "warm")]
    assert _lazy(turns, tmp_path) == {f"{turns[0][0]} {FLOWMEM}": NOTHING}
