"""tests/conftest.py's ``fresh_schema``: a bare schema per use, over one kept connection (decision 0184)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests import conftest
from tests.conftest import fresh_schema

pytestmark = pytest.mark.postgres


def _schema_of(url: str) -> str:
    return url.rsplit("%3D", 1)[1]


def _tables(postgres_url: str, schema: str) -> list[str] | None:
    """The tables of ``schema``, or None when there is no such schema."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        if (
            conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
            is None
        ):
            return None
        return [
            str(row[0])
            for row in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace", (schema,)
            )
        ]


def test_a_fresh_schema_is_empty_seen_by_its_url_alone_and_dropped_after(postgres_url: str) -> None:
    with fresh_schema(postgres_url) as url, fresh_schema(postgres_url) as other:
        name = _schema_of(url)
        assert name != _schema_of(other)
        assert _tables(postgres_url, name) == []
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT current_schema()").fetchone() == (name,)
            conn.execute("CREATE TABLE t (x int)")
        assert _tables(postgres_url, name) == ["t"]
        assert _tables(postgres_url, _schema_of(other)) == []
    assert _tables(postgres_url, name) is None
    assert _tables(postgres_url, _schema_of(other)) is None


def test_fresh_schemas_open_no_connection_after_the_first(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fresh_schema(postgres_url):  # the process's kept connection, made if it is not there
        pass
    opened: list[Any] = []
    connect = psycopg.connect

    def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        return connect(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    names = []
    for _ in range(5):
        with fresh_schema(postgres_url) as url:
            names.append(_schema_of(url))
    assert opened == []  # two a schema before decision 0184
    monkeypatch.undo()
    assert len(set(names)) == 5
    assert all(_tables(postgres_url, name) is None for name in names)


def test_a_kept_connection_the_server_closed_is_made_again(postgres_url: str) -> None:
    with fresh_schema(postgres_url):
        pass
    kept = conftest._ADMIN[postgres_url]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (kept.info.backend_pid,))
    with fresh_schema(postgres_url) as url:
        assert _tables(postgres_url, _schema_of(url)) == []
    assert _tables(postgres_url, _schema_of(url)) is None
    assert conftest._ADMIN[postgres_url] is not kept
    assert kept.closed
