"""What store/postgres/pipeline.py takes from psycopg beyond its documented API is still there (issue 25).

pipeline.py drives libpq itself (docs/decisions/0028) through psycopg's generators,
its ``pq`` wrapper, its ``Transformer`` and a private ``PGconn`` attribute. These
tests fail when an installed psycopg renames or reshapes one of them, before an
append does; pyproject.toml bounds psycopg's version for the same reason. And
pipeline.py stays the one module of flowmem that imports those parts.
"""

from __future__ import annotations

import ast
import codecs
import inspect
import tomllib
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

import psycopg.pq.abc as pq_abc  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from psycopg import errors, generators, pq  # noqa: E402
from psycopg.adapt import PyFormat, Transformer  # noqa: E402

from flowmem.store.postgres import pipeline  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "flowmem"
PIPELINE = SRC / "store" / "postgres" / "pipeline.py"
INTERNAL = ("psycopg.generators", "psycopg.pq", "psycopg.adapt", "psycopg.abc")

# the PGconn methods pipeline.py calls, with the leading parameters it passes by position
PGCONN_CALLS = {
    "enter_pipeline_mode": ["self"],
    "exit_pipeline_mode": ["self"],
    "pipeline_sync": ["self"],
    "send_flush_request": ["self"],
    "send_prepare": ["self", "name", "command"],
    "send_query_prepared": ["self", "name", "param_values"],
    "send_query_params": ["self", "command", "param_values"],
}
PGCONN_READS = ("pipeline_status", "_encoding")  # attributes it reads
EXEC_STATUSES = ("COMMAND_OK", "TUPLES_OK", "FATAL_ERROR", "PIPELINE_SYNC", "PIPELINE_ABORTED")


def _leading(function: Any, count: int) -> list[str]:
    return list(inspect.signature(function).parameters)[:count]


def _internal_imports(path: Path) -> set[str]:
    """The psycopg internals a module imports (``import psycopg.pq``, ``from psycopg import pq``…)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            found |= {part for part in INTERNAL if name == part or name.startswith(part + ".")}
    return found


def test_the_generators_take_the_pgconn_alone() -> None:
    for function in (generators.fetch_many, generators.send):
        assert list(inspect.signature(function).parameters) == ["pgconn"], function


@pytest.mark.parametrize("implementation", ["active", "protocol"])
def test_pgconn_has_the_methods_and_attributes_the_pipeline_uses(implementation: str) -> None:
    pgconn = pq.PGconn if implementation == "active" else pq_abc.PGconn
    for method, leading in PGCONN_CALLS.items():
        assert callable(getattr(pgconn, method, None)), method
        assert _leading(getattr(pgconn, method), len(leading)) == leading, method
    for attribute in PGCONN_READS:
        assert attribute in dir(pgconn), attribute


def test_pgresult_has_status_and_ntuples() -> None:
    for pgresult in (pq.PGresult, pq_abc.PGresult):
        assert {"status", "ntuples"} <= set(dir(pgresult))


def test_the_statuses_the_pipeline_compares_exist() -> None:
    assert set(EXEC_STATUSES) <= set(pq.ExecStatus.__members__)
    assert pipeline._COMMAND_OK is pq.ExecStatus.COMMAND_OK
    assert pipeline._FATAL_ERROR is pq.ExecStatus.FATAL_ERROR
    assert pipeline._PIPELINE_ABORTED is pq.ExecStatus.PIPELINE_ABORTED
    assert "OFF" in pq.PipelineStatus.__members__
    assert "IDLE" in pq.TransactionStatus.__members__


def test_the_transformer_dumps_and_loads_as_the_pipeline_calls_it() -> None:
    assert _leading(Transformer.dump_sequence, 3) == ["self", "params", "formats"]
    assert _leading(Transformer.set_pgresult, 2) == ["self", "result"]
    assert _leading(Transformer.load_rows, 4) == ["self", "row0", "row1", "make_row"]
    dumped = Transformer(None).dump_sequence(["a", 1], pipeline._TEXT[:2])
    assert [bytes(value) for value in dumped] == [b"a", b"1"]
    assert PyFormat.TEXT in pipeline._TEXT


def test_errors_are_built_from_a_result_with_its_encoding() -> None:
    assert _leading(errors.error_from_result, 1) == ["result"]
    assert "encoding" in inspect.signature(errors.error_from_result).parameters
    for name in ("InvalidSqlStatementName", "PipelineAborted"):
        assert issubclass(getattr(errors, name), psycopg.Error), name


def test_a_connection_waits_on_a_generator_and_keeps_attributes() -> None:
    assert _leading(psycopg.Connection.wait, 2) == ["self", "gen"]
    assert psycopg.Connection.__dictoffset__ != 0  # prepared_of keeps its state in __dict__


def test_the_installed_psycopg_is_one_pyproject_allows() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [Requirement(r) for r in extras["project"]["optional-dependencies"]["postgres"]]
    (bound,) = [r for r in wanted if r.name == "psycopg"]
    assert psycopg.__version__ in bound.specifier, (psycopg.__version__, str(bound.specifier))


def test_only_pipeline_imports_psycopgs_internals() -> None:
    importers = {
        str(path.relative_to(SRC)): found
        for path in sorted(SRC.rglob("*.py"))
        if (found := _internal_imports(path))
    }
    assert set(importers) == {"store/postgres/pipeline.py"}, importers
    assert importers["store/postgres/pipeline.py"] == set(INTERNAL)


def test_only_pipeline_reads_the_connections_libpq_side() -> None:
    readers = set()
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(
            isinstance(node, ast.Attribute) and node.attr in ("pgconn", "_encoding")
            for node in ast.walk(tree)
        ):
            readers.add(str(path.relative_to(SRC)))
    assert readers == {"store/postgres/pipeline.py"}


@pytest.mark.postgres
def test_a_pipelined_statement_round_trips_through_the_internals(postgres_url: str) -> None:
    """On a live connection: send, fetch with the Sync, load the rows, read the encoding."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        pgconn = conn.pgconn
        codecs.lookup(pgconn._encoding)  # a Python codec name, as error_from_result takes it
        tx = Transformer(conn)
        values = tx.dump_sequence(["7"], pipeline._TEXT[:1])
        pgconn.enter_pipeline_mode()
        try:
            pgconn.send_query_params(b"SELECT $1::int + 1", values)
            pgconn.pipeline_sync()
            results = conn.wait(pipeline._fetch(pgconn, 1, sync=True))
        finally:
            pgconn.exit_pipeline_mode()
        assert [r.status for r in results[0]] == [pq.ExecStatus.TUPLES_OK]
        assert pipeline._rows(tx, results[0][-1]) == [(8,)]
        assert pipeline.prepared_of(conn) is pipeline.prepared_of(conn)
