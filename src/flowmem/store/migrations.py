"""The schema's migrations, collected by registry: a back-end's own and each kind of data's (issue 39 §2).

A kind of data is a package of ``flowmem.store`` (``archive``, ``repairs``, ``vectors``,
…); its migrations live beside its statements, in its dialect modules
(``<kind>/sqlite.py``, ``<kind>/postgres.py``), as ``MIGRATIONS``: a migration's number
→ its statements. A back-end's schema (``sqlite/schema.py``, ``postgres/schema.py``)
numbers its own tables' migrations the same way and calls ``collect``, which finds the
kinds' by walking this package's directory: a new kind of data adds its tables with a
new package and edits no schema module.

The numbers are the schema's versions, recorded in ``flowmem_schema``: append-only, a
released migration is never renumbered or edited (``tests/store/test_migrations.py``
pins each one). ``collect`` refuses a number claimed twice and a gap, so two kinds
taking the same next number fail every store's start and every test, not a user's
upgrade.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Mapping
from pathlib import Path

from flowmem.errors import ConfigurationError

Migrations = Mapping[int, tuple[str, ...]]

HERE = Path(__file__).resolve().parent
PACKAGE = "flowmem.store"


def kinds_migrations(dialect: str, root: Path = HERE, package: str = PACKAGE) -> dict[str, Migrations]:
    """Each kind of data's migrations for ``dialect`` (``sqlite``, ``postgres``), by the kind's name.

    A kind is a subpackage of ``package`` (found in ``root``) whose ``<dialect>`` module
    assigns ``MIGRATIONS`` at its top level; only those modules are imported (a
    dialect module of a reader, as ``heads/sqlite.py``, imports its back-end, which
    is being built while its schema collects).
    """
    found: dict[str, Migrations] = {}
    for folder in sorted(root.iterdir()):
        source = folder / f"{dialect}.py"
        if not (folder / "__init__.py").is_file() or not _assigns_migrations(source):
            continue
        module = importlib.import_module(f"{package}.{folder.name}.{dialect}")
        found[folder.name] = module.MIGRATIONS
    return found


def _assigns_migrations(source: Path) -> bool:
    """True when the module at ``source`` assigns ``MIGRATIONS`` at its top level."""
    if not source.is_file():
        return False
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Assign):
            targets = node.targets
        if any(isinstance(t, ast.Name) and t.id == "MIGRATIONS" for t in targets):
            return True
    return False


def collect(
    own: Migrations, dialect: str, kinds: Mapping[str, Migrations] | None = None
) -> tuple[tuple[str, ...], ...]:
    """The schema's migrations in order: ``own`` and every kind's, numbered from 1 without a gap.

    ``kinds``: the kinds' migrations (default: ``kinds_migrations(dialect)``).
    ConfigurationError names a number two owners claim, or a number nobody does.
    """
    owners: dict[int, str] = dict.fromkeys(own, f"{dialect}/schema.py")
    merged: dict[int, tuple[str, ...]] = dict(own)
    for kind, owned in (kinds_migrations(dialect) if kinds is None else kinds).items():
        for number, statements in owned.items():
            if number in owners:
                raise ConfigurationError(
                    f"{dialect} migration {number} is claimed by {owners[number]} and by "
                    f"{kind}/{dialect}.py: give the newer one the next free number"
                )
            owners[number] = f"{kind}/{dialect}.py"
            merged[number] = statements
    missing = sorted(set(range(1, len(merged) + 1)) - set(merged))
    if missing:
        raise ConfigurationError(
            f"{dialect} migrations are numbered from 1 without a gap; "
            f"nobody has {missing[0]} (numbers claimed: {sorted(merged)})"
        )
    return tuple(merged[number] for number in range(1, len(merged) + 1))


__all__ = ["Migrations", "collect", "kinds_migrations"]
