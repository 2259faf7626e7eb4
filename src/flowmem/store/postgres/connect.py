"""How ``PostgresStore`` reaches its server: flowmem's URL parameters, libpq's options, one probe.

``parse_url`` splits flowmem's own parameters off a ``postgresql://`` URL,
``connect_options`` bounds libpq's connection wait, ``connect_once`` makes the store's
first connection before the pool opens (one clean error when the server cannot be
reached), ``probe_server`` reads the server's durability settings on it in one
statement (a warning for each setting that loses acknowledged writes:
``durability_warnings``), ``safe_url`` hides the URL's password in messages, and
``HotPool`` is the store's pool, which keeps the connection last given back at hand
(decision 0167), takes that first connection as its own and starts its threads only
when it has work for them (decision 0202).
"""

from __future__ import annotations

import logging
import math
import threading
from time import monotonic
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
from psycopg_pool import ConnectionPool
from psycopg_pool.pool import AddConnection, MaintenanceTask, Schedule, ShrinkPool

from flowmem.errors import ConfigurationError, StoreUnavailableError
from flowmem.store.known import DEFAULT_KNOWN_BUFFERS
from flowmem.store.postgres.pipeline import is_idle

log = logging.getLogger("flowmem")

POOL_PARAMS = ("pool_min", "pool_max", "connect_timeout_s", "known_buffers")


def parse_url(url: str) -> tuple[str, dict[str, float]]:
    """Split flowmem's own parameters off a URL (``pool_min``, ``pool_max``,
    ``connect_timeout_s``, ``known_buffers``: how many buffers' facts a store
    remembers for one-round-trip appends, 0 = off, decision 0039)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigurationError(f"not a postgresql URL: {url!r}")
    kept: list[tuple[str, str]] = []
    options: dict[str, float] = {
        "pool_min": 1,
        "pool_max": 10,
        "connect_timeout_s": 10.0,
        "known_buffers": DEFAULT_KNOWN_BUFFERS,
    }
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in POOL_PARAMS:
            try:
                options[name] = float(value)
            except ValueError as exc:
                raise ConfigurationError(f"{name} must be a number, got {value!r}") from exc
        else:
            kept.append((name, value))
    if options["pool_min"] < 0 or options["pool_max"] < max(1, options["pool_min"]):
        raise ConfigurationError("need 0 <= pool_min <= pool_max and pool_max >= 1")
    if options["known_buffers"] < 0 or options["known_buffers"] != int(options["known_buffers"]):
        raise ConfigurationError("known_buffers must be a whole number >= 0 (0: off)")
    # quote, not quote_plus: libpq reads "+" literally (options=-ca%3D1%20-cb%3D2 must keep its space)
    query = urlencode(kept, quote_via=quote)
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, query, parts.fragment))
    return conninfo, options


def connect_options(conninfo: str, timeout: float) -> dict[str, Any]:
    """libpq's ``connect_timeout`` from ``connect_timeout_s`` (whole seconds, at least 2), unless the URL sets it.

    Without it libpq waits for the operating system's TCP timeout (minutes) on a
    host that does not answer.
    """
    if "connect_timeout" in psycopg.conninfo.conninfo_to_dict(conninfo):
        return {}
    return {"connect_timeout": max(2, math.ceil(timeout))}


def connect_once(conninfo: str, connect: dict[str, Any], url: str) -> psycopg.Connection[Any]:
    """The store's first connection (autocommit, as the pool's): an unreachable server is one ``StoreUnavailableError`` at once.

    The pool would retry in the background, logging each failure, until its
    ``connect_timeout_s`` (10 s) ran out; a closed port or a wrong password is
    known from the first attempt. The connection then becomes the pool's first
    (``HotPool(..., first=conn)``, decision 0202).
    """
    try:
        return psycopg.connect(conninfo, autocommit=True, **connect)
    except psycopg.Error as exc:
        reason = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise StoreUnavailableError(
            f"cannot connect to PostgreSQL at {safe_url(url)}: {reason}"
        ) from None


SETTINGS = ("fsync", "synchronous_commit", "full_page_writes")  # what durability_warnings reads
_SETTINGS_READ = ", ".join(f"current_setting('{name}')" for name in SETTINGS)


def probe_server(
    conn: psycopg.Connection[Any], url: str, also: str = "", params: tuple[Any, ...] = ()
) -> tuple[Any, ...] | None:
    """Read the server's durability settings in one statement, warn of each one unsafe; ``also``'s values.

    ``also``: more columns for the same ``SELECT`` (the store's schema version and
    quota settings, decision 0202), with ``params``; their values are returned, or
    None when that statement failed (a schema not made yet): the settings are then
    read alone. A server that hides its settings gets no warning.
    """
    row: tuple[Any, ...] | None = None
    if also:
        try:
            row = conn.execute(f"SELECT {_SETTINGS_READ}, {also}", params).fetchone()
        except psycopg.Error:
            row = None
    extra = None if row is None else row[len(SETTINGS) :]
    if row is None:
        try:
            row = conn.execute(f"SELECT {_SETTINGS_READ}").fetchone()
        except psycopg.Error:
            row = None
    settings = {} if row is None else {n: str(v) for n, v in zip(SETTINGS, row, strict=False)}
    for warning in durability_warnings(settings):
        log.warning("PostgreSQL at %s: %s", safe_url(url), warning)
    return extra


def durability_warnings(settings: dict[str, str]) -> list[str]:
    """What the server's settings lose on a power loss or an OS crash (issue 38 §5; docs/security.md)."""
    found = []
    if settings.get("fsync") == "off":
        found.append(
            "fsync=off: a power loss or OS crash can leave the database damaged beyond "
            "recovery; turn it on (postgresql.conf) unless the data is disposable"
        )
    if settings.get("full_page_writes") == "off":
        found.append(
            "full_page_writes=off: a power loss during a page write can leave a torn page "
            "(a damaged table); turn it on unless the file system cannot tear pages"
        )
    if settings.get("synchronous_commit") == "off":
        found.append(
            "synchronous_commit=off: the writes of the last moments before a crash "
            "(up to three times wal_writer_delay) are lost though they were acknowledged"
        )
    return found


