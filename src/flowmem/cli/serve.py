"""``flowmem serve``: the HTTP API on uvicorn, with its limit, rate and timeout options.

The ``--database URL`` option is ``flowmem.cli.database``'s, shared with the other
commands. The limits, rates and timeouts reach the app (and every ``--workers``
process) through their environment variables, which ``serve`` sets from its options.

The first start on a database with no tokens creates an admin token and shows it
exactly once: on a terminal it is printed; otherwise (stdout captured by a log,
a service manager, a container runtime) it is written to a new file only its owner
can read (0600, ``--admin-token-file``, default ``./flowmem-admin-token``) and only
the file's path is printed. No token is created before the server knows it can
listen on its port and write that file (the database and its schema may be), so a
start that fails leaves no token nobody saw. Whenever no usable admin token
exists, the server says how to create one (``flowmem token create --admin``).
"""

from __future__ import annotations

import copy
import ipaddress
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import click
import uvicorn  # the server extra; without it the CLI names the extra to install
from uvicorn.supervisors import Multiprocess

from flowmem.access import PERM_ADMIN
from flowmem.api.gate import BODY_TIMEOUT
from flowmem.api.lookup import TOKEN_CACHE_TTL
from flowmem.api.ratelimit import ENV as RATE_ENV
from flowmem.api.ratelimit import RateLimits
from flowmem.api.tcp import DEFAULT_HEADER_TIMEOUT, HEAD_LIMIT, HEADER_TIMEOUT_ENV, PROTOCOL
from flowmem.auth import bootstrap_admin_token
from flowmem.cli.database import (
    DATABASE_ENV,
    database_option,
    default_database_url,
    redact,
)
from flowmem.cli.errors import CannotListenError
from flowmem.cli.io import FiniteFloatRange
from flowmem.cli.listeners import bound_socket, spreads_connections
from flowmem.cli.metricsdir import metrics_directory
from flowmem.errors import ConfigurationError
from flowmem.limits import ENV as LIMIT_ENV
from flowmem.limits import Limits
from flowmem.store import Store, open_store

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_LIMIT_CONCURRENCY = 500  # open connections (and running requests) per worker
DEFAULT_KEEP_ALIVE = 5  # seconds an idle keep-alive connection stays open
BODY_TIMEOUT_ENV = "FLOWMEM_BODY_TIMEOUT"
TOKEN_CACHE_TTL_ENV = "FLOWMEM_TOKEN_CACHE_TTL"
FORWARDED_ALLOW_IPS_ENV = "FLOWMEM_FORWARDED_ALLOW_IPS"


def check_forwarded_allow_ips(value: str) -> str:
    """Check ``--forwarded-allow-ips``: comma-separated addresses or networks, or ``*``; ``""``: none.

    Only a peer named here may set the client address with ``X-Forwarded-For`` (and
    the scheme with ``X-Forwarded-Proto``); uvicorn's own default trusts loopback,
    where any local process could forge the address the rate limits and the logs
    use (issue 24 §3). ConfigurationError for anything else.
    """
    items = [item.strip() for item in value.split(",") if item.strip()]
    for item in items:
        if item == "*":
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ConfigurationError(
                f"--forwarded-allow-ips: {item!r} is not an IP address or network "
                "(e.g. 10.0.0.5, 10.0.0.0/24, ::1, or * for any)"
            ) from None
    return ",".join(items)


def env_option(*names: str, envvar: str, **options: Any) -> Callable[[F], F]:
    """``click.option`` of an option ``envvar`` also sets, ``--help`` showing the variable and the default."""
    return click.option(*names, envvar=envvar, show_envvar=True, show_default=True, **options)


