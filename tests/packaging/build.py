"""Build the sdist and, from it, the wheel; check that the source tree builds the same wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.packaging.wheel import contents

# what a fresh clone's source tree is without git: everything but what .gitignore names
UNTRACKED = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                   ".*_cache", ".hypothesis", "*.db", "*.db-*", "flowmem-admin-token")  # fmt: skip
SDIST_REQUIRED = ("pyproject.toml", "README.md", "LICENSE", "PKG-INFO", "src/flowmem/__init__.py",
                  "src/flowmem/py.typed", "src/flowmem/ui/static/index.html")  # fmt: skip


def build(source: Path, out: Path, *, sdist: bool = True) -> list[Path]:
    """``python -m build`` without isolation (the dev venv has the backend): the files it wrote.

    With ``sdist`` it builds the sdist, then the wheel from the unpacked sdist (what a
    user's ``pip install`` of the sdist does); without, the wheel from ``source``.
    """
    before = set(out.glob("*")) if out.exists() else set()
    kind = [] if sdist else ["--wheel"]
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", *kind, "--outdir", str(out), str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"python -m build {source} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return sorted(set(out.glob("*")) - before)


def source_tree(root: Path, into: Path) -> Path:
    """A copy of the checkout's source files: git's tracked and unignored ones, or all but the ignored."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        capture_output=True,
    )
    if listed.returncode != 0:
        shutil.copytree(root, into, ignore=UNTRACKED)
        return into
    for name in listed.stdout.decode("utf-8").split("\0"):
        path = root / name
        if name and path.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, into / name)
    return into


def wheel_differences(from_sdist: Path, from_tree: Path) -> list[str]:
    """The files the two wheels do not share, or share with other bytes (empty: the same wheel)."""
    ours, theirs = contents(from_sdist), contents(from_tree)
    found = [f"only in the wheel from the source tree: {n}" for n in sorted(theirs.keys() - ours.keys())]
    found += [f"only in the wheel from the sdist: {n}" for n in sorted(ours.keys() - theirs.keys())]
    found += [f"differs between the two wheels: {n}"
              for n in sorted(ours.keys() & theirs.keys()) if ours[n] != theirs[n]]  # fmt: skip
    return found


def sdist_problems(sdist: Path) -> list[str]:
    """What the sdist lacks to build the wheel, or holds that it should not (tests, a venv, a build)."""
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    found = [f"the sdist has no {name}" for name in SDIST_REQUIRED if name not in names]
    found += [f"the sdist holds {name}" for name in sorted(names)
              if name.split("/")[0] in {".venv", "build", "dist", ".git", "tests", "bench"}
              or "__pycache__" in name]  # fmt: skip
    return found
