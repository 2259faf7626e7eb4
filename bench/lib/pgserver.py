"""The benchmarks' throwaway PostgreSQL server, and what a server reports of its durability.

Every bench that starts a server of its own starts it here, durable by default:
``fsync``, ``synchronous_commit`` and ``full_page_writes`` stay on, as ``initdb``
leaves them, so a figure measures what a user's server does. ``--postgres-nondurable``
(``add_arguments``; the same flag in every bench) turns the three off; the bench
then prints, and writes in its JSON, ``NON-DURABLE`` beside the settings the server
reports (``durability_of``).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NONDURABLE = "--postgres-nondurable"
SETTINGS = ("fsync", "synchronous_commit", "full_page_writes")
_OFF = " ".join(f"-c {name}=off" for name in SETTINGS)


def add_arguments(parser: argparse.ArgumentParser, postgres: str = "") -> None:
    """Add ``--postgres-nondurable`` (the labelled non-durable run of a throwaway server).

    With ``postgres`` (its help), ``--postgres URL`` too, by default ``FLOWMEM_BENCH_POSTGRES``.
    """
    if postgres:
        parser.add_argument(
            "--postgres", default=os.environ.get("FLOWMEM_BENCH_POSTGRES"), help=postgres
        )
    parser.add_argument(
        NONDURABLE,
        dest="postgres_nondurable",
        action="store_true",
        help="start the throwaway PostgreSQL with fsync, synchronous_commit and "
        "full_page_writes off (the output says NON-DURABLE); default: durable, as initdb sets it",
    )


def check(parser: argparse.ArgumentParser, nondurable: bool, url: str | bool | None) -> None:
    """Refuse ``--postgres-nondurable`` beside a server given by URL (used as it is configured)."""
    if nondurable and url:
        parser.error(f"{NONDURABLE} starts a throwaway server: a server given by URL runs as it is")


def bindir() -> Path:
    """The newest PostgreSQL server binaries (/usr/lib/postgresql/N/bin, or pg_ctl on PATH)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
    )
    for directory in reversed(found):
        if Path(directory, "pg_ctl").exists() and Path(directory, "initdb").exists():
            return Path(directory)
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    raise SystemExit("no PostgreSQL server binaries: apt-get install postgresql, or give a URL")


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_options(port: int, sockets: Path, durable: bool, max_connections: int) -> str:
    """The ``postgres`` options of a throwaway server (``pg_ctl -o``)."""
    options = (
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c max_connections={max_connections}"
    )
    return options if durable else f"{options} {_OFF}"


@contextmanager
def throwaway_postgres(
    durable: bool = True,
    max_connections: int = 200,
    settings: tuple[str, ...] = (),
    program: Path | None = None,
) -> Iterator[tuple[str, int]]:
    """Start a PostgreSQL server in a temporary folder; yield (superuser URL, server pid).

    Durable unless asked (see the module). ``settings``: more ``name=value`` for the
    server (``-c``), as a bench's own measures need (``pg_stat_statements``). ``program``:
    what ``pg_ctl`` starts instead of ``postgres`` (``-p``: a wrapper that runs it under a
    profiler; given 300 s to answer). ``initdb --no-sync`` only skips flushing
    the new data directory, which the run throws away. As root the server runs as
    the ``postgres`` user. Stopped (fast) and removed at the end.
    """
    binaries = bindir()
    base = Path(tempfile.mkdtemp(prefix="flowmem-bench-pg-"))  # postgres must reach it
    data, sockets, log = base / "data", base / "sock", base / "log"
    sockets.mkdir()
    as_pg: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, user="postgres", group="postgres")
        shutil.chown(sockets, user="postgres", group="postgres")
        as_pg = ["runuser", "-u", "postgres", "--"]
    pg_ctl = str(binaries / "pg_ctl")
    started = False
    try:
        initdb = [str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
        subprocess.run(
            [*as_pg, *initdb, "-E", "UTF8", "--no-sync", "--locale=C"],
            check=True,
            capture_output=True,
        )
        port = free_port()
        options = server_options(port, sockets, durable, max_connections)
        options += "".join(f" -c {setting}" for setting in settings)
        subprocess.run(
            [
                *as_pg,
                pg_ctl,
                "-D",
                str(data),
                "-l",
                str(log),
                "-w",
                *(() if program is None else ("-t", "300", "-p", str(program))),
                "-o",
                options,
                "start",
            ],
            check=True,
            capture_output=True,
        )
        started = True
        pid = int((data / "postmaster.pid").read_text().split()[0])
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", pid
    finally:
        if started:
            subprocess.run(
                [*as_pg, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True
            )
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def server(url: str | None, durable: bool = True) -> Iterator[tuple[str, int | None]]:
    """Yield (``url``, None) for a given server, else a throwaway one's (url, pid)."""
    if url:
        yield url, None
        return
    with throwaway_postgres(durable) as started:
        yield started


def postgres_settings(url: str) -> dict[str, str]:
    """What the server reports (``SHOW``) of its version and durability settings."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = {}
        for name in ("server_version", *SETTINGS):
            row = conn.execute(f"SHOW {name}").fetchone()
            found[name] = str(row[0]) if row else "unknown"
        return found


def durability_of(settings: dict[str, str]) -> dict[str, Any]:
    """The durability entry of a server's ``postgres_settings``; ``label`` says NON-DURABLE when it is not.

    Durable: ``fsync`` and ``full_page_writes`` on and ``synchronous_commit`` not off
    (``local``, ``remote_write``... flush the local WAL at commit too).
    """
    text = ", ".join(f"{name}={settings[name]}" for name in SETTINGS)
    durable = (
        settings["fsync"] == "on"
        and settings["full_page_writes"] == "on"
        and settings["synchronous_commit"] != "off"
    )
    return {
        "backend": "postgresql",
        **settings,
        "durable": durable,
        "label": f"PostgreSQL {settings['server_version']}: "
        + (text if durable else f"NON-DURABLE: {text}"),
    }


def postgres_durability(url: str) -> dict[str, Any]:
    """``durability_of`` the server at ``url``, asked now."""
    return durability_of(postgres_settings(url))
