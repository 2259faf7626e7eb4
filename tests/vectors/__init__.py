"""JSON test vectors for the GR-MEM core, named by rule id (format: README.md here).

``load_vectors("append")`` returns every append vector, so a store backend can run the
very cases the pure core passes (through ``prepare`` and ``apply_append``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VECTOR_DIR = Path(__file__).resolve().parent
OPERATIONS = ("append", "normalize", "repair", "text_to_message", "assemble")


def load_vectors(operation: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Return ``(name, vector)`` pairs sorted by name, only ``operation`` ones when given."""
    if operation is not None and operation not in OPERATIONS:
        raise ValueError(f"unknown vector operation {operation!r}: expected one of {OPERATIONS}")
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(VECTOR_DIR.glob("*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        if operation is None or vector["operation"] == operation:
            found.append((path.stem, vector))
    return found
