"""The bytecode a packaging venv compiled, kept in uv's cache for the venvs installed after it (decision 0196).

uv installs a venv by hard-linking each file of a wheel it unpacked once into its
cache (``envs.uv_cache``); the venv's Python then compiles, and writes beside it,
each module it imports (``__pycache__/NAME.cpython-311.pyc``). Every venv of the
check compiled the same framework modules again (LangGraph, the Agents SDK, pydantic,
flowmem itself in all fourteen): ``harvest`` links each such pyc into the cache
directory of the source file it was compiled from (found by the source's inode: the
venv's file *is* the cache's), so uv links it into the next venvs with that file,
whose imports read it instead of compiling.

A pyc is harvested only when its header is the one Python itself checks for that
very file (this interpreter's magic number, a timestamp pyc of the source's
modification time and size): in a venv that links both, Python finds it valid as if
it had written it. A venv whose files were copied (another file system) has no
source in the cache: nothing is harvested, and its imports compile as before.
``SHARED`` is the seam (False: no venv's bytecode is kept).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

SHARED = True
"""Whether the check keeps a venv's bytecode in uv's cache for the next venvs (the seam)."""


def cached_sources(cache: Path) -> dict[tuple[int, int], Path]:
    """Every ``.py`` file uv unpacked into ``cache``, by its (device, inode)."""
    found: dict[tuple[int, int], Path] = {}
    for source in (cache / "archive-v0").glob("*/**/*.py"):
        try:
            stat = source.stat()
        except OSError:
            continue
        found[stat.st_dev, stat.st_ino] = source
    return found


def valid_for(pyc: Path, source: Path) -> bool:
    """Whether ``pyc`` is this interpreter's timestamp bytecode of ``source`` as it is now (what an import checks)."""
    try:
        with pyc.open("rb") as stream:
            header = stream.read(16)
        stat = source.stat()
    except OSError:
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags, mtime, size = (int.from_bytes(header[i : i + 4], "little") for i in (4, 8, 12))
    return (
        flags == 0
        and mtime == int(stat.st_mtime) & 0xFFFFFFFF
        and size == stat.st_size & 0xFFFFFFFF
    )


def harvest(venv: Path, cache: Path) -> int:
    """Link each valid pyc ``venv`` wrote for a file linked from uv's ``cache`` beside that file there; how many."""
    if not SHARED or not (cache / "archive-v0").is_dir():
        return 0
    sources = cached_sources(cache)
    tag = sys.implementation.cache_tag
    kept = 0
    for pyc in venv.glob(f"lib/python*/site-packages/**/__pycache__/*.{tag}.pyc"):
        source = pyc.parent.parent / f"{pyc.name.split('.', 1)[0]}.py"
        try:
            stat = source.stat()
        except OSError:
            continue
        cached = sources.get((stat.st_dev, stat.st_ino))
        if cached is None or not valid_for(pyc, source):
            continue
        target = cached.parent / "__pycache__" / pyc.name
        if target.exists():
            continue
        target.parent.mkdir(exist_ok=True)
        staged = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        try:
            os.link(pyc, staged)  # the venv's file itself: the venv is deleted, the cache keeps it
            os.replace(staged, target)
        except OSError:
            staged.unlink(missing_ok=True)
            continue
        kept += 1
    return kept
