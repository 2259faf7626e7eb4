"""The wheelhouse every extra installs from, and a fresh venv holding the wheel with one extra."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path


def pip(*args: str) -> list[str]:
    """This interpreter's pip (the dev venv's), quiet: a fresh venv gets no pip of its own."""
    return [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *args]


def fill_wheelhouse(wheel: Path, house: Path, extra: str = "all") -> str:
    """Put in ``house`` a wheel of every package ``wheel[extra]`` needs; say where they came from.

    Offline first: a wheelhouse a previous run filled needs no index. Only when it
    lacks something (a new or raised dependency) does pip ask the index, once, for
    the whole set. The flowmem wheel itself is not kept there: each venv installs the
    one just built, by its path.
    """
    house.mkdir(parents=True, exist_ok=True)
    target = f"{wheel}[{extra}]"
    offline = subprocess.run(
        pip("download", "--no-index", "--find-links", str(house), "-d", str(house), target),
        capture_output=True, text=True,
    )  # fmt: skip
    source = "the wheelhouse (offline)"
    if offline.returncode != 0:
        subprocess.run(
            pip("download", "-d", str(house), target), check=True, capture_output=True, text=True
        )
        source = "the package index"
    for stale in house.glob("flowmem-*"):
        stale.unlink()
    return source


def uv_binary() -> str | None:
    """The ``uv`` installer of the dev venv (the dev extra has it), or None where it is not installed."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return str(find_uv_bin())
    except FileNotFoundError:
        return None


def fresh_venv(
    path: Path, wheel: Path, extra: str | None, house: Path, *, installer: str | None = None
) -> None:
    """A new venv (no pip, no system site-packages) with the wheel and its ``extra`` installed.

    Nothing but the wheelhouse is read (``--no-index``), so a dependency the extra
    does not declare is not there; no bytecode is compiled (faster, and each command
    compiles what it imports). ``installer`` ``"uv"`` installs with uv (its cache beside
    the wheelhouse: each wheel unpacked once per machine, then linked), ``"pip"`` with
    pip; None takes uv when the dev venv has it (decision 0184: the same distributions
    and files, a tenth of pip's CPU), else pip. The wheelhouse itself is filled by pip
    (``fill_wheelhouse``), whose resolver so still resolves every extra's set.
    """
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(path)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    uv = uv_binary() if installer in (None, "uv") else None
    if installer == "uv" and uv is None:
        raise RuntimeError("installer 'uv' asked for, but the uv package is not installed")
    if installer not in (None, "uv", "pip"):
        raise ValueError(f"unknown installer {installer!r}: 'uv' or 'pip'")
    if uv is not None:
        command = [uv, "pip", "install", "--quiet", "--python", str(path / "bin" / "python"),
                   "--cache-dir", str(uv_cache(house)), "--no-index", "--find-links", str(house),
                   "--only-binary", ":all:", target]  # fmt: skip
    else:
        command = pip("--python", str(path / "bin" / "python"), "install", "--no-index", "--find-links", str(house),
                      "--no-compile", "--only-binary", ":all:", target)  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True, env=env)


def uv_cache(house: Path) -> Path:
    """uv's cache for installs from ``house``: beside it, so it lasts as long (a fresh clone reuses it)."""
    return house.with_name(f"{house.name}-uv-cache")
