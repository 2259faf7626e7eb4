# Generated from src/flowmem/client/aio_vectors.py by scripts/async_to_sync.py: do not edit.
# Change aio_vectors.py, then run `python scripts/async_to_sync.py` (`make lint` fails while this file is stale).
"""The sync client's vector calls (``flowmem.client.sync.Client`` inherits them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, Unpack

from flowmem.client import calls
from flowmem.client.calls import FlowIds, Where
from flowmem.client.sync_scoped import ScopedCalls
from flowmem.client.types import SearchResult
from flowmem.results import WriteResult

T = TypeVar("T")


class VectorCalls(ScopedCalls):
    """The vector calls of ``Client``, over its ``call``."""

    def write_vectors(
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
        return self.call(calls.write_vectors(scope, key, value, Where(None, **ids), space, vectors, ttl))

    def search_records(
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
        return self.call(call)
