"""A private venv for LangGraph's ``SqliteStore`` + sqlite-vec, made from a Python whose sqlite3 loads extensions.

The project's Python cannot load SQLite extensions; Debian's ``/usr/bin/python3``
can. bench/vectors.py makes (once, then reuses) a venv from it in a cache folder,
installs from the package registry the versions of LangGraph, sqlite-vec and numpy
the project's own environment has, and runs ``sqlitestore_child.py`` under it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langchain-core", "sqlite-vec", "numpy")
CHILD = Path(__file__).resolve().parent / "sqlitestore_child.py"
CHECK = "import sqlite3; assert hasattr(sqlite3.connect(':memory:'), 'enable_load_extension')"


def pins() -> list[str]:
    """``name==version`` for each package, the version the project's environment has (else unpinned)."""
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(name)
    return found


def venv_python(base: str) -> tuple[str | None, str]:
    """The venv's python (made or reused) and how it was got; ``None`` and the reason when it cannot be."""
    try:
        subprocess.run([base, "-c", CHECK], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None, f"{base}'s sqlite3 cannot load extensions (or {base} is missing)"
    wanted = pins()
    key = hashlib.sha256((base + " ".join(wanted)).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flowmem-bench"
    folder = cache / f"sqlite-vec-{key}"
    python = folder / "bin" / "python"
    ready = folder / "ready"
    if ready.exists() and python.exists():
        return str(python), f"reused {folder} ({' '.join(wanted)})"
    try:
        subprocess.run([base, "-m", "venv", "--clear", str(folder)], check=True, capture_output=True, text=True, timeout=300)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted],
            check=True, capture_output=True, text=True, timeout=900,
        )
    except subprocess.CalledProcessError as failed:
        tail = (failed.stderr or failed.stdout or "").strip().splitlines()[-1:] or ["no output"]
        return None, f"could not make the venv at {folder}: {tail[0]}"
    except (OSError, subprocess.SubprocessError) as failed:
        return None, f"could not make the venv at {folder}: {failed}"
    ready.write_text(" ".join(wanted) + "\n")
    return str(python), f"made {folder} ({' '.join(wanted)})"
