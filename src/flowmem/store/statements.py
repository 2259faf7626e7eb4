"""A dialect's statements by name: the guarded forms of a statement, and the kinds of data's merged in.

``sqlite/queries.py`` and ``postgres/queries.py`` each build their ``SQL`` dict the
same way: the statements a write guard checks are written once with a ``{guard}``
placeholder and expanded per guard kind (``guarded``), and every kind of data's
statements are merged in, a name used twice failing the import (``merge``).
"""

from __future__ import annotations

from collections.abc import Mapping


def guarded(templates: Mapping[str, str], guards: Mapping[str, str]) -> dict[str, str]:
    """Each template's guarded forms, ``name@kind``: its ``{guard}`` replaced by that kind's condition."""
    return {
        f"{name}@{kind}": text.format(guard=condition)
        for name, text in templates.items()
        for kind, condition in guards.items()
    }


def merge(statements: dict[str, str], *parts: Mapping[str, str]) -> None:
    """Add each part's statements to ``statements``; RuntimeError when a name is used twice."""
    for part in parts:
        twice = set(statements) & set(part)
        if twice:  # pragma: no cover - a naming mistake, found at import
            raise RuntimeError(f"statement names used twice: {twice}")
        statements.update(part)


__all__ = ["guarded", "merge"]
