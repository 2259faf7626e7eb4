"""Fixtures of the PostgreSQL store's own tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from flowmem.store.postgres import PostgresStore


@pytest.fixture
def one_conn(postgres_store_url: str) -> Iterator[PostgresStore]:
    """A store with exactly one pooled connection, so every call reuses it."""
    pytest.importorskip("psycopg")
    from flowmem.store.postgres import PostgresStore

    store = PostgresStore(f"{postgres_store_url}&pool_min=1&pool_max=1")
    try:
        yield store
    finally:
        store.close()
