"""The packaging check keeps a venv's bytecode in uv's cache for the next venvs (decision 0196).

A small wheel made here, installed by uv into one venv whose Python imports it (and
writes its pyc), then harvested: a second venv installed from the same cache holds
that pyc, and its Python runs it as it is (not compiled again, not rewritten), with
the answers and the traceback (its own file's path) of a venv that compiled for
itself. What is not the interpreter's valid bytecode of the very file is never kept.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging import bytecode
from tests.packaging.envs import fresh_venv, uv_binary, uv_cache
from tests.packaging.steps import clean_env
from tests.packaging.test_envs import _wheel

pytestmark = pytest.mark.skipif(uv_binary() is None, reason="no uv in this venv")

TAG = sys.implementation.cache_tag
RUN = "import app; print(app.version()); print(app.version.__code__.co_filename)"


def _run(venv: Path) -> subprocess.CompletedProcess[str]:
    """``RUN`` in the venv's Python, bytecode written as a user's would be."""
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", RUN],
        capture_output=True,
        text=True,
        env=clean_env(venv),
    )


def _pyc(venv: Path) -> Path:
    (found,) = venv.glob(f"lib/python*/site-packages/app/__pycache__/__init__.{TAG}.pyc")
    return found


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """A wheelhouse holding ``app`` (its uv cache beside it, empty)."""
    made = tmp_path / "house"
    made.mkdir()
    _wheel(made, "app", "1.0")
    return made


def _install(tmp_path: Path, house: Path, name: str) -> Path:
    venv = tmp_path / name / "venv"
    fresh_venv(venv, house / "app-1.0-py3-none-any.whl", None, house, installer="uv")
    return venv


def test_a_harvested_pyc_is_what_the_next_venv_runs_as_the_plain_path_would(
    tmp_path: Path, house: Path
) -> None:
    first = _install(tmp_path, house, "first")
    ran = _run(first)
    written = _pyc(first)
    assert bytecode.harvest(first, uv_cache(house)) == 1
    cached = list(uv_cache(house).glob(f"archive-v0/*/app/__pycache__/__init__.{TAG}.pyc"))
    assert len(cached) == 1 and cached[0].read_bytes() == written.read_bytes()
    assert bytecode.harvest(first, uv_cache(house)) == 0  # kept once

    second = _install(tmp_path, house, "second")
    linked = _pyc(second)  # installed with the venv, before any import
    before = linked.stat()
    again = _run(second)
    after = _pyc(second).stat()
    assert (after.st_ino, after.st_mtime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
    )  # read, not rewritten
    assert after.st_nlink >= 3  # the cache's, the first venv's and this one's: one file

    plain = tmp_path / "plain-house"  # the plain path: a cache no venv's bytecode was kept in
    plain.mkdir()
    _wheel(plain, "app", "1.0")
    alone = tmp_path / "alone" / "venv"
    fresh_venv(alone, plain / "app-1.0-py3-none-any.whl", None, plain, installer="uv")
    assert not list(alone.rglob("*.pyc"))
    compiled = _run(alone)
    for done, venv in (
        (ran, first),
        (again, second),
        (compiled, alone),
    ):  # each its own file's code
        (site,) = venv.glob("lib/python*/site-packages")
        assert (done.returncode, done.stdout, done.stderr) == (
            0,
            f"1.0\n{site / 'app' / '__init__.py'}\n",
            "",
        )


def test_nothing_is_kept_with_the_seam_off_nor_from_a_venv_without_the_caches_files(
    tmp_path: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = _install(tmp_path, house, "one")
    _run(venv)
    monkeypatch.setattr(bytecode, "SHARED", False)
    assert bytecode.harvest(venv, uv_cache(house)) == 0
    monkeypatch.setattr(bytecode, "SHARED", True)
    copied = tmp_path / "pip" / "venv"  # pip copies the files: none is the cache's
    fresh_venv(copied, house / "app-1.0-py3-none-any.whl", None, house, installer="pip")
    _run(copied)
    assert bytecode.harvest(copied, uv_cache(house)) == 0
    assert not list(uv_cache(house).glob("archive-v0/*/app/__pycache__/*"))
    assert bytecode.harvest(venv, uv_cache(house)) == 1


def test_only_the_interpreters_valid_bytecode_of_that_very_file_is_kept(
    tmp_path: Path, house: Path
) -> None:
    venv = _install(tmp_path, house, "one")
    _run(venv)
    pyc = _pyc(venv)
    source = pyc.parent.parent / "__init__.py"
    good = pyc.read_bytes()
    assert bytecode.valid_for(pyc, source)
    for bad in (
        b"\x00\x00\x00\x00" + good[4:],  # another interpreter's magic number
        good[:4] + (1).to_bytes(4, "little") + good[8:],  # a hash-based pyc
        good[:8] + (int.from_bytes(good[8:12], "little") + 1).to_bytes(4, "little") + good[12:],
        good[:12] + (int.from_bytes(good[12:16], "little") + 1).to_bytes(4, "little") + good[16:],
        good[:10],
    ):
        pyc.unlink()
        pyc.write_bytes(bad)
        assert not bytecode.valid_for(pyc, source)
        assert bytecode.harvest(venv, uv_cache(house)) == 0
    pyc.unlink()
    pyc.write_bytes(good)
    assert bytecode.harvest(venv, uv_cache(house)) == 1
