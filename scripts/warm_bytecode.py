"""Compile the checkout once before ``make test``'s workers start (decision 0173).

In a fresh clone no test module has its assert-rewritten code cached, so every pytest
worker, starting at the same moment, parses, rewrites and compiles all of tests/ (and
each compiles src/flowmem, and what the tests import of bench/ and scripts/) for itself: ~13 s of CPU more per worker than a warm
collection. This writes, once, what each worker would write for itself: for every
module pytest rewrites (``conftest.py``, ``test_*.py``, ``*_test.py``), the pyc its
assertion rewriter caches (``pytest_pyc``: the same bytes pytest writes, a hash-based
pyc: tests/test_warm_bytecode.py), and for every other module of those trees the ordinary pyc
the import system writes (``compileall``). A pyc already valid is left as it is.

Usage: python scripts/warm_bytecode.py [ROOT]  (the checkout; default: this script's)
"""

from __future__ import annotations

import compileall
import fnmatch
import sys
from pathlib import Path

from _pytest.assertion import rewrite

REWRITTEN = ("conftest.py", "test_*.py", "*_test.py")
"""The modules pytest's assertion rewriter takes (conftest files and pytest's default ``python_files``)."""


def rewritten(path: Path) -> bool:
    """True when pytest rewrites ``path``'s asserts on import (and caches the result in its own pyc)."""
    return any(fnmatch.fnmatch(path.name, pattern) for pattern in REWRITTEN)


def pytest_pyc(source: Path) -> Path:
    """Where pytest's assertion rewriter caches ``source``'s rewritten code."""
    return rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)


def warm_rewritten(source: Path) -> bool:
    """Write ``source``'s rewritten pyc as pytest would; False when a valid one was there already."""
    pyc = pytest_pyc(source)
    if rewrite._read_pyc(source, pyc) is not None:  # noqa: SLF001 - pytest has no public API for its pyc
        return False
    source_hash, code = rewrite._rewrite_test(source, None)  # type: ignore[arg-type]  # noqa: SLF001 - no ini: its defaults
    pyc.parent.mkdir(parents=True, exist_ok=True)
    temporary = pyc.with_name(f"{pyc.name}.warm")
    with open(temporary, "wb") as out:
        rewrite._write_pyc_fp(out, source_hash, code)  # noqa: SLF001
    temporary.replace(pyc)  # atomic, as pytest's own write: a worker never reads half a pyc
    return True


def warm(root: Path) -> tuple[int, int]:
    """Warm ``root``'s src/, tests/ and what tests import of bench/ and scripts/.

    Returns (rewritten pycs written, ordinary modules compiled or already current).
    """
    written = plain = 0
    for tree in (root / "src", root / "tests", root / "bench", root / "scripts"):
        for source in sorted(tree.rglob("*.py")):
            if tree.name == "tests" and rewritten(source):
                written += warm_rewritten(source)
            else:
                plain += bool(compileall.compile_file(str(source), quiet=2))
    return written, plain


def main() -> None:
    """Warm the checkout named on the command line (default: this script's)."""
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    written, plain = warm(root)
    print(
        f"warm_bytecode: {written} rewritten test modules written, {plain} modules compiled or current"
    )


if __name__ == "__main__":
    main()
