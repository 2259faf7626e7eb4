"""Load a bench module by its path (bench/ is no package, nor on sys.path: see any bench's head)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1]


def load(name: str) -> ModuleType:
    """bench/<name>.py as module ``flowmem_bench_<name>`` (loaded once)."""
    known = sys.modules.get(f"flowmem_bench_{name}")
    if known is not None:
        return known
    spec = importlib.util.spec_from_file_location(f"flowmem_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
