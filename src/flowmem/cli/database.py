"""Which store a CLI command opens: ``--database URL``, else ``$FLOWMEM_DATABASE_URL``, else ./flowmem.db.

No server dependency here, so ``token`` and ``user`` run on a plain install.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import click

from flowmem.store import Store, open_store

DATABASE_ENV = "FLOWMEM_DATABASE_URL"  # the same variable flowmem.api.app reads
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


def redact(url: str) -> str:
    """Return ``url`` with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
