"""Fixtures of the runtime tests: the fake OpenAI-compatible provider on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runtime.fake_provider import FakeProvider
from tests.runtime.helpers import close_opened


@pytest.fixture(autouse=True)
def _close_opened() -> Iterator[None]:
    """Close what a test opened (``make_runner``'s runners, ``opened``), so no model client outlives it."""
    yield
    close_opened()


@pytest.fixture(scope="session")
def _provider_server() -> Iterator[FakeProvider]:
    provider = FakeProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def fake_provider(_provider_server: FakeProvider) -> Iterator[FakeProvider]:
    """The fake provider, with an empty script and no recorded requests."""
    _provider_server.reset()
    yield _provider_server
    _provider_server.reset()
