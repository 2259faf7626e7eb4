"""The backends every pydantic-ai test runs on: memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai.conversation_store")

from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from tests.migrated import migrated_sqlite_url

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL of each backend (a migrated, empty PostgreSQL schema per test)."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return migrated_sqlite_url(tmp_path / "conversations.db")  # migrated once per process
    url: str = request.getfixturevalue("postgres_store_url")  # migrated already
    return url


@pytest.fixture(params=BACKENDS[1:])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL that outlives its process: SQLite, PostgreSQL."""
    if request.param == "sqlite":
        return migrated_sqlite_url(tmp_path / "conversations.db")  # migrated once per process
    url: str = request.getfixturevalue("postgres_store_url")  # migrated already
    return url


@pytest.fixture
def flowmem_store(store_url: str) -> Iterator[FlowmemConversationStore]:
    """A ``FlowmemConversationStore`` on each backend."""
    store = FlowmemConversationStore.from_url(store_url)
    yield store
    store.close()


@pytest.fixture
def durable_store(durable_url: str) -> Iterator[FlowmemConversationStore]:
    """A ``FlowmemConversationStore`` on SQLite and PostgreSQL."""
    store = FlowmemConversationStore.from_url(durable_url)
    yield store
    store.close()
