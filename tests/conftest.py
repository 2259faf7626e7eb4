"""Shared test fixtures. Each block is owned by the part of the project that uses it."""

from __future__ import annotations

import gc
import glob
import importlib.util
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

# ---------------------------------------------------------------------------------------
# Temporary files on a RAM file system (``make test`` under 6 minutes, issue 24 §6).
#
# Every SQLite commit at flowmem's default durability (WAL, ``FULL``) waits for an fsync:
# about 3 ms on this project's build machines' disks, 0.02 ms on a tmpfs. Where TMPDIR is
# not set and /dev/shm is a writable tmpfs, the tests' temporary files (``tmp_path``, the
# PostgreSQL server's data, what the servers and benches they start write) go there; the
# subprocesses inherit TMPDIR. A kill test loses nothing more or less for it: a SIGKILL
# drops no page the kernel holds, on a disk or in RAM. ``FLOWMEM_TEST_TMPDIR`` names
# another directory (``disk`` keeps the system's default). ``disk_tmp_path`` is a
# directory on the default temporary file system, for tests that need a disk's inode
# attributes (``chattr +i``).
# ---------------------------------------------------------------------------------------
DISK_TMPDIR = os.environ.get("FLOWMEM_TEST_DISK_TMPDIR") or tempfile.gettempdir()


def _ram_tmpdir() -> str | None:
    wanted = os.environ.get("FLOWMEM_TEST_TMPDIR")
    if wanted:
        return None if wanted == "disk" else wanted
    if os.environ.get("TMPDIR") or not os.path.isdir("/dev/shm"):
        return None
    with open("/proc/mounts", encoding="utf-8") as mounts:
        ram = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts)
    if not ram or not os.access("/dev/shm", os.W_OK):
        return None
    stat = os.statvfs("/dev/shm")
    return "/dev/shm/flowmem-tests" if stat.f_bavail * stat.f_frsize > 2 << 30 else None


_RAM_TMPDIR = _ram_tmpdir()
if _RAM_TMPDIR is not None:
    os.makedirs(_RAM_TMPDIR, exist_ok=True)
    os.chmod(_RAM_TMPDIR, 0o1777)  # as /tmp: the PostgreSQL server's user writes under it too
    os.environ["TMPDIR"] = _RAM_TMPDIR
    os.environ["FLOWMEM_TEST_DISK_TMPDIR"] = DISK_TMPDIR  # for the xdist workers
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


@pytest.fixture
def disk_tmp_path() -> Iterator[Path]:
    """A fresh directory on the system's default temporary file system, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="flowmem-disk-", dir=DISK_TMPDIR))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# The garbage collector and what a test process collects (decision 0173).
#
# Collecting imports every test module and the SDKs they import: millions of objects,
# made in one go and alive until the process ends, which the cyclic collector would
# scan again and again, as they are made, in the tests' full collections and in the
# interpreter's at exit (~5 s of CPU per process there alone). The collector is off from
# pytest's configuration until the test loop starts (in an xdist controller as in each
# worker); then one full collection, the survivors frozen (``gc.freeze``: kept out of
# every later collection, as ``flowmem serve`` does with its own start, decision 0006),
# and the collector on again for every test, as before: what the tests make is
# collected as the product's is.
# ---------------------------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    """Turn the cyclic garbage collector off for the collection (on again in ``pytest_runtestloop``)."""
    gc.disable()


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Before the first test: collect once, freeze what the collection left, turn the collector on."""
    gc.collect()
    gc.freeze()
    gc.enable()


