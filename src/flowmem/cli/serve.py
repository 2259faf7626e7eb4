"""``flowmem serve``: the HTTP API on uvicorn; also the ``--database URL`` option the token commands share."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from flowmem.store import Store, open_store

DATABASE_ENV = "FLOWMEM_DATABASE_URL"
DEFAULT_FILE = "flowmem.db"

F = TypeVar("F", bound=Callable[..., Any])


def default_database_url() -> str:
    """Return ``$FLOWMEM_DATABASE_URL`` or the SQLite file ``./flowmem.db``."""
    from_env = os.environ.get(DATABASE_ENV)
    if from_env:
        return from_env
    return "sqlite:///" + str(Path.cwd() / DEFAULT_FILE)


def database_option(func: F) -> F:
    """Decorate a command with ``--database URL`` (default: env var, else ./flowmem.db)."""
    return click.option(
        "--database",
        default=None,
        metavar="URL",
        help=f"memory://, sqlite:///path or postgresql://… (default: ${DATABASE_ENV} or ./{DEFAULT_FILE}).",
    )(func)


def open_database(url: str | None) -> Store:
    """Open the store at ``url`` (or the default one)."""
    return open_store(url or default_database_url())
