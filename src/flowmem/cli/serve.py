"""``flowmem serve``: the HTTP API on uvicorn; also the ``--database URL`` option the token commands share."""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import uvicorn  # the server extra; without it the CLI names the extra to install

from flowmem.api.tcp import PROTOCOL
from flowmem.auth import bootstrap_admin_token
from flowmem.cli.database import (
    DATABASE_ENV,
    database_option,
    default_database_url,
    redact,
)
from flowmem.errors import ConfigurationError
from flowmem.store import open_store

F = TypeVar("F", bound=Callable[..., Any])


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
def serve_command(
    database: str | None,
    host: str,
    port: int,
    workers: int,
    access_log: bool,
    graceful_timeout: int,
    store_concurrency: int,
    inline_store: bool,
) -> None:
    """Serve the HTTP API on uvicorn (default database: ./flowmem.db).

    On a database with no tokens yet, a one-time admin token is created and
    printed. SIGINT/SIGTERM stop accepting connections and let in-flight requests
    finish before exiting.
    """
    url = database or default_database_url()
    in_process = url.startswith("memory://")
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
        http=PROTOCOL,  # TCP_NODELAY on every connection, also with --workers
        server_header=False,
    )