# ---------------------------------------------------------------------------------------
# One TLS context for the httpx clients of a test process (issue 24 §6).
#
# httpx builds a TLS context from certifi's CA bundle for every client it makes (50-300
# ms of CPU on this project's build machines: a third of tests/client's time), though
# the tests speak plain HTTP on loopback only. The default one (``verify=True``, no
# client certificate) is built once per test process (per SSL_CERT_FILE/SSL_CERT_DIR)
# and shared, as a TLS context may be; any other is built as httpx builds it. The servers
# and children the tests start build theirs as before.
# ---------------------------------------------------------------------------------------
def _share_the_default_tls_context() -> None:
    try:
        import httpx._transports.default as transports
    except ImportError:  # a test environment without httpx: nothing to share
        return
    build = transports.create_ssl_context  # type: ignore[attr-defined]
    shared: dict[tuple[str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(
        verify: ssl.SSLContext | str | bool = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None or not trust_env:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        # what the default context is built from (httpx reads these two, else certifi)
        key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in shared:
            shared[key] = build(verify=verify, cert=cert, trust_env=trust_env)
        return shared[key]

    transports.create_ssl_context = create_ssl_context  # type: ignore[attr-defined]


_share_the_default_tls_context()


@pytest.fixture(scope="session", autouse=True)
def _serve_fork_servers() -> Iterator[None]:
    """Stop the ``flowmem`` fork servers at the session's end, so their children's CPU counts here (decision 0208)."""
    yield
    from tests import forking

    forking.stop()


# ---------------------------------------------------------------------------------------
# PostgreSQL: a throwaway server for the whole session (store backends, API tests).
#
# ``postgres_url`` starts a real server from the system binaries
# (/usr/lib/postgresql/*/bin, or pg_ctl on PATH) in a temporary directory on a free
# loopback port, and stops it at the end. As root, initdb/postgres run through
# ``runuser -u postgres``. Without binaries the tests using it fail when ``CI`` is
# set and are skipped (with the reason) otherwise. ``postgres_db_url`` gives each
# test a fresh, empty schema on that server (via search_path) and drops it afterwards.
# ---------------------------------------------------------------------------------------
def _postgres_bindir() -> Path | None:
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
    )
    for directory in reversed(candidates):
        if Path(directory, "pg_ctl").exists() and Path(directory, "initdb").exists():
            return Path(directory)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and shutil.which("initdb") else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """Start a throwaway PostgreSQL server; yield a superuser URL to its ``postgres`` db."""
    bindir = _postgres_bindir()
    if bindir is None:
        reason = "no PostgreSQL server binaries (apt-get install postgresql)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: required in CI")
        pytest.skip(reason)
    yield from _serve_postgres(bindir)


def _pgserver_bindir() -> Path | None:
    """The PostgreSQL binaries the ``pgserver`` wheel bundles (with pgvector), without importing it."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        return None
    found = Path(spec.origin).parent / "pginstall" / "bin"
    return found if (found / "pg_ctl").exists() else None


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """A throwaway PostgreSQL server with pgvector, from the ``pgserver`` wheel (dev extra): a superuser URL.

    The ``vector`` extension is created in its ``public`` schema; ``fresh_schema``
    gives a test its own schema on it. As root the binaries run as ``postgres``, as
    the system server's do (pgserver itself would add a user and open the modes of
    every directory above its files), from a copy when ``postgres`` cannot reach the
    venv (a checkout in a private home directory).
    """
    bindir = _pgserver_bindir()
    if bindir is None:
        reason = "no pgserver wheel (PostgreSQL with pgvector): pip install -e '.[dev]'"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: required in CI")
        pytest.skip(reason)
    copied = None
    reachable = subprocess.run(
        _as_postgres(["test", "-x", str(bindir / "postgres")]), capture_output=True
    )
    if reachable.returncode != 0:  # a checkout under a private home: postgres cannot reach the venv
        copied = Path(tempfile.mkdtemp(prefix="flowmem-pginstall-"))
        copied.chmod(0o755)
        wheel = bindir.parent.parent.parent  # site-packages: pgserver/pginstall and pgserver.libs
        shutil.copytree(wheel / "pgserver" / "pginstall", copied / "pgserver" / "pginstall")
        if (wheel / "pgserver.libs").is_dir():  # libpq, found through the binaries' $ORIGIN rpath
            shutil.copytree(wheel / "pgserver.libs", copied / "pgserver.libs")
        bindir = copied / "pgserver" / "pginstall" / "bin"
    try:
        for url in _serve_postgres(bindir):
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            yield url
    finally:
        if copied is not None:
            shutil.rmtree(copied, ignore_errors=True)


def _serve_postgres(bindir: Path) -> Iterator[str]:
    """Run a throwaway server from ``bindir`` for as long as the generator is: its superuser URL."""
    base = Path(tempfile.mkdtemp(prefix="flowmem-pg-"))
    data, sockets, logfile = base / "data", base / "sock", base / "server.log"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, user="postgres", group="postgres")
        shutil.chown(sockets, user="postgres", group="postgres")
    port = _free_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    options = (
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
    )
    started = False
    try:
        subprocess.run(
            _as_postgres(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(data),
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "-E",
                    "UTF8",
                    "--no-sync",
                    "--locale=C",
                ]
            ),
            check=True,
            capture_output=True,
        )
        subprocess.run(
            _as_postgres(
                [
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(logfile),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    options,
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
        started = True
        yield url
    except subprocess.CalledProcessError as exc:
        log = logfile.read_text(errors="replace") if logfile.exists() else ""
        pytest.fail(f"could not start PostgreSQL: {exc.stderr!r}\n{log}")
    finally:
        if started:
            _close_admin(url)
            _note_server_cpu(data)
            subprocess.run(
                _as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                capture_output=True,
            )
        shutil.rmtree(base, ignore_errors=True)


def _proc_cpu(pid: str) -> tuple[int, float]:
    """A process's parent pid and its CPU seconds, its reaped children's included (``/proc``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _note_server_cpu(data: Path) -> None:
    """Note a server's CPU (its postmaster, the backends it reaped and the live ones) for tests/suite_cpu.py."""
    suite_cpu = sys.modules.get("tests.suite_cpu")
    if suite_cpu is None:  # the plugin is not loaded: nothing to note
        return
    try:
        postmaster = (data / "postmaster.pid").read_text().split()[0]
        total = _proc_cpu(postmaster)[1]
        for entry in os.listdir("/proc"):
            if entry.isdigit() and entry != postmaster:
                with suppress(OSError):
                    parent, cpu = _proc_cpu(entry)
                    if str(parent) == postmaster:
                        total += cpu
    except (OSError, IndexError):
        return
    suite_cpu.note_postgres(str(data), total)


_ADMIN: dict[str, Any] = {}  # server URL -> this process's autocommit connection for fresh_schema


def _admin_execute(postgres_url: str, statement: str) -> None:
    """Run ``statement`` on this process's kept connection to ``postgres_url`` (made again if lost).

    One connection per process and server instead of two per schema (a connection is
    ~4.4 ms of the server's CPU, decision 0173; decision 0184). A statement that fails on
    a connection the server closed (a test terminated the backends) is sent once more on
    a new one; CREATE and DROP SCHEMA change nothing when they fail.
    """
    import psycopg

    for attempt in range(2):
        conn = _ADMIN.get(postgres_url)
        if conn is None or conn.closed or conn.broken:
            _close_admin(postgres_url)
            conn = _ADMIN[postgres_url] = psycopg.connect(postgres_url, autocommit=True)
        try:
            conn.execute(statement)
            return
        except psycopg.OperationalError:
            if attempt or not conn.broken:
                raise


def _close_admin(postgres_url: str) -> None:
    """Close this process's kept connection to ``postgres_url``, if any (a server stopping, a lost one)."""
    conn = _ADMIN.pop(postgres_url, None)
    if conn is not None:
        with suppress(Exception):
            conn.close()


@contextmanager
def fresh_schema(postgres_url: str) -> Iterator[str]:
    """A URL whose connections see only a fresh, empty schema (``search_path``) of ``postgres_url``.

    Creating a schema is instant where creating a database is not; the schema is
    dropped on exit. ``postgres_db_url`` gives one per test; the kill matrix's report
    (``tests/integrations/kill/report.py``) one per run. Both statements go over one
    connection the process keeps per server (``_admin_execute``).
    """
    name = f"t_{uuid.uuid4().hex[:16]}"
    _admin_execute(postgres_url, f"CREATE SCHEMA {name}")
    try:
        yield f"{postgres_url}?options=-csearch_path%3D{name}"
    finally:
        _admin_execute(postgres_url, f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def postgres_db_url(postgres_url: str) -> Iterator[str]:
    """A URL whose connections see only a fresh, empty schema of one test (``fresh_schema``)."""
    with fresh_schema(postgres_url) as url:
        yield url


# ---------------------------------------------------------------------------------------
# PostgreSQL: migrated schemas, emptied and reused (``make test`` under 6 minutes).
#
# Creating a schema and running every migration on it costs about 85 ms of server CPU,
# and dropping it again about as much; most PostgreSQL tests only open a store on it.
# ``postgres_store_url`` gives a test a schema of its own that already holds every
# migration and no rows: each test process keeps the schemas its tests gave back and
# hands one out again after emptying it as a fresh one is (TRUNCATE … RESTART IDENTITY
# of every table a test wrote, which gives each new, empty files; the planner's
# statistics of those tables removed; the sequences reset) and renaming it (a
# connection a test left behind cannot reach the next test's schema by its name).
# A schema whose definition a test changed (any DDL in it, seen by an event trigger:
# an index dropped, a column added, a trigger disabled, a migration undone) is dropped
# instead of reused, as is one whose tables are still locked by another connection.
# ``postgres_db_url`` stays a bare, empty schema for the tests of the migrations and of
# what opening a store creates.
# ---------------------------------------------------------------------------------------
_POOL_PREFIX = "tm_"  # the schemas this block hands out; the event trigger watches only these


def _watch_ddl(conn: Any) -> None:
    """Install (once per server) the event trigger noting DDL in the pooled schemas."""
    conn.execute("SELECT pg_advisory_lock(72310)")  # the test processes share the server
    try:
        if conn.execute(
            "SELECT 1 FROM pg_event_trigger WHERE evtname = 'flowmem_tests_ddl'"
        ).fetchone():
            return
        conn.execute(
            "CREATE TABLE IF NOT EXISTS public.flowmem_tests_ddl (schema_name TEXT NOT NULL)"
        )
        conn.execute(
            """CREATE OR REPLACE FUNCTION public.flowmem_tests_note_ddl() RETURNS event_trigger
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
            BEGIN
                IF TG_EVENT = 'sql_drop' THEN
                    INSERT INTO public.flowmem_tests_ddl SELECT DISTINCT schema_name
                    FROM pg_event_trigger_dropped_objects() WHERE left(schema_name, 3) = 'tm_';
                ELSE
                    INSERT INTO public.flowmem_tests_ddl SELECT DISTINCT schema_name
                    FROM pg_event_trigger_ddl_commands() WHERE left(schema_name, 3) = 'tm_';
                END IF;
            END $$"""
        )
        for event in ("ddl_command_end", "sql_drop"):
            conn.execute(
                f"CREATE EVENT TRIGGER flowmem_tests_{'ddl' if event == 'ddl_command_end' else 'drop'}"
                f" ON {event} EXECUTE FUNCTION public.flowmem_tests_note_ddl()"
            )
    finally:
        conn.execute("SELECT pg_advisory_unlock(72310)")


class _MigratedSchemas:
    """One test process's migrated schemas on one server: handed out, given back, emptied."""

    def __init__(self, postgres_url: str) -> None:
        import psycopg

        self.url = postgres_url
        self.conn = psycopg.connect(postgres_url, autocommit=True)
        _watch_ddl(self.conn)
        # a lock a connection left behind by a test holds fails the reuse, not the test run
        self.conn.execute("SET lock_timeout = '2s'")
        self.free: list[str] = []

    def _url(self, name: str) -> str:
        return f"{self.url}?options=-csearch_path%3D{name}"

    def take(self) -> str:
        """A migrated, empty schema's name (a reused one renamed, else a new one)."""
        name = f"{_POOL_PREFIX}{uuid.uuid4().hex[:16]}"
        if self.free:
            self.conn.execute(f"ALTER SCHEMA {self.free.pop()} RENAME TO {name}")
        else:
            from flowmem.store import open_store

            self.conn.execute(f"CREATE SCHEMA {name}")
            open_store(self._url(name)).close()  # every migration
        self.conn.execute("DELETE FROM public.flowmem_tests_ddl WHERE schema_name = %s", (name,))
        return name

    def give_back(self, name: str) -> None:
        """Empty ``name`` for the next test, or drop it when a test changed its definition."""
        import psycopg

        changed = self.conn.execute(
            "SELECT 1 FROM public.flowmem_tests_ddl WHERE schema_name = %s LIMIT 1", (name,)
        ).fetchone()
        try:
            if changed is None:
                self._empty(name)
                self.free.append(name)
                return
        except psycopg.errors.LockNotAvailable:  # a connection the test left holds a lock
            pass
        with suppress(psycopg.errors.LockNotAvailable):  # still held: left to the server's end
            self.conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        self.conn.execute("DELETE FROM public.flowmem_tests_ddl WHERE schema_name = %s", (name,))

    def _empty(self, name: str) -> None:
        """TRUNCATE the tables a test wrote (new, empty files), drop their statistics, reset sequences."""
        written = [
            str(row[0])
            for row in self.conn.execute(
                "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relnamespace = %s::regnamespace"
                " AND c.relkind IN ('r', 'p') AND c.relname <> 'flowmem_schema'"
                " AND (pg_relation_size(c.oid) > 0 OR c.reltoastrelid <> 0"
                " AND pg_relation_size(c.reltoastrelid) > 0)",
                (name,),
            )
        ]
        with self.conn.transaction():
            if written:
                self.conn.execute(f"TRUNCATE {', '.join(written)} RESTART IDENTITY CASCADE")
            self.conn.execute(
                "DELETE FROM pg_statistic s USING pg_class c WHERE s.starelid = c.oid"
                " AND c.relnamespace = %s::regnamespace",
                (name,),
            )
            self.conn.execute(
                "SELECT setval(c.oid, 1, false) FROM pg_class c"
                " WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'S'",
                (name,),
            )

    def close(self) -> None:
        """Drop the schemas kept for reuse and close the connection."""
        for name in self.free:
            self.conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        self.conn.close()


@pytest.fixture(scope="session")
def _migrated_schemas(postgres_url: str) -> Iterator[_MigratedSchemas]:
    schemas = _MigratedSchemas(postgres_url)
    try:
        yield schemas
    finally:
        schemas.close()


@pytest.fixture
def postgres_store_url(_migrated_schemas: _MigratedSchemas) -> Iterator[str]:
    """A URL whose connections see only a schema of one test holding every migration and no rows.

    What opening a store on a fresh schema (``postgres_db_url``) would leave, without
    running the migrations for each test; for tests that open a store on it, not for
    tests of the migrations or of what opening a store creates.
    """
    name = _migrated_schemas.take()
    try:
        yield _migrated_schemas._url(name)
    finally:
        _migrated_schemas.give_back(name)


# --- end of the PostgreSQL block ---------------------------------------------------------
