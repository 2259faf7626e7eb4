"""A ``flowmem mcp`` forked from the fork server (``tests/mcp/forked.py``) is what the command itself is.

The same argv, environment and working directory give the same exit code, stdout and
stderr as a ``flowmem mcp`` started as its own interpreter (decision 0200).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.mcp.conftest import stdio_env
from tests.mcp.forked import ForkServer

PLAIN = [sys.executable, "-c", "from flowmem.cli import main; main()"]


def _run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        command,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


def test_a_forked_flowmem_mcp_exits_and_writes_as_the_command_does(
    forks: ForkServer, tmp_path: Path
) -> None:
    # a bridge without a token: read from the environment, refused with exit code 6
    env = stdio_env(f"sqlite:///{tmp_path}/unused.db", FLOWMEM_URL="http://127.0.0.1:9")
    refused = _run(forks.command("mcp"), env, tmp_path)
    assert refused == _run([*PLAIN, "mcp"], env, tmp_path)
    assert refused[0] == 6 and "needs a token: set $FLOWMEM_TOKEN" in refused[2]
    # a database relative to the working directory: made there once stdin closes
    env = stdio_env("sqlite:///here.db")
    served = _run(forks.command("mcp", "--user", "ana"), env, tmp_path)
    assert served == (0, "", "")
    assert (tmp_path / "here.db").exists()
