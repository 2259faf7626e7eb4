"""How far ``tests/`` mirrors ``src/flowmem`` (issue 39 §8): the share of modules with a test at the same path.

A module ``src/flowmem/a/b.py`` has a test at the same path when ``tests/a/test_b.py``
exists; a package's ``src/flowmem/a/__init__.py`` when ``tests/test_a.py`` or
``tests/a/test_a.py`` does. Counted are the modules that define a function or a
class (a package ``__init__.py`` that only re-exports is not code of its own).

    .venv/bin/python scripts/test_mirror.py            # the share, then each module without one
    .venv/bin/python scripts/test_mirror.py --summary  # the share only
    .venv/bin/python scripts/test_mirror.py --under store  # only below src/flowmem/store
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "flowmem"
TESTS = ROOT / "tests"


def defines_code(path: Path) -> bool:
    """Whether a module defines a function or a class at any level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in ast.walk(tree))


def mirrors(module: Path) -> list[Path]:
    """The test paths that mirror ``module`` (any one of them counts)."""
    relative = module.relative_to(SRC)
    if module.name == "__init__.py":
        package = relative.parent
        if package == Path("."):
            return [TESTS / "test_flowmem.py"]
        return [TESTS / package.parent / f"test_{package.name}.py", TESTS / package / f"test_{package.name}.py"]
    return [TESTS / relative.parent / f"test_{module.stem}.py"]


def modules(under: str | None = None) -> list[Path]:
    """The modules of ``src/flowmem`` (below ``under`` when given) that hold code."""
    base = SRC / under if under else SRC
    return sorted(p for p in base.rglob("*.py") if "__pycache__" not in p.parts and defines_code(p))


def main(argv: list[str] | None = None) -> int:
    """Print the share of modules with a test at the same path, and the modules without."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", action="store_true", help="print the share only")
    parser.add_argument("--under", help="a folder below src/flowmem")
    args = parser.parse_args(argv)
    found = modules(args.under)
    missing = [m for m in found if not any(t.exists() for t in mirrors(m))]
    have = len(found) - len(missing)
    print(f"{have} of {len(found)} modules ({100 * have / max(len(found), 1):.0f} %) have a test at the same path")
    if not args.summary:
        for module in missing:
            print(f"  {module.relative_to(ROOT)} -> {mirrors(module)[0].relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