def _limit_options(command: F) -> F:
    """The stored-size and request-rate options; each also read from its environment variable."""
    defaults = Limits()
    rates = RateLimits()
    sizes = [
        ("message_bytes", "Bytes of one stored message (JSON)."),
        ("buffer_bytes", "Bytes of one buffer's messages (JSON)."),
        ("record_bytes", "Bytes of one memory record value (JSON)."),
        ("session_metadata_bytes", "Bytes of one session's metadata (JSON)."),
        ("sessions_per_user", "Sessions one user may own."),
        ("user_bytes", "Per-user quota: bytes one user's buffers and records hold (JSON)."),
        ("user_buffers", "Per-user quota: buffers one user has."),
        ("user_records", "Per-user quota: memory records one user has."),
    ]
    options = [
        env_option(
            f"--max-{name.replace('_', '-')}",
            name,
            default=getattr(defaults, name),
            envvar=LIMIT_ENV[name],
            type=click.IntRange(0),
            help=f"{text} 0 = unlimited.",
        )
        for name, text in sizes
    ]
    options.append(
        env_option(
            "--idempotency-seconds",
            "idempotency_seconds",
            default=defaults.idempotency_seconds,
            envvar=LIMIT_ENV["idempotency_seconds"],
            type=click.IntRange(0),
            help="Seconds an Idempotency-Key and its answer are kept. 0 = until the user is erased.",
        )
    )
    # (flag, RateLimits field, type, help)
    rate_flags = [
        ("--rate-limit", "requests_per_second", FiniteFloatRange(0),
         "Requests per second per API token, per worker (429 beyond). 0 = off."),
        ("--rate-burst", "burst", click.IntRange(0),
         "Requests one token may make at once above the rate."),
        ("--auth-failures", "auth_failures", click.IntRange(0),
         "Bad-token (401) requests one client address may make before 429. 0 = off."),
        ("--auth-failures-per-minute", "auth_failures_per_minute", FiniteFloatRange(0),
         "How fast a client address earns back bad-token allowances."),
    ]  # fmt: skip
    options += [
        env_option(
            flag,
            name,
            default=getattr(rates, name),
            envvar=RATE_ENV[name],
            type=kind,
            help=text,
        )
        for flag, name, kind, text in rate_flags
    ]
    for option in reversed(options):
        command = option(command)
    return command


def log_config(access_log: bool) -> dict[str, Any]:
    """Uvicorn's logging config plus the ``flowmem`` loggers (one JSON line per request)."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["plain"] = {"format": "%(message)s"}
    config["formatters"]["flowmem"] = {"format": "%(levelname)s %(name)s: %(message)s"}
    config["handlers"]["http_log"] = {
        "class": "logging.StreamHandler",
        "formatter": "plain",
        "stream": "ext://sys.stderr",
    }
    config["handlers"]["flowmem"] = {
        "class": "logging.StreamHandler",
        "formatter": "flowmem",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["flowmem"] = {"handlers": ["flowmem"], "level": "INFO", "propagate": False}
    config["loggers"]["flowmem.http"] = {
        "handlers": ["http_log"],
        "level": "INFO" if access_log else "WARNING",
        "propagate": False,
    }
    return config


DEFAULT_TOKEN_FILE = "flowmem-admin-token"
CREATE_ADMIN_HINT = "flowmem token create --admin"


@dataclass(frozen=True)
class Bootstrap:
    """What the first start created: the admin token, and the file it went to (None: print it)."""

    token: str
    file: Path | None


def check_listenable(host: str, port: int) -> None:
    """Refuse (``CannotListenError``) when ``host:port`` cannot be bound, before anything is created."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise CannotListenError(f"cannot listen on {host}:{port}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(address)
        except OSError as exc:
            raise CannotListenError(f"cannot listen on {host}:{port}: {exc}") from exc


