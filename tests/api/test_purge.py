"""The server's background purge of expired memory records."""

from __future__ import annotations

import logging
import time

import pytest

from flowmem.api import create_app
from flowmem.api import purge as purge_module
from flowmem.errors import ConfigurationError, StoreBusyError
from flowmem.store import Address, MemoryStore
from tests.api.transport import OneHopClient

NOW = 1000.0


class CountingStore(MemoryStore):
    """A memory store that counts purges and can fail the first ones."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__()
        self.purges = 0
        self.failures = failures

    def purge_expired(self, now: float, limit: int = 1000) -> int:
        self.purges += 1
        if self.failures:
            self.failures -= 1
            raise StoreBusyError("busy")
        return super().purge_expired(now, limit)


def _wait_for(condition: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _gone(store: MemoryStore, key: str) -> bool:
    # read as of before any expiry: only a deleted record is not found then
    return store.get_record(Address("global", "", key), 0.0) == (False, None)


def test_expired_records_are_deleted_in_the_background_in_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(purge_module, "PURGE_BATCH", 2)
    store = CountingStore()
    for index in range(5):
        store.put_record(Address("global", "", f"old{index}"), index, NOW - 1)
    store.put_record(Address("global", "", "fresh"), "f", NOW + 1)
    app = create_app(store, purge_interval=0.01, clock=lambda: NOW)
    with OneHopClient(app):
        _wait_for(lambda: all(_gone(store, f"old{i}") for i in range(5)))
        assert store.purges >= 3  # batches of at most 2
    assert not _gone(store, "fresh")


def test_a_failing_purge_is_logged_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    store = CountingStore(failures=1)
    store.put_record(Address("global", "", "old"), 1, NOW - 1)
    app = create_app(store, purge_interval=0.01, clock=lambda: NOW)
    with caplog.at_level(logging.WARNING, logger="flowmem"), OneHopClient(app):
        _wait_for(lambda: _gone(store, "old"))
    assert store.purges >= 2
    assert any("purging expired records failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("interval", [0, -1.0, float("nan"), "60", True])
def test_purge_interval_must_be_positive(interval: object) -> None:
    with pytest.raises(ConfigurationError):
        create_app(MemoryStore(), purge_interval=interval)  # type: ignore[arg-type]
