"""Every core ``append`` vector (tests/vectors) run through the stored append of every backend.

The buffer of each vector is written as given, then the backend's ``append`` runs the
vector's messages (prepared without a clock) and the loaded rows, count, appended and
appended_any must equal the vector's expectation; a refused append must raise the
expected error code and leave the buffer exactly as it was.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.errors import FlowmemError
from flowmem.store import Address, Store, open_store
from tests.store.seed import seed
from tests.vectors import load_vectors

APPEND = load_vectors("append")
_keys = itertools.count()


@pytest.fixture(
    scope="module",
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def vector_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """One store per backend for the whole module; each vector gets its own address."""
    if request.param == "memory":
        store = open_store("memory://")
    elif request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("vectors") / "store.db"
        store = open_store(f"sqlite:///{path}")
    else:
        import psycopg

        base: str = request.getfixturevalue("postgres_url")
        schema = f"v_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}".encode())
        store = open_store(f"{base}?options=-csearch_path%3D{schema}")
    try:
        yield store
    finally:
        store.close()
        if request.param == "postgres":
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


def run_stored(store: Store, vector: dict[str, Any]) -> dict[str, Any]:
    """Run one append vector through ``store``; return what it produced, shaped like expected."""
    given = vector["input"]
    address = Address("session", "vectors", f"v{next(_keys)}")
    seed(store, address, given["buffer"])
    before = store.load(address)
    try:
        outcome = store.append(address, prepare(given["messages"], None), given["max_messages"])
    except FlowmemError as exc:
        assert store.load(address) == before, "a refused append changed the buffer"
        return {"error": exc.code}
    rows = store.load(address)
    assert store.count(address) == len(rows)
    return {
        "messages": rows,
        "count": outcome.count,
        "appended": outcome.appended,
        "appended_any": outcome.appended > 0,
    }


def of_rule(*rules: str | None) -> list[Any]:
    """The append vectors of ``rules``, as pytest params named after their files."""
    return [pytest.param(v, id=name) for name, v in APPEND if v["rule"] in rules]


def check(store: Store, vector: dict[str, Any]) -> None:
    """Compare the stored append with the vector's expectation."""
    assert run_stored(store, vector) == vector["expected"], vector["description"]


def test_every_append_vector_is_covered_here() -> None:
    rules = {v["rule"] for _, v in APPEND}
    assert rules <= {"MEM-1", "MEM-2", "MEM-3", "MEM-10", "MEM-11", "MEM-14", None}
    assert len(APPEND) >= 40


@pytest.mark.parametrize("vector", of_rule("MEM-1"))
def test_mem_1_vectors_stored(vector_store: Store, vector: dict[str, Any]) -> None:
    check(vector_store, vector)


@pytest.mark.parametrize("vector", of_rule("MEM-2"))
def test_mem_2_vectors_stored(vector_store: Store, vector: dict[str, Any]) -> None:
    check(vector_store, vector)


@pytest.mark.parametrize("vector", of_rule("MEM-3"))
def test_mem_3_vectors_stored(vector_store: Store, vector: dict[str, Any]) -> None:
    check(vector_store, vector)


@pytest.mark.parametrize("vector", of_rule("MEM-10"))
def test_mem_10_vectors_stored(vector_store: Store, vector: dict[str, Any]) -> None:
    check(vector_store, vector)


@pytest.mark.parametrize("vector", of_rule("MEM-11"))
def test_mem_11_vectors_stored(vector_store: Store, vector: dict[str, Any]) -> None:
    check(vector_store, vector)


@pytest.mark.parametrize("vector", of_rule("MEM-14"))
def test_mem_14_vectors_stored(vector_store: Store, vector: dict[str, Any]) -> None:
    check(vector_store, vector)


@pytest.mark.parametrize("vector", of_rule(None))
def test_bad_input_vectors_stored(vector_store: Store, vector: dict[str, Any]) -> None:
    check(vector_store, vector)