def _new_private_file(path: Path) -> IO[str]:
    """Create ``path`` readable and writable by its owner only; refuse an existing file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise click.ClickException(
            f"{path} exists (an admin token from an earlier first start?): move it away, or "
            "choose another file with --admin-token-file; nothing was created"
        ) from None
    except OSError as exc:
        raise click.ClickException(
            f"cannot create the admin token file {path}: {exc}; nothing was created"
        ) from exc
    return os.fdopen(fd, "w", encoding="utf-8")


def has_admin_token(store: Store) -> bool:
    """True when some token that is not revoked carries the admin permission."""
    return any(PERM_ADMIN in t.permissions and not t.revoked for t in store.list_tokens())


def bootstrap(
    store: Store, host: str, port: int, token_file: Path | None
) -> Bootstrap | None:
    """On a database with no tokens, create the first admin token; None when tokens exist.

    The port is checked and the token file (``token_file``; None: the token will be
    printed) created first, so a failure leaves no token behind.
    """
    if store.list_tokens():
        return None
    try:
        check_listenable(host, port)
    except CannotListenError as exc:
        raise CannotListenError(
            f"{exc.message}; nothing was created: the next start creates the first admin "
            f"token, or create one with `{CREATE_ADMIN_HINT}`"
        ) from None
    sink = None if token_file is None else _new_private_file(token_file)
    try:
        token = bootstrap_admin_token(store)
        if token is None:  # another process bootstrapped meanwhile
            if token_file is not None:
                token_file.unlink(missing_ok=True)
            return None
        if sink is not None:
            sink.write(token + "\n")
            sink.flush()
            os.fsync(sink.fileno())
    except BaseException:
        if sink is not None:
            sink.close()
            if token_file is not None:
                token_file.unlink(missing_ok=True)
        raise
    if sink is not None:
        sink.close()
    return Bootstrap(token, token_file)


def prepare_database(
    url: str, host: str, port: int, token_file: Path | None
) -> tuple[Bootstrap | None, bool]:
    """Open the database once (creating its schema); return (bootstrap, an admin token exists)."""
    store = open_store(url)
    try:
        created = bootstrap(store, host, port, token_file)
        return created, created is not None or has_admin_token(store)
    finally:
        store.close()


def announce(created: Bootstrap | None, has_admin: bool, url: str, host: str, port: int) -> None:
    """Show the first admin token once (or its file), or how to create one when none exists."""
    if created is not None and created.file is None:
        click.echo("No tokens yet: created an admin token (shown once, store it now):")
        click.echo(f"  admin token: {created.token}")
        click.echo(
            f'  try: curl -H "Authorization: Bearer $TOKEN" http://{host}:{port}/v1/sessions'
        )
    elif created is not None:
        click.echo(
            f"No tokens yet: created an admin token; admin token written to {created.file} "
            "(readable only by its owner; it is not printed because stdout is not a terminal)"
        )
    elif not has_admin:
        database = "" if url == default_database_url() else f" --database {redact(url)}"
        click.echo(
            f"no admin token exists: create one with `{CREATE_ADMIN_HINT}{database}`", err=True
        )


@click.command("serve")
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Worker processes (needs a shared database: PostgreSQL or SQLite, not memory://).",
)
@click.option(
    "--access-log/--no-access-log",
    default=True,
    show_default=True,
    help="One JSON line per request on stderr (logger flowmem.http).",
)
@click.option(
    "--graceful-timeout",
    default=30,
    show_default=True,
    type=click.IntRange(1, 3600),
    help="Seconds to let in-flight requests finish on shutdown.",
)
@click.option(
    "--store-concurrency",
    default=None,
    type=click.IntRange(1, 256),
    envvar="FLOWMEM_STORE_CONCURRENCY",
    show_envvar=True,
    help="Threads per worker doing store work at once; more requests wait their turn. "
    "[default: 8 on SQLite, 2 on PostgreSQL; raise it for a database far away]",
)
@click.option(
    "--admin-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the first start writes its admin token when stdout is not a terminal "
    f"(a new file, mode 0600) [default: ./{DEFAULT_TOKEN_FILE}].",
)
@click.option(
    "--inline-store/--no-inline-store",
    default=True,
    show_default=True,
    help="On SQLite, make the memory routes' store calls on the event loop, sharing WAL "
    "fsyncs between writes (group commit). --no-inline-store puts every call in a thread.",
)
@env_option(
    "--limit-concurrency",
    default=DEFAULT_LIMIT_CONCURRENCY,
    envvar="FLOWMEM_LIMIT_CONCURRENCY",
    type=click.IntRange(1),
    help="Open connections per worker: requests past it get 503, connections past it "
    "are closed at once.",
)
@env_option(
    "--timeout-keep-alive",
    default=DEFAULT_KEEP_ALIVE,
    envvar="FLOWMEM_KEEP_ALIVE",
    type=click.IntRange(1, 3600),
    help="Seconds an idle keep-alive connection stays open.",
)
@env_option(
    "--header-timeout",
    default=DEFAULT_HEADER_TIMEOUT,
    envvar=HEADER_TIMEOUT_ENV,
    type=FiniteFloatRange(0),
    help="Seconds a request's headers may take to arrive (the connection is closed after). "
    "0 = no bound.",
)
@env_option(
    "--body-timeout",
    default=BODY_TIMEOUT,
    envvar=BODY_TIMEOUT_ENV,
    type=FiniteFloatRange(0),
    help="Seconds a request's body may take to arrive (408 after). 0 = no bound.",
)
@env_option(
    "--token-cache-ttl",
    default=TOKEN_CACHE_TTL,
    envvar=TOKEN_CACHE_TTL_ENV,
    type=FiniteFloatRange(0, 3600),
    help="Seconds a worker answers memory reads (/v1/buffers, /v1/memory) for a token it "
    "looked up, without looking it up again: a revocation by another process is seen "
    "within this time (writes check their token at once). 0 = look it up every time.",
)
@env_option(
    "--forwarded-allow-ips",
    default="",
    envvar=FORWARDED_ALLOW_IPS_ENV,
    help="Addresses (or networks, comma-separated; * for any) of the reverse proxies whose "
    "X-Forwarded-For / X-Forwarded-Proto are trusted. Default: none, the client address is "
    "the connection's peer.",
)
@click.option(
    "--metrics/--no-metrics",
    default=True,
    show_default=True,
    help="Serve GET /metrics (Prometheus) to tokens with the metrics:read permission "
    "(docs/metrics.md).",
)
@_limit_options
def serve_command(
    database: str | None,
    host: str,
    port: int,
    workers: int,
    access_log: bool,
    graceful_timeout: int,
    store_concurrency: int | None,
    admin_token_file: Path | None,
    inline_store: bool,
    limit_concurrency: int,
    timeout_keep_alive: int,
    header_timeout: float,
    body_timeout: float,
    token_cache_ttl: float,
    forwarded_allow_ips: str,
    metrics: bool,
    **limit_values: Any,
) -> None:
    """Serve the HTTP API on uvicorn (default database: ./flowmem.db).

    On a database with no tokens yet, a one-time admin token is created and shown
    once: printed on a terminal, otherwise written to a file only you can read
    (--admin-token-file) whose path is printed. SIGINT/SIGTERM stop accepting
    connections and let in-flight requests finish before exiting.
    """
    from flowmem.api.app import check_environment

    check_environment()  # a missing extra is one line, before any token or worker
    url = database or default_database_url()
    proxies = check_forwarded_allow_ips(forwarded_allow_ips)
    in_process = url.startswith("memory://")
    limits = Limits(**{k: v for k, v in limit_values.items() if k in LIMIT_ENV})
    rate_limits = RateLimits(**{k: v for k, v in limit_values.items() if k in RATE_ENV})
    # worker processes (and the connection protocol in this one) read these
    os.environ.update(limits.to_env())
    os.environ.update(rate_limits.to_env())
    os.environ[HEADER_TIMEOUT_ENV] = str(header_timeout)
    os.environ[BODY_TIMEOUT_ENV] = str(body_timeout)
    os.environ[TOKEN_CACHE_TTL_ENV] = str(token_cache_ttl)
    if workers > 1 and in_process:
        raise ConfigurationError(
            "--workers > 1 needs a database the workers share: sqlite:///… or postgresql://…"
        )
    token_file = None
    if not sys.stdout.isatty():
        token_file = admin_token_file or Path(DEFAULT_TOKEN_FILE)
    app: Any = None
    if in_process:
        store = open_store(url)  # lives in this process, with its bootstrap token
        created = bootstrap(store, host, port, token_file)
        has_admin = created is not None or has_admin_token(store)
        app = _in_process_app(
            store,
            store_concurrency=store_concurrency,
            inline_store=inline_store,
            limits=limits,
            rate_limits=rate_limits,
            body_timeout=body_timeout or None,
            token_cache_ttl=token_cache_ttl,
            metrics=metrics,
        )
    else:
        created, has_admin = prepare_database(url, host, port, token_file)
        _export_worker_settings(url, store_concurrency, inline_store)
    if created is None:
        check_listenable(host, port)  # the first start checked before creating its token
    announce(created, has_admin, url, host, port)
    click.echo(
        f"flowmem serving {redact(url)} on http://{host}:{port} with {workers} worker(s); "
        f"inspector: http://{host}:{port}/ui",
        err=True,
    )
    sys.stdout.flush()
    options: dict[str, Any] = {  # uvicorn's settings (the target and the worker count apart)
        "factory": app is None,
        "host": host,
        "port": port,
        "log_config": log_config(access_log),
        "access_log": False,
        "timeout_graceful_shutdown": graceful_timeout,
        "http": PROTOCOL,  # TCP_NODELAY and the header timeout on every connection
        "server_header": False,
        "limit_concurrency": limit_concurrency,
        "timeout_keep_alive": timeout_keep_alive,
        "h11_max_incomplete_event_size": HEAD_LIMIT,  # 431 past it (flowmem.api.tcp)
        # forwarded headers only from the proxies named (never uvicorn's loopback default)
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": proxies,
    }
    target = app if app is not None else "flowmem.api.app:app_from_env"
    # the workers' metrics files: a new private directory, removed when the server stops
    with metrics_directory(metrics and app is None):
        _run(target, workers, options)


def _in_process_app(store: Any, **settings: Any) -> Any:
    """The app over a store that lives in this process (``memory://``)."""
    from flowmem.api.app import create_app, runtime_runner

    return create_app(store, runner_factory=runtime_runner, freeze_gc=True, **settings)


def _export_worker_settings(url: str, store_concurrency: int | None, inline_store: bool) -> None:
    """Put what each worker process builds its app from in the environment."""
    os.environ[DATABASE_ENV] = url
    if store_concurrency is None:
        os.environ.pop("FLOWMEM_STORE_CONCURRENCY", None)
    else:
        os.environ["FLOWMEM_STORE_CONCURRENCY"] = str(store_concurrency)
    os.environ["FLOWMEM_INLINE_STORE"] = "1" if inline_store else "0"


def _run(target: Any, workers: int, options: dict[str, Any]) -> None:
    """Run uvicorn: one process, or workers each on a listener of its own."""
    if workers > 1 and spreads_connections():
        _serve_workers(uvicorn.Config(target, workers=workers, **options))
        return
    try:
        uvicorn.run(target, workers=workers if workers > 1 else None, **options)
    except SystemExit as exc:
        if exc.code not in (0, None):  # uvicorn failed (3: startup); a port taken since
            check_listenable(options["host"], options["port"])  # exit 10, not uvicorn's code
        raise


def _serve_workers(config: uvicorn.Config) -> None:
    """Run ``config.workers`` workers under uvicorn's supervisor, each on a listener of its own.

    What ``uvicorn.run`` does for ``workers > 1``, but with ``bound_socket`` in place
    of its one shared socket (flowmem.cli.listeners, decision 0038).
    """
    try:
        sock = bound_socket(config.host, config.port)
    except OSError as exc:  # taken since check_listenable
        raise CannotListenError(f"cannot listen on {config.host}:{config.port}: {exc}") from exc
    try:
        Multiprocess(config, sockets=[sock]).run()
    except KeyboardInterrupt:  # pragma: no cover - the supervisor handles SIGINT itself
        pass
    finally:
        sock.close()
