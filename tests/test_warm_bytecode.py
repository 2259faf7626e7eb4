"""scripts/warm_bytecode.py writes the pyc pytest's assertion rewriter would write, and pytest then uses it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location(
    "warm_bytecode", ROOT / "scripts" / "warm_bytecode.py"
)
assert SPEC is not None and SPEC.loader is not None
warm_bytecode = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(warm_bytecode)

SAMPLE = """
from helper import ONE

def test_one_is_two():
    assert ONE + 0 == 2
"""


def _pytest(root: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "PYTHONDONTWRITEBYTECODE"))
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly",
         "-c", os.devnull, "--rootdir", str(root), str(root / "tests")],
        capture_output=True, text=True, timeout=120, cwd=root,
        # no installed plugin (~1.2 s of imports a run): the rewriting checked is pytest's own
        env={**env, "PYTHONPATH": str(root / "src"), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )  # fmt: skip


def _checkout(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "helper.py").write_text("ONE = 1\n")
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text(
        "def pytest_configure(config):\n    assert config is not None\n"
    )
    sample = root / "tests" / "test_sample.py"
    sample.write_text(SAMPLE)
    return sample


def test_the_warmed_pyc_is_byte_for_byte_the_one_pytest_writes(tmp_path: Path) -> None:
    sample = _checkout(tmp_path)
    pyc = warm_bytecode.pytest_pyc(sample)
    written, plain = warm_bytecode.warm(tmp_path)
    assert (written, plain) == (
        2,
        1,
    )  # conftest.py and test_sample.py rewritten; src/helper.py compiled
    warmed = pyc.read_bytes()
    pyc.unlink()
    _pytest(tmp_path)  # pytest rewrites the module itself and caches it
    assert pyc.read_bytes() == warmed
    assert warm_bytecode.warm(tmp_path) == (0, 1)  # valid pycs are left as they are


def test_pytest_runs_the_warmed_rewritten_code_without_rewriting_again(tmp_path: Path) -> None:
    sample = _checkout(tmp_path)
    warm_bytecode.warm(tmp_path)
    pyc = warm_bytecode.pytest_pyc(sample)
    before = pyc.stat()
    done = _pytest(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "assert (1 + 0) == 2" in done.stdout  # the rewritten assert's explanation
    after = pyc.stat()
    assert (after.st_ino, after.st_mtime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
    )  # read, not written again
    assert list(pyc.parent.glob("*.pyc.*")) == []  # no temporary file left behind
