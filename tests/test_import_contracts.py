"""The import contracts of ``make lint`` catch a new cycle (issue 25).

A copy of ``src`` gets one import that closes a cycle inside ``flowmem.api``;
import-linter, run on the copy with the project's own configuration, must fail,
and pass on the unchanged copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project's sources and configuration."""
    if not LINT.exists():
        pytest.skip("import-linter is not installed (the dev extra)")
    copy = tmp_path_factory.mktemp("contracts")
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def test_the_contracts_hold_on_the_sources(tree: Path) -> None:
    found = _lint(tree)
    assert found.returncode == 0, found.stdout + found.stderr


@pytest.mark.parametrize(
    ("module", "cycle"),
    [
        ("api/lookup.py", "from flowmem.api import deps  # noqa: F401"),  # a leaf importing up
        ("api/pool.py", "from flowmem.api.fast import route  # noqa: F401"),  # the old cycle
        ("store/rows.py", "from flowmem.store import sqlite  # noqa: F401"),  # rows under backends
        ("store/postgres/queries.py", "from flowmem.store.postgres import store  # noqa: F401"),
        ("store/sqlite/schema.py", "from flowmem.store.sqlite import queries  # noqa: F401"),
        # a kind of data naming its back-end rather than the engine (issue 39 §1)
        ("store/checkpoints/sql.py", "from flowmem.store import sqlbase  # noqa: F401"),
        ("store/archive/sql.py", "from flowmem.store import sqlite  # noqa: F401"),
        ("store/engine.py", "from flowmem.store import sqlengine  # noqa: F401"),  # under its users
    ],
    ids=[
        "leaf-imports-deps",
        "pool-imports-route",
        "rows-import-sqlite",
        "pg-queries",
        "lite-schema",
        "kind-imports-sqlbase",
        "kind-imports-sqlite",
        "engine-imports-sqlengine",
    ],
)
def test_a_deliberate_cycle_breaks_a_contract(tree: Path, module: str, cycle: str) -> None:
    path = tree / "src" / "flowmem" / module
    original = path.read_text(encoding="utf-8")
    path.write_text(original + "\n" + cycle + "\n", encoding="utf-8")
    try:
        found = _lint(tree)
    finally:
        path.write_text(original, encoding="utf-8")
    assert found.returncode != 0
    assert "BROKEN" in found.stdout