def safe_url(url: str) -> str:
    """Return ``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


HOT_KEPT = 2  # connections a HotPool keeps at hand, at most (and at most its max_size)


class HotPool(ConnectionPool[psycopg.Connection[Any]]):
    """A ``psycopg_pool`` pool whose ``connection()`` keeps the connections last given back at hand.

    A speed seam (decision 0167): ``ConnectionPool.connection`` costs about fifty
    Python calls a loan (``getconn``'s and ``putconn``'s locks, statistics, three
    log records, the connection's own ``with`` block and its ``commit``); here a
    loan takes a connection off a short list (``list.pop``, atomic) and gives it back
    under one lock. Everything else is the pool's: a lend finding the list empty
    takes ``getconn``; a connection given back goes to ``putconn`` (as the plain
    path gives it back, after the same ``with``-block exit: rollback on an error) when
    the loan raised, when it is not idle (a transaction left open, or broken), when
    it is past its lifetime or older than a ``drain``, when the list is full (``HOT_KEPT``),
    when the pool is closed, or while another lend is waiting on ``getconn`` — so no
    one waits on the pool while a connection sits here. ``close`` gives them back first.
    The plain path's oracle: tests/store/postgres/test_hot_pool.py.

    Opening (decision 0202): ``first``, a connection made with the pool's own
    ``conninfo`` and ``kwargs`` (the store's probe), is the pool's first connection,
    counted in ``min_size``, not one more (none is made for it; a broken or busy one is
    closed and made anew as the pool makes any). The pool's threads (the scheduler and
    ``num_workers`` workers, which make, replace and drop connections) start with its
    first task (``run_task``, ``schedule_task``: a connection to make or replace, a
    growth, a resize) rather than at ``open``; the periodic shrink is scheduled then,
    or at ``open`` when the pool already holds more than ``min_size``. A pool that only
    lends its first connection starts none.
    """

    def __init__(
        self, *args: Any, first: psycopg.Connection[Any] | None = None, **kwargs: Any
    ) -> None:
        """As ``ConnectionPool``; ``first``: the pool's first connection (see the class)."""
        self._first = first
        self._wake_lock = threading.Lock()
        self._wake_closed = False
        super().__init__(*args, **kwargs)
        self._hot: list[psycopg.Connection[Any]] = []
        self._hot_lock = threading.Lock()
        self._hot_kept = min(HOT_KEPT, self.max_size)
        self._asking = 0  # lends in ``getconn`` now: a connection given back goes to them
        self._hot_closed = False

    def _start_workers(self) -> None:
        """Nothing at ``open``: the threads start with the first task (``_wake``)."""

    def _start_initial_tasks(self) -> None:
        """``first`` into the pool, the rest of ``min_size`` made by the workers (``ConnectionPool``'s)."""
        first, self._first = self._first, None
        if first is not None and (first.closed or not is_idle(first)):
            first.close()  # lost or left busy since it was made: the pool makes its own
            first = None
        made = self._nconns
        if first is not None:
            self._stats[self._CONNECTIONS_NUM] += 1
            self._set_connection_expiry_date(first)
            if made == 0:  # min_size 0: the connection is kept until the shrink drops it
                self._nconns = made = 1
            self._add_to_pool(first)
            made -= 1
        for _ in range(made):
            self.run_task(AddConnection(self))
        if self._nconns > self._min_size:
            self._wake()  # the shrink is due from now

    def run_task(self, task: MaintenanceTask) -> None:
        """As ``ConnectionPool.run_task``, the threads started first if not yet."""
        if not self._workers:
            self._wake()
        super().run_task(task)

    def schedule_task(self, task: MaintenanceTask, delay: float) -> None:
        """As ``ConnectionPool.schedule_task``, the threads started first if not yet."""
        if not self._workers:
            self._wake()
        super().schedule_task(task, delay)

    def resize(self, min_size: int, max_size: int | None = None) -> None:
        """As ``ConnectionPool.resize``; the threads started (a smaller ``min_size`` is the shrink's)."""
        self._wake()
        super().resize(min_size, max_size)

    def _wake(self) -> None:
        """Start the scheduler and the workers (``ConnectionPool._start_workers``) and the shrink's schedule, once."""
        with self._wake_lock:
            if self._workers or self._wake_closed or self._closed:
                return
            super()._start_workers()
            super().run_task(Schedule(self, ShrinkPool(self), self.max_idle))

    def connection(self, timeout: float | None = None) -> _Loan:  # type: ignore[override]
        """Lend a connection: one at hand, else the pool's; give it back at the end (see the class).

        A context manager object, not a generator's: no generator resumed twice a loan.
        """
        return _Loan(self, timeout)

    def _lend(self, timeout: float | None) -> psycopg.Connection[Any]:
        """A connection from the pool itself (``getconn``), or one given back meanwhile."""
        with self._hot_lock:
            if self._hot:
                return self._hot.pop()
            self._asking += 1
        try:
            return self.getconn(timeout)
        finally:
            with self._hot_lock:
                self._asking -= 1

    def _give_back(self, conn: psycopg.Connection[Any]) -> None:
        """Keep ``conn`` at hand when it is idle, fresh and no one waits; else ``putconn`` it."""
        if (
            is_idle(conn)
            and conn._expire_at > monotonic()  # noqa: SLF001 (psycopg_pool's, set on every connection)
            and conn._created_at > self._drained_at  # noqa: SLF001
        ):
            with self._hot_lock:
                if not self._asking and not self._hot_closed and len(self._hot) < self._hot_kept:
                    self._hot.append(conn)
                    return
        try:
            conn.__exit__(None, None, None)  # the plain path's exit: a commit when one is open
        finally:
            self.putconn(conn)

    def _end_loan(
        self,
        conn: psycopg.Connection[Any],
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: Any,
    ) -> None:
        """A loan's end: given back (``_give_back``), or after an error as the plain path ends it."""
        if kind is None:
            self._give_back(conn)
            return
        try:  # the plain path's exit: a rollback (its own failure only logged), then the pool
            conn.__exit__(kind, exc, tb)
        finally:
            self.putconn(conn)

    def drain(self) -> None:
        """As ``ConnectionPool.drain``, the connections at hand included."""
        with self._hot_lock:
            kept, self._hot[:] = self._hot[:], []
        for conn in kept:
            self.putconn(conn)
        super().drain()

    def close(self, timeout: float = 5.0) -> None:
        """Give back the connections at hand, then close the pool (``ConnectionPool.close``)."""
        with self._wake_lock:  # no thread starts after the pool took its list to stop them
            self._wake_closed = True
        with self._hot_lock:
            self._hot_closed = True
            kept, self._hot[:] = self._hot[:], []
        for conn in kept:
            self.putconn(conn)
        super().close(timeout)


class _Loan:
    """``HotPool.connection()``: the connection on entry, given back on exit."""

    __slots__ = ("conn", "pool", "timeout")

    def __init__(self, pool: HotPool, timeout: float | None) -> None:
        self.pool = pool
        self.timeout = timeout
        self.conn: psycopg.Connection[Any] | None = None

    def __enter__(self) -> psycopg.Connection[Any]:
        try:
            conn = self.pool._hot.pop()  # noqa: SLF001 (the pool's own loan)
        except IndexError:
            conn = self.pool._lend(self.timeout)  # noqa: SLF001
        self.conn = conn
        return conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self.pool._end_loan(conn, kind, exc, tb)  # noqa: SLF001


__all__ = [
    "HOT_KEPT",
    "POOL_PARAMS",
    "SETTINGS",
    "HotPool",
    "connect_once",
    "connect_options",
    "durability_warnings",
    "parse_url",
    "probe_server",
    "safe_url",
]
