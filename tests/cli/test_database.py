"""A CLI command that reads or changes existing data creates no database (decision 0048).

Only ``flowmem serve`` and the commands that must write a new database
(``token create``, ``chat``) create one; ``token list``, ``token revoke``,
``user erase`` and ``backup`` on a database that does not exist exit 3 with one
line that says what to check, and leave no file, directory or schema behind.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flowmem.errors import DatabaseNotFoundError
from flowmem.store import open_store
from tests.cli.conftest import RunCli

READERS = [
    ["token", "list"],
    ["token", "list", "--json"],
    ["token", "revoke", "tok_1"],
    ["user", "erase", "ana", "--yes"],
    ["backup", "copy.db"],
]
IDS = ["token-list", "token-list-json", "token-revoke", "user-erase", "backup"]


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args", READERS, ids=IDS)
def test_a_misspelled_sqlite_path_creates_nothing(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    ran = run_cli(*args, "--database", f"sqlite:///{tmp_path}/nope/dir/x.db")
    assert ran.code == 3
    assert ran.err.count("\n") == 1 and ran.err.startswith("error: no flowmem database at ")
    assert "--database" in ran.err and "flowmem serve" in ran.err
    assert _files(tmp_path) == []


@pytest.mark.parametrize("args", READERS, ids=IDS)
def test_the_default_database_is_not_created_by_a_reader(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWMEM_DATABASE_URL", raising=False)
    assert run_cli(*args).code == 3
    assert _files(tmp_path) == []


def test_a_file_without_flowmem_schema_is_refused_and_left_without_tables(
    run_cli: RunCli, tmp_path: Path
) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    ran = run_cli("token", "list", "--database", f"sqlite:///{other}")
    assert ran.code == 3 and "no flowmem database" in ran.err
    with sqlite3.connect(other) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["notes"]


def test_token_create_makes_the_database_and_says_so(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new/flowmem.db"
    made = run_cli("token", "create", "--user", "ops", "--admin", "--database", url)
    assert made.code == 0
    assert f"created a new flowmem database at {url}" in made.err
    again = run_cli("token", "create", "--user", "ana", "--database", url)
    assert again.code == 0 and "created a new" not in again.err
    listed = run_cli("token", "list", "--database", url)
    assert listed.code == 0 and len(listed.out.splitlines()) == 2


def test_open_store_create_false_on_postgresql_creates_no_schema(postgres_db_url: str) -> None:
    with pytest.raises(DatabaseNotFoundError):
        open_store(postgres_db_url, create=False)
    import psycopg

    with psycopg.connect(postgres_db_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchone()
    assert tables == (0,)
    open_store(postgres_db_url).close()  # the server's start creates it
    open_store(postgres_db_url, create=False).close()  # and then it opens
