"""The suite's modules in the order an xdist run should start them: the longest tests first (decision 0179).

A worker runs its share of the collection in order, and a test cannot be split: a
15 s test a worker starts in the run's last seconds keeps the run going on one core
while the others have nothing left. ``tests/conftest.py`` orders the collection of
every xdist worker by ``longest_first``: the modules whose longest test took longest
in a recorded run (``LONGEST``, written by ``python -m tests.suite_cpu PREFIX
--durations tests/longest_tests.json``) first, each module whole and its tests in
their own order (a module-scoped fixture is set up once, as before), and every other
module after them in the order pytest collected it. The same tests run; only their
order changes, and every worker collects the same order (xdist requires it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

LONGEST = Path(__file__).with_name("longest_tests.json")
"""Each module's longest test in a recorded whole-suite run, in wall seconds (modules of 1 s or more)."""


class _Item(Protocol):
    @property
    def nodeid(self) -> str: ...


T = TypeVar("T", bound=_Item)


def recorded(path: Path | None = None) -> dict[str, float]:
    """The recorded longest test of each module (``LONGEST``'s; none when it is missing or unreadable)."""
    path = LONGEST if path is None else path
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): float(v) for k, v in found.items() if isinstance(v, int | float)}


def longest_first(items: Sequence[T], longest: Mapping[str, float]) -> list[T]:
    """``items`` with the modules of the longest recorded tests first, each module whole and in its order."""
    modules: dict[str, list[T]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ranked = sorted(enumerate(modules), key=lambda pair: (-longest.get(pair[1], 0.0), pair[0]))
    return [item for _, module in ranked for item in modules[module]]
