"""What a program's turn would import and build lazily, done once by the fork server instead.

A child of the fork server inherits every module the server imported and every pydantic
model class it completed; what a turn imports on first use (a framework's lazy imports)
or completes on first use (a pydantic model whose schema was deferred at import) it
would otherwise do again in each of the matrix's ~480 children. ``warm`` does it once,
at the program module's import in the server; ``lazy_in_turns`` (a fork-server child)
lists what turns still do lazily, which ``test_warm`` holds at nothing (decision 0219).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from tests.integrations.kill.points import Killer


def warm(modules: Iterable[str] = (), models: Iterable[type[BaseModel]] = ()) -> None:
    """Import ``modules`` and complete ``models`` (``model_rebuild``): what a turn would do lazily."""
    for name in modules:
        importlib.import_module(name)
    for model in models:
        model.model_rebuild()


def _incomplete() -> set[type[BaseModel]]:
    """Every pydantic model class not completed yet."""
    found: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return {c for c in found if not c.__dict__.get("__pydantic_complete__", True)}


def lazy_in_turns(turns: list[tuple[str, str, str, str]], text: str, out: str) -> None:
    """Run unarmed turns (program module, store, place, thread) one after another in a fork-server
    child; write what each did lazily: ``{"module store": {"imported": [...], "completed": [...]}}``.

    A module or class any of them needs lazily shows in the first turn that needs it, so
    every entry is empty exactly when no turn alone does anything lazily.
    """
    try:
        report = {}
        for module, store, place, thread in turns:
            program = importlib.import_module(module)
            before, incomplete = set(sys.modules), _incomplete()
            program.turn(store, place, thread, text, Killer(None))
            report[f"{module} {store}"] = {
                "imported": sorted(set(sys.modules) - before),
                "completed": sorted(
                    f"{c.__module__}.{c.__qualname__}"
                    for c in incomplete
                    if c.__dict__.get("__pydantic_complete__")
                ),
            }
        Path(out).write_text(json.dumps(report), encoding="utf-8")
    except BaseException:
        Path(out + ".error").write_text(traceback.format_exc(), encoding="utf-8")
        os._exit(1)
    os._exit(0)
