"""The pure modules import nothing that does I/O (DESIGN.md §6)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "flowmem"
PURE = [SRC / "core", SRC / "scope.py", SRC / "access.py", SRC / "formats"]
FORBIDDEN = {
    "sqlite3",
    "socket",
    "os",
    "time",
    "logging",
    "asyncio",
    "subprocess",
    "threading",
    "multiprocessing",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "random",
    "datetime",
    "urllib",
    "http",
    "httpx",
    "requests",
    "psycopg",
    "psycopg_pool",
    "select",
    "signal",
}
ALLOWED_FLOWMEM = {
    "flowmem.core",
    "flowmem.errors",
    "flowmem.scope",
    "flowmem.access",
    "flowmem.formats",
}


def _pure_files() -> list[Path]:
    files: list[Path] = []
    for target in PURE:
        if target.is_dir():
            files.extend(sorted(target.rglob("*.py")))
        elif target.exists():
            files.append(target)
    return files


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", _pure_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_pure_module_imports_no_io(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN, f"{path.name} imports {name}, which does I/O"
        if top == "flowmem":
            assert any(name == ok or name.startswith(ok + ".") for ok in ALLOWED_FLOWMEM), (
                f"{path.name} imports {name}, which is not pure"
            )
