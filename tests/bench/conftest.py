"""The bench smoke tests' fork server, stopped and reaped when the session ends (decision 0203)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bench import forked


@pytest.fixture(scope="session", autouse=True)
def _bench_fork_server() -> Iterator[None]:
    """Stop the bench fork server at the session's end, so its children's CPU counts in this process."""
    yield
    forked.stop()
