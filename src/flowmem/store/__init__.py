"""Storage backends behind one protocol; ``open_store(url)`` picks one by URL scheme.

The rule of this package: a kind of data (``adk``, ``archive``, ``checkpoints``,
``conversations``, ``listing``, ``heads``) uses its back-end only through the engine,
``flowmem.store.engine`` (``Engine``, ``SqlEngine``), which the back-ends implement
once (``sqlengine.SqlEngineBase`` for SQLite and PostgreSQL; ``memory://`` is SQLite
on a private database in RAM, ``MemoryStore``, decision 0138). No module uses another object's
private member (a name with a leading ``_``): ruff's ``SLF001`` fails ``make lint`` on
one, and import-linter fails on a kind of data that imports a back-end
(``pyproject.toml``; ``tests/store/test_engine.py``, ``tests/test_import_contracts.py``).
"""

from __future__ import annotations

from flowmem.errors import ConfigurationError
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    SESSION_STATUSES,
    Address,
    Erasure,
    Idempotency,
    Quotas,
    SessionClaim,
    SessionRecord,
    Store,
    StoredAnswer,
    TokenRecord,
    TranscriptMessage,
    WriteGuard,
    idempotency_owner,
)

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "SESSION_STATUSES",
    "Address",
    "Erasure",
    "Idempotency",
    "MemoryStore",
    "Quotas",
    "SessionClaim",
    "SessionRecord",
    "Store",
    "StoredAnswer",
    "TokenRecord",
    "TranscriptMessage",
    "WriteGuard",
    "idempotency_owner",
    "open_store",
]


POSTGRES_EXTRA = (
    "a postgresql:// database needs flowmem's postgres extra ({missing} is not installed): "
    "pip install 'flowmem[postgres]' into the environment flowmem runs from"
)


def open_store(url: str, *, create: bool = True) -> Store:
    """Open a store from a URL: ``memory://``, ``sqlite:///path`` or ``postgresql://…``.

    ``create=False`` opens only an existing flowmem database: a missing SQLite file,
    or a database without flowmem's schema, is ``DatabaseNotFoundError`` and nothing
    is created. A ``postgresql://`` URL without the ``postgres`` extra installed is a
    ``ConfigurationError`` naming it.
    """
    if url.startswith("memory://"):
        return MemoryStore(url)
    if url.startswith("sqlite://"):
        from flowmem.store.sqlite import SqliteStore  # type: ignore[import-not-found,unused-ignore]

        return SqliteStore(url, create=create)  # type: ignore[no-any-return,unused-ignore]
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from flowmem.store.postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            if exc.name is None or exc.name.startswith("flowmem"):
                raise
            raise ConfigurationError(POSTGRES_EXTRA.format(missing=exc.name)) from None
        return PostgresStore(url, create=create)  # type: ignore[no-any-return,unused-ignore]
    raise ConfigurationError(
        f"unsupported store URL {url!r}: use memory://, sqlite:///path or postgresql://…"
    )


# the store ``memory://`` opens: SQLite on a private database in RAM (decision 0138)
from flowmem.store.sqlite.private import PrivateSqliteStore as MemoryStore  # noqa: E402
