"""The install commands of docs/guide.md work: a checkout installs into a fresh venv."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")


def _documented_extras() -> set[str]:
    found = re.findall(r"pip install '<checkout>\[([\w,-]+)\]'", GUIDE)
    return {extra for group in found for extra in group.split(",")}


def test_every_documented_extra_exists_and_every_extra_is_documented() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    user_extras = extras - {"dev", "bench"}
    assert _documented_extras() == user_extras


@pytest.mark.slow
def test_checkout_installs_into_a_fresh_venv_with_its_entry_point(tmp_path: Path) -> None:
    """``pip install '<checkout>[server]'`` offline: no index, no build isolation.

    The fresh venv borrows this interpreter's site-packages (appended after its own)
    for the dependencies and the build backend, so nothing is downloaded; flowmem
    itself must come from the new install.
    """
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copytree(ROOT / "src", checkout / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, checkout / name)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    (Path(purelib) / "_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_NO_CACHE_DIR": "1"}
    env.pop("PYTHONPATH", None)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", f"{checkout}[server]"],
        check=True, env=env, cwd=tmp_path, capture_output=True,
    )
    where = subprocess.run(
        [python, "-c", "import flowmem; print(flowmem.__file__)"],
        check=True, env=env, cwd=tmp_path, capture_output=True, text=True,
    ).stdout
    assert where.startswith(str(env_dir)), where
    shipped = subprocess.run(  # the inspector's files are package data (issue 29)
        [python, "-c", "from flowmem.ui import STATIC; print(sorted(p.name for p in STATIC.iterdir()))"],
        check=True, env=env, cwd=tmp_path, capture_output=True, text=True,
    ).stdout.strip()
    assert shipped == "['app.css', 'app.js', 'index.html', 'repairs.js']", shipped
    helped = subprocess.run(
        [env_dir / "bin" / "flowmem", "--help"], env=env, cwd=tmp_path, capture_output=True, text=True,
    )
    assert helped.returncode == 0, helped.stderr
    assert "serve" in helped.stdout
