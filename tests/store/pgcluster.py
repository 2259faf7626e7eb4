"""A private PostgreSQL cluster a test may stop, damage on disk and start again (issue 38 §5).

The shared server of ``tests/conftest.py`` (``postgres_url``) serves every other
test, so a test that flips bytes in a relation file gets a cluster of its own, in
its temporary directory, from the same system binaries (as the ``postgres`` user
when run as root). ``page_of`` finds the heap page holding a marker;
``damage_header`` and ``flip`` change it while the cluster is stopped.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

PAGE = 8192  # PostgreSQL's block size


def bindir() -> Path | None:
    """The newest PostgreSQL server binaries installed, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[-3]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl and shutil.which("initdb") else None


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class Cluster:
    """A running (or stopped) private cluster: its data directory and a superuser URL."""

    bin: Path
    data: Path
    log: Path
    port: int
    sockets: Path

    @property
    def url(self) -> str:
        """A superuser URL of the cluster's ``postgres`` database."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        """Run ``pg_ctl`` on the cluster; fail the test with the server's log when it fails."""
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        done = subprocess.run(
            _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, *args]),
            capture_output=True,
            text=True,
        )  # fmt: skip
        if done.returncode != 0:
            pytest.fail(f"pg_ctl {' '.join(args)}: {done.stderr}\n{self.log.read_text(errors='replace')}")

    def start(self) -> None:
        """Start the cluster."""
        self.ctl("start")

    def stop(self) -> None:
        """Stop the cluster cleanly (its pages are written to the relation files)."""
        self.ctl("stop", "-m", "fast")


@contextmanager
def private_cluster(*, checksums: bool = False) -> Iterator[Cluster]:
    """A new cluster (data checksums on or off), started; stopped and removed after.

    Its directory is a new one in the system's temporary directory, not a test's
    ``tmp_path``: the ``postgres`` user could not enter that one (0700, root's).
    """
    found = bindir()
    if found is None:
        reason = "no PostgreSQL server binaries (apt-get install postgresql)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: required in CI")
        pytest.skip(reason)
    home = Path(tempfile.mkdtemp(prefix="flowmem-pg-damage-"))
    (home / "sock").mkdir()
    if os.geteuid() == 0:
        for path in (home, home / "sock"):
            shutil.chown(path, user="postgres", group="postgres")
    init = [str(found / "initdb"), "-D", str(home / "data"), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--locale=C"]
    subprocess.run(_as_postgres(init + (["--data-checksums"] if checksums else [])), check=True, capture_output=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    cluster = Cluster(found, home / "data", home / "server.log", port, home / "sock")
    cluster.start()
    try:
        yield cluster
    finally:
        subprocess.run(_as_postgres([str(found / "pg_ctl"), "-D", str(cluster.data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def page_of(path: Path, marker: bytes) -> int:
    """The number of the page of relation file ``path`` that holds ``marker``."""
    return path.read_bytes().index(marker) // PAGE


def damage_header(path: Path, page: int) -> None:
    """Make a page's header impossible (pd_upper past pd_special): PostgreSQL refuses the page."""
    with path.open("r+b") as file:
        file.seek(page * PAGE + 14)  # pd_upper
        file.write(b"\xff\xff")


def flip(path: Path, marker: bytes) -> None:
    """Change the bytes of ``marker`` in the file (a row's text silently altered on disk)."""
    data = bytearray(path.read_bytes())
    at = data.index(marker)
    data[at : at + len(marker)] = bytes(b ^ 0x01 for b in marker)
    path.write_bytes(bytes(data))
