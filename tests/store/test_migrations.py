"""The schema's migrations collected by registry (issue 39 §2): the store's own and each kind's.

A kind of data numbers its migrations in its own dialect modules; the schema modules
collect them. Every released migration is pinned here by a digest of its statements:
a migration edited or renumbered fails (append-only), a new one adds a line.
"""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

from flowmem.errors import ConfigurationError
from flowmem.store.migrations import collect, kinds_migrations
from flowmem.store.postgres.schema import MIGRATIONS as POSTGRES
from flowmem.store.sqlite.schema import MIGRATIONS as SQLITE

PINNED = {
    "sqlite": [
        "e7fb87088f38", "8c1ad368c30c", "ab02108628b2", "a3ba4176afce", "9e63765a92c6",
        "ed90898647e0", "6f927e2495dc", "7ddd1019fec8", "121eb212365f", "9480701786b0",
        "41d9995567bf", "37d6b01855a8", "b4f22e6231c9", "789293e84e62", "e8f1a442d379",
        "0d0e32492ab0", "5a2d5c3ce138", "3db5f93bb2b9", "b87053d6d593",
        "dd203f30f9ee", "963de2e7cc32", "e732c681408c", "bdb52c071ec7", "787ea6ce98b3",
        "5f957142ef87", "160c6dac8d4a", "3d0d9b78cdae", "069f856f66cd",
    ],
    "postgres": [
        "d6f5219190c3", "8c1ad368c30c", "095db5f24a78", "4e2254cbc80b", "dec67871625a",
        "cd6001fadc44", "1d30af1d8890", "386f51aa68d7", "fc9d5ca305cb", "2624b0c8614a",
        "1eaca6e10d4c", "c2a824c04838", "219506251910", "45697e92ac3c", "e8f1a442d379",
        "0d0e32492ab0", "206b92405db3", "c39f184817f1", "4cd675d1f235",
        "d38be646071b", "b8afad6dafeb", "383dc10d803f",
        "7b0a07161f01", "5a43b610c065", "687fc495a7af", "4c9912efd8fb", "d74db5accbc7",
        "8ddc900619ae", "4a037dc195c3", "32df94df01a7", "0da12a289e73", "72b7bdc532aa",
        "664c3c3f600f", "c6740107dce1", "1e8ebf3763bd", "889547fec428",
    ],
}  # fmt: skip

KINDS = {  # which kind of data owns which numbers (the rest are the store's own tables)
    "adk": [10, 16],
    "archive": [14],
    "checkpoints": [7],
    "conversations": [9, 20],
    "repairs": [17, 19],
    "vectors": [18, 21],
}
OWN_NUMBERS = {  # a kind's migration numbered per dialect (the next free number of each)
    "sqlite": {"adk": [10, 16, 22], "repairs": [17, 19, 24, 27]},
    "postgres": {"adk": [10, 16, 22], "repairs": [17, 19, 23, 25]},
}


def _digest(statements: tuple[str, ...]) -> str:
    return hashlib.sha256("\x00".join(statements).encode()).hexdigest()[:12]


@pytest.mark.parametrize(("dialect", "migrations"), [("sqlite", SQLITE), ("postgres", POSTGRES)])
def test_released_migrations_are_never_edited_or_renumbered(
    dialect: str, migrations: tuple[tuple[str, ...], ...]
) -> None:
    pinned = PINNED[dialect]
    assert [_digest(m) for m in migrations[: len(pinned)]] == pinned
    assert len(migrations) >= len(pinned)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_each_kind_of_data_brings_its_own_migrations(dialect: str) -> None:
    found = kinds_migrations(dialect)
    assert {kind: sorted(owned) for kind, owned in found.items()} == {**KINDS, **OWN_NUMBERS[dialect]}
    merged = SQLITE if dialect == "sqlite" else POSTGRES
    for owned in found.values():
        for number, statements in owned.items():
            assert merged[number - 1] == statements


def test_collect_orders_the_store_s_and_the_kinds_migrations_by_number() -> None:
    own = {1: ("a",), 3: ("c",)}
    assert collect(own, "sqlite", {"kind": {2: ("b",), 4: ("d",)}}) == (("a",), ("b",), ("c",), ("d",))


def test_a_number_claimed_twice_is_refused_naming_both_owners() -> None:
    with pytest.raises(ConfigurationError, match=r"migration 2 is claimed by one/sqlite.py and by two/sqlite.py"):
        collect({1: ("a",)}, "sqlite", {"one": {2: ("b",)}, "two": {2: ("c",)}})
    with pytest.raises(ConfigurationError, match=r"claimed by sqlite/schema.py and by one/sqlite.py"):
        collect({1: ("a",)}, "sqlite", {"one": {1: ("b",)}})


def test_a_gap_in_the_numbers_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="nobody has 2"):
        collect({1: ("a",)}, "postgres", {"kind": {3: ("c",)}})


def test_a_new_kind_of_data_is_one_new_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package with a dialect module assigning MIGRATIONS is found; a reader's module is not imported."""
    root = tmp_path / "fakestore"
    (root / "notes").mkdir(parents=True)
    (root / "reader").mkdir()
    for folder in (root, root / "notes", root / "reader"):
        (folder / "__init__.py").write_text("")
    (root / "notes" / "sqlite.py").write_text(
        textwrap.dedent("""\
            MIGRATION = ("CREATE TABLE notes (id INTEGER PRIMARY KEY)",)
            MIGRATIONS: dict[int, tuple[str, ...]] = {2: MIGRATION}
            """)
    )
    (root / "reader" / "sqlite.py").write_text("raise ImportError('a reader is never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        kinds = kinds_migrations("sqlite", root, "fakestore")
        assert kinds == {"notes": {2: ("CREATE TABLE notes (id INTEGER PRIMARY KEY)",)}}
        assert collect({1: ("a",)}, "sqlite", kinds)[1] == ("CREATE TABLE notes (id INTEGER PRIMARY KEY)",)
    finally:
        for name in [m for m in sys.modules if m == "fakestore" or m.startswith("fakestore.")]:
            del sys.modules[name]
