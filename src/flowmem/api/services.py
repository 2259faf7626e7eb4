"""The services a server's routes share: the store, the memory and session services, the caches."""

from __future__ import annotations

from dataclasses import dataclass, field

from flowmem.access import Principal
from flowmem.api.lookup import (
    SESSION_CACHE_SIZE,
    SESSION_CACHE_TTL,
    TOKEN_CACHE_SIZE,
    TOKEN_CACHE_TTL,
    LookupCache,
)
from flowmem.api.pool import StorePool
from flowmem.service import MemoryService
from flowmem.sessions import SessionService
from flowmem.store.base import SessionRecord, Store


@dataclass(frozen=True)
class Services:
    """What the routes use: the store, the memory service and the session service.

    ``tokens``: principals of recently looked-up tokens, by token hash (the gate's;
    memory routes only). ``recent_sessions``: sessions recently looked up by a
    guarded memory write, by the ``session_id`` asked for. Decision 0034.
    """

    store: Store
    memory: MemoryService
    sessions: SessionService
    pool: StorePool
    tokens: LookupCache[str, Principal] = field(
        default_factory=lambda: LookupCache(TOKEN_CACHE_TTL, TOKEN_CACHE_SIZE)
    )
    recent_sessions: LookupCache[str, SessionRecord] = field(
        default_factory=lambda: LookupCache(SESSION_CACHE_TTL, SESSION_CACHE_SIZE)
    )

    def forget(self) -> None:
        """Empty both caches (after an erasure or a session delete in this process)."""
        self.tokens.clear()
        self.recent_sessions.clear()
