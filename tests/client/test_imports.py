"""``flowmem.client`` needs nothing of the server: importing it loads no server dependency."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import flowmem

SERVER_MODULES = {"fastapi", "uvicorn", "starlette", "psycopg", "psycopg_pool", "sqlite3", "pydantic"}
SERVER_PARTS = {"flowmem.api", "flowmem.service", "flowmem.store", "flowmem.sessions", "flowmem.auth"}


def test_importing_the_client_imports_no_server_dependency() -> None:
    code = (
        "import sys, flowmem.client, flowmem.memory\n"
        f"loaded = {sorted(SERVER_MODULES | SERVER_PARTS)!r}\n"
        "found = [m for m in loaded if m in sys.modules]\n"
        "assert not found, found\n"
        "assert 'httpx' in sys.modules\n"
    )
    src = str(Path(flowmem.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_the_client_extra_installs_httpx_only() -> None:
    import tomllib

    pyproject = Path(flowmem.__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert [name.split(">")[0] for name in extras["client"]] == ["httpx"]
    assert "client" in extras["all"][0]
