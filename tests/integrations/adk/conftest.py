"""ADK fixtures: ``FlowmemSessionService`` on every backend, and ADK's own services beside it.

``flowmem_service``: a ``FlowmemSessionService`` over a fresh memory, SQLite or
PostgreSQL store. ``reference``: ADK's ``DatabaseSessionService`` over a fresh SQLite
file (``sqlite+aiosqlite``), the service the issue asks flowmem's to behave as.
``clock``: ADK's platform clock fixed (``set_time``), so session times are equal on
both sides. Each test module skips itself where google-adk is not installed; this file
imports ADK only inside its fixtures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.service import MemoryService
from tests.store.conftest import BACKENDS, open_backend

START = 1_760_000_000.0


class Clock:
    """ADK's platform time, set by the test."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now

    def set_time(self, now: float) -> None:
        """Make ``now`` the time every ADK service reads."""
        self.now = now


@pytest.fixture
def clock() -> Iterator[Clock]:
    """ADK's clock (``google.adk.platform.time``), fixed at ``START`` until the test moves it."""

    from google.adk.platform import time as platform_time

    fixed = Clock()
    platform_time.set_time_provider(fixed)
    try:
        yield fixed
    finally:
        platform_time.reset_time_provider()


@pytest.fixture(params=BACKENDS)
def flowmem_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A ``FlowmemSessionService`` over a fresh store of each backend kind."""
    from flowmem.integrations.adk import FlowmemSessionService

    store = open_backend(request.param, request, tmp_path)
    try:
        yield FlowmemSessionService(MemoryService(store))
    finally:
        store.close()


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[Any]:
    """ADK's ``DatabaseSessionService`` over a fresh SQLite file (aiosqlite)."""
    from google.adk.sessions import DatabaseSessionService

    service = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk-reference.db'}")
    try:
        yield service
    finally:
        asyncio.run(service.close())
