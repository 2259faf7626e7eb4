# sync: """The sync client's vector calls (``flowmem.client.sync.Client`` inherits them)."""
"""The async client's vector calls (``AsyncClient`` inherits them): write a record with its vectors, search.

``flowmem.client.sync_vectors`` is generated from this module by
``scripts/async_to_sync.py``, as ``sync.py`` is from ``aio.py``. The caller embeds:
the server holds no model (decision 0125).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, Unpack

from flowmem.client import calls
from flowmem.client.aio_scoped import AsyncScopedCalls
from flowmem.client.calls import FlowIds, Where
from flowmem.client.types import SearchResult
from flowmem.results import WriteResult

T = TypeVar("T")


class AsyncVectorCalls(AsyncScopedCalls):
    """The vector calls of ``AsyncClient``, over its ``call``."""

    async def write_vectors(
        self,
        scope: str,
        key: str,
        value: object,
        *,
        space: tuple[str, int],
        vectors: Sequence[tuple[str, Sequence[float]]],
        ttl: float | None = None,
        **ids: Unpack[FlowIds],
    ) -> WriteResult:
        """Write a record with its vectors in one transaction: ``space`` is (name, dims), ``vectors`` (field, numbers).

        The record's vectors are replaced; another space than the store's raises
        ``EmbeddingSpaceError`` (409), nothing changed.
        """
        # Where(None, ...): a session_id= keyword is a TypeError (vectors are kept for user and shared scopes)
        return await self.call(calls.write_vectors(scope, key, value, Where(None, **ids), space, vectors, ttl))

    async def search_records(
        self,
        scope: str,
        vector: Sequence[float],
        *,
        space: tuple[str, int],
        distance: str = "cosine",
        prefix: str = "",
        limit: int = 10,
        offset: int = 0,
        **ids: Unpack[FlowIds],
    ) -> SearchResult:
        """The caller's records of ``scope`` under ``prefix`` ranked by their vectors against ``vector``, best first."""
        call = calls.search_records(
            scope, Where(None, **ids), space, vector, distance=distance, prefix=prefix, limit=limit, offset=offset
        )
        return await self.call(call)
