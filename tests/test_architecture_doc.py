"""docs/architecture.md's layer table says what each layer imports today, row by row (issue 25)."""

from __future__ import annotations

import re
from pathlib import Path

import grimp
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
_ROW = re.compile(r"^\| `(?P<layer>[a-z_]+)` \| (?P<imports>[^|]*) \| (?P<forbidden>[^|]*) \|$")


def _documented() -> dict[str, set[str]]:
    """The ``imports today`` column: the layer names before any parenthesis."""
    table: dict[str, set[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        found = _ROW.match(line.strip())
        if not found:
            continue
        text = re.sub(r"\([^)]*\)", "", found["imports"])
        names = {
            word.strip().split()[0] for word in text.split(",") if word.strip() not in ("", "—")
        }
        table[found["layer"]] = {n for n in names if re.fullmatch(r"[a-z_]+", n)}
    return table


def _actual() -> dict[str, set[str]]:
    """Which top-level flowmem packages each one imports (grimp's graph of src)."""
    graph = grimp.build_graph("flowmem")
    layers: dict[str, set[str]] = {}
    for module in graph.modules:
        parts = module.split(".")
        if len(parts) < 2:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            other = imported.split(".")
            if len(other) >= 2 and other[1] != parts[1]:
                layers.setdefault(parts[1], set()).add(other[1])
        layers.setdefault(parts[1], set())
    return layers


def test_every_layer_of_the_code_has_a_row() -> None:
    documented, actual = _documented(), _actual()
    missing = sorted(set(actual) - set(documented) - {"__init__", "py"})
    assert not missing, f"docs/architecture.md has no row for {missing}"


@pytest.mark.parametrize("layer", sorted(_documented()))
def test_the_row_names_what_the_layer_imports_today(layer: str) -> None:
    documented, actual = _documented()[layer], _actual().get(layer, set())
    assert documented == actual, (
        f"docs/architecture.md row {layer!r}: documented {sorted(documented)}, "
        f"imports {sorted(actual)} (missing from the row: {sorted(actual - documented)}, "
        f"not imported: {sorted(documented - actual)})"
    )
