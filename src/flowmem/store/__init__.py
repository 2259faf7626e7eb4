"""Storage backends behind one protocol; ``open_store(url)`` picks one by URL scheme."""

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
from flowmem.store.memory import MemoryStore

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


def open_store(url: str) -> Store:
    """Open a store from a URL: ``memory://``, ``sqlite:///path`` or ``postgresql://…``."""
    if url.startswith("memory://"):
        return MemoryStore(url)
    if url.startswith("sqlite://"):
        from flowmem.store.sqlite import SqliteStore  # type: ignore[import-not-found,unused-ignore]

        return SqliteStore(url)  # type: ignore[no-any-return,unused-ignore]
    if url.startswith(("postgresql://", "postgres://")):
        from flowmem.store.postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]

        return PostgresStore(url)  # type: ignore[no-any-return,unused-ignore]
    raise ConfigurationError(
        f"unsupported store URL {url!r}: use memory://, sqlite:///path or postgresql://…"
    )
