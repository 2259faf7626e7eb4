"""``open_store`` says what to do: the postgres extra when psycopg is missing, one fast error when PostgreSQL is down."""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from flowmem.errors import ConfigurationError, StoreUnavailableError
from flowmem.store import open_store
from tests import forking

EXTRA = "pip install 'flowmem[postgres]'"
# flowmem as a venv without the postgres extra runs it: importing psycopg fails
WITHOUT_PSYCOPG = "import sys; sys.modules['{module}'] = None; from flowmem.cli import main; main()"


def _cli(code: str, argv: list[str], cwd: Path) -> tuple[int, str]:
    """``python -c CODE ARGV`` in ``cwd``: its exit code and stderr.

    Forked from a server that imported flowmem's CLI once (tests/forking.py, decision
    0208; ``FLOWMEM_TEST_SERVE_FORK=0``: a plain subprocess), not a new interpreter
    importing it again: the server imports neither psycopg nor flowmem's PostgreSQL
    store, so a child that hides psycopg finds it missing as a fresh interpreter does.
    """
    out, err = cwd / "cli.out", cwd / "cli.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        child = forking.popen(code, argv, cwd=cwd, env=os.environ, stdout=stdout, stderr=stderr)
        returncode = child.wait(timeout=60)
    return returncode, err.read_text(errors="replace")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_postgresql_url_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("psycopg", "psycopg_pool"):
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, module, None)
            # the package and its modules: a module imported already is not imported again
            for name in [n for n in sys.modules if n.startswith("flowmem.store.postgres")]:
                patch.delitem(sys.modules, name)
            with pytest.raises(ConfigurationError) as info:
                open_store("postgresql://u:secret@127.0.0.1:1/db")
        assert EXTRA in info.value.message and f"{module} is not installed" in info.value.message
        assert "secret" not in info.value.message


@pytest.mark.parametrize(
    "args",
    [
        ["token", "list"],
        ["token", "create", "--user", "ana"],
        ["token", "revoke", "t1"],
        ["user", "erase", "ana", "--yes"],
        ["backup", "copy.db"],
        ["serve", "--port", "0"],
    ],
    ids=["token-list", "token-create", "token-revoke", "user-erase", "backup", "serve"],
)
def test_every_cli_command_names_the_postgres_extra_in_one_line(
    tmp_path: Path, args: list[str]
) -> None:
    url = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none"
    code = WITHOUT_PSYCOPG.format(module="psycopg")
    returncode, stderr = _cli(code, [*args, "--database", url], tmp_path)
    assert returncode != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and EXTRA in lines[0], stderr
    assert "Traceback" not in stderr


def test_an_unreachable_postgresql_fails_at_once_in_one_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("psycopg")
    port = _closed_port()
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailableError) as info:
        open_store(f"postgresql://nobody:secret@127.0.0.1:{port}/none")  # the default 10 s timeout
    assert time.monotonic() - started < 2.0
    message = info.value.message
    assert f"127.0.0.1:{port}" in message and "refused" in message.lower()
    assert "\n" not in message and "secret" not in message
    pool_lines = [r for r in caplog.records if r.name.startswith("psycopg")]
    assert pool_lines == []


def test_an_unreachable_postgresql_is_one_line_from_the_cli(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none"
    started = time.monotonic()
    returncode, stderr = _cli(
        "from flowmem.cli import main; main()", ["token", "list", "--database", url], tmp_path
    )
    # under the 10 s connect timeout it would wait if a refusal were retried; the rest is
    # the CLI process starting, seconds on a loaded machine
    assert time.monotonic() - started < 9.0
    assert returncode == 6
    assert stderr.count("\n") == 1 and stderr.startswith("error: cannot connect to PostgreSQL")
