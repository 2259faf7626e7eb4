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


def open_database(url: str | None, *, create: bool = False) -> Store:
    """Open the flowmem database at ``url`` (or the default one); it must exist unless ``create``.

    Only ``flowmem serve`` (which opens its store itself) and the commands that must
    write a new database (``token create``, ``chat``) create one (decision 0048): a
    command that reads or changes existing data refuses a database that does not
    exist (DatabaseNotFoundError, exit 3), so a misspelled path creates nothing.
    """
    return open_store(url or default_database_url(), create=create)


def redact(url: str) -> str:
    """Return ``url`` with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
