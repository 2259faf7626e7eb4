"""``flowmem serve``: the HTTP API on uvicorn; also the ``--database URL`` option the token commands share."""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import uvicorn  # the server extra; without it the CLI names the extra to install

from flowmem.api.limits import BODY_TIMEOUT
from flowmem.api.ratelimit import ENV as RATE_ENV
from flowmem.api.ratelimit import RateLimits
from flowmem.api.tcp import DEFAULT_HEADER_TIMEOUT, HEADER_TIMEOUT_ENV, PROTOCOL
from flowmem.auth import bootstrap_admin_token
from flowmem.cli.database import (
    DATABASE_ENV,
    database_option,
    default_database_url,
    redact,
)
from flowmem.errors import ConfigurationError
from flowmem.limits import ENV as LIMIT_ENV
from flowmem.limits import Limits
from flowmem.store import open_store

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_LIMIT_CONCURRENCY = 500  # open connections (and running requests) per worker
DEFAULT_KEEP_ALIVE = 5  # seconds an idle keep-alive connection stays open
MAX_HEADER_BYTES = 16 * 1024  # h11's largest incomplete request head (uvicorn's default, explicit)
BODY_TIMEOUT_ENV = "FLOWMEM_BODY_TIMEOUT"


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
    ]
    options = [
        click.option(
            f"--max-{name.replace('_', '-')}",
            name,
            default=getattr(defaults, name),
            show_default=True,
            envvar=LIMIT_ENV[name],
            show_envvar=True,
            type=click.IntRange(0),
            help=f"{text} 0 = unlimited.",
        )
        for name, text in sizes
    ]
    options += [
        click.option(
            "--rate-limit",
            "requests_per_second",
            default=rates.requests_per_second,
            show_default=True,
            envvar=RATE_ENV["requests_per_second"],
            show_envvar=True,
            type=click.FloatRange(0),
            help="Requests per second per API token, per worker (429 beyond). 0 = off.",
        ),
        click.option(
            "--rate-burst",
            "burst",
            default=rates.burst,
            show_default=True,
            envvar=RATE_ENV["burst"],
            show_envvar=True,
            type=click.IntRange(0),
            help="Requests one token may make at once above the rate.",
        ),
        click.option(
            "--auth-failures",
            "auth_failures",
            default=rates.auth_failures,
            show_default=True,
            envvar=RATE_ENV["auth_failures"],
            show_envvar=True,
            type=click.IntRange(0),
            help="Bad-token (401) requests one client address may make before 429. 0 = off.",
        ),
        click.option(
            "--auth-failures-per-minute",
            "auth_failures_per_minute",
            default=rates.auth_failures_per_minute,
            show_default=True,
            envvar=RATE_ENV["auth_failures_per_minute"],
            show_envvar=True,
            type=click.FloatRange(0),
            help="How fast a client address earns back bad-token allowances.",
        ),
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


def prepare_database(url: str) -> str | None:
    """Open the database once (creating its schema) and return a bootstrap admin token, if any."""
    store = open_store(url)
    try:
        return bootstrap_admin_token(store)
    finally:
        store.close()


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
    default=8,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Threads per worker doing store work at once; more requests wait their turn.",
)
@click.option(
    "--inline-store/--no-inline-store",
    default=True,
    show_default=True,
    help="On SQLite, make the memory routes' store calls on the event loop, sharing WAL "
    "fsyncs between writes (group commit). --no-inline-store puts every call in a thread.",
)
@click.option(
    "--limit-concurrency",
    default=DEFAULT_LIMIT_CONCURRENCY,
    show_default=True,
    envvar="FLOWMEM_LIMIT_CONCURRENCY",
    show_envvar=True,
    type=click.IntRange(1),
    help="Open connections per worker: requests past it get 503, connections past it "
    "are closed at once.",
)
@click.option(
    "--timeout-keep-alive",
    default=DEFAULT_KEEP_ALIVE,
    show_default=True,
    envvar="FLOWMEM_KEEP_ALIVE",
    show_envvar=True,
    type=click.IntRange(1, 3600),
    help="Seconds an idle keep-alive connection stays open.",
)
@click.option(
    "--header-timeout",
    default=DEFAULT_HEADER_TIMEOUT,
    show_default=True,
    envvar=HEADER_TIMEOUT_ENV,
    show_envvar=True,
    type=click.FloatRange(0),
    help="Seconds a request's headers may take to arrive (the connection is closed after). "
    "0 = no bound.",
)
@click.option(
    "--body-timeout",
    default=BODY_TIMEOUT,
    show_default=True,
    envvar=BODY_TIMEOUT_ENV,
    show_envvar=True,
    type=click.FloatRange(0),
    help="Seconds a request's body may take to arrive (408 after). 0 = no bound.",
)
@_limit_options
def serve_command(
    database: str | None,
    host: str,
    port: int,
    workers: int,
    access_log: bool,
    graceful_timeout: int,
    store_concurrency: int,
    inline_store: bool,
    limit_concurrency: int,
    timeout_keep_alive: int,
    header_timeout: float,
    body_timeout: float,
    **limit_values: Any,
) -> None:
    """Serve the HTTP API on uvicorn (default database: ./flowmem.db).

    On a database with no tokens yet, a one-time admin token is created and
    printed. SIGINT/SIGTERM stop accepting connections and let in-flight requests
    finish before exiting.
    """
    url = database or default_database_url()
    in_process = url.startswith("memory://")
    limits = Limits(**{k: v for k, v in limit_values.items() if k in LIMIT_ENV})
    rate_limits = RateLimits(**{k: v for k, v in limit_values.items() if k in RATE_ENV})
    # worker processes (and the connection protocol in this one) read these
    os.environ.update(limits.to_env())
    os.environ.update(rate_limits.to_env())
    os.environ[HEADER_TIMEOUT_ENV] = str(header_timeout)
    os.environ[BODY_TIMEOUT_ENV] = str(body_timeout)
    if workers > 1 and in_process:
        raise ConfigurationError(
            "--workers > 1 needs a database the workers share: sqlite:///… or postgresql://…"
        )
    app: Any = None
    if in_process:
        from flowmem.api.app import create_app, runtime_runner

        store = open_store(url)  # lives in this process, with its bootstrap token
        token = bootstrap_admin_token(store)
        app = create_app(
            store,
            runner_factory=runtime_runner,
            store_concurrency=store_concurrency,
            inline_store=inline_store,
            freeze_gc=True,
            limits=limits,
            rate_limits=rate_limits,
            body_timeout=body_timeout or None,
        )
    else:
        token = prepare_database(url)
        os.environ[DATABASE_ENV] = url
        os.environ["FLOWMEM_STORE_CONCURRENCY"] = str(store_concurrency)
        os.environ["FLOWMEM_INLINE_STORE"] = "1" if inline_store else "0"
    if token is not None:
        click.echo("No tokens yet: created an admin token (shown once, store it now):")
        click.echo(f"  admin token: {token}")
        click.echo(
            f'  try: curl -H "Authorization: Bearer {token}" http://{host}:{port}/v1/sessions'
        )
    click.echo(
        f"flowmem serving {redact(url)} on http://{host}:{port} with {workers} worker(s)",
        err=True,
    )
    sys.stdout.flush()
    uvicorn.run(
        app if app is not None else "flowmem.api.app:app_from_env",
        factory=app is None,
        workers=workers if workers > 1 else None,
        host=host,
        port=port,
        log_config=log_config(access_log),
        access_log=False,
        timeout_graceful_shutdown=graceful_timeout,
        http=PROTOCOL,  # TCP_NODELAY and the header timeout on every connection
        server_header=False,
        limit_concurrency=limit_concurrency,
        timeout_keep_alive=timeout_keep_alive,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
