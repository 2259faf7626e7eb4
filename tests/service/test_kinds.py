"""``flowmem.service.kinds``: the adapters' kinds of data and record listings through the service."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.errors import ConfigurationError, InvalidInputError, InvalidTextError
from flowmem.service import MemoryService, kinds
from flowmem.store import MemoryStore


class Clock:
    """A settable clock (epoch seconds)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memory(clock: Clock) -> MemoryService:
    return MemoryService(MemoryStore(), clock=clock)


class Partial:
    """A store with none of the kinds of data (nor a listing)."""

    def set_quotas(self, quotas: Any) -> None:
        """Take the quotas (a partial store counts none)."""


def test_each_kind_of_data_is_its_backends_over_the_services_store(memory: MemoryService) -> None:
    assert type(kinds.adk_sessions(memory)).__module__ == "flowmem.store.adk.sql"
    assert type(kinds.checkpoints(memory)).__module__ == "flowmem.store.checkpoints.sql"
    assert type(kinds.conversations(memory)).__module__ == "flowmem.store.conversations.sql"


def test_a_store_without_a_kind_of_data_is_a_type_error() -> None:
    partial = MemoryService(Partial())  # type: ignore[arg-type]
    for kind in (kinds.adk_sessions, kinds.checkpoints, kinds.conversations):
        with pytest.raises(TypeError):
            kind(partial)


def test_a_store_that_cannot_list_records_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        kinds.check_listing(MemoryService(Partial()))  # type: ignore[arg-type]


def test_records_are_listed_by_prefix_in_key_order_page_by_page(memory: MemoryService) -> None:
    for key in ("p:b", "p:a", "q:a", "p:c"):
        memory.write_raw("user", "alice", key, {"k": key})
    page = kinds.list_records_raw(memory, "user", "alice", "p:", now=memory.clock(), limit=2)
    assert [(r.key, r.value) for r in page] == [("p:a", {"k": "p:a"}), ("p:b", {"k": "p:b"})]
    keys = kinds.list_records_raw(memory, "user", "alice", "p:", now=1_000.0, start="p:b", values=False)
    assert [(r.key, r.text) for r in keys] == [("p:b", None), ("p:c", None)]
    every = kinds.iter_records_raw(memory, "user", "alice", "", now=1_000.0, batch=1)
    assert [r.key for r in every] == ["p:a", "p:b", "p:c", "q:a"]


def test_a_listing_address_the_service_would_refuse_is_a_typed_error(memory: MemoryService) -> None:
    with pytest.raises(InvalidInputError):
        kinds.list_records_raw(memory, "galaxy", "alice", "p:", now=1_000.0)
    with pytest.raises(InvalidInputError):
        kinds.list_records_raw(memory, "user", 7, "p:", now=1_000.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        list(kinds.iter_records_raw(memory, "user", "alice", "p\x00", now=1_000.0))
    with pytest.raises(InvalidTextError):
        kinds.touch_record_raw(memory, "user", "alice", "\ud800", "{}", 2_000.0, 1_000.0)


def test_a_touch_moves_the_expiry_only_of_the_value_read(memory: MemoryService, clock: Clock) -> None:
    memory.write_raw("user", "alice", "k", {"v": 1}, ttl=10)
    text = kinds.list_records_raw(memory, "user", "alice", "k", now=clock.now)[0].text
    assert text is not None
    assert kinds.touch_record_raw(memory, "user", "alice", "k", text, clock.now + 100, clock.now)
    assert not kinds.touch_record_raw(memory, "user", "alice", "k", '{"v": 2}', clock.now + 500, clock.now)
    clock.now += 50  # past the first TTL, within the moved one
    assert memory.read_raw("user", "alice", "k").value == {"v": 1}


def test_purge_deletes_every_record_expired_by_the_services_clock(
    memory: MemoryService, clock: Clock
) -> None:
    for n in range(3):
        memory.write_raw("user", "alice", f"gone{n}", n, ttl=5)
    memory.write_raw("user", "alice", "kept", 1)
    assert kinds.purge_expired(memory) == 0  # nothing expired yet by the service's clock
    clock.now += 6
    assert kinds.purge_expired(memory) == 3
    listed = kinds.list_records_raw(memory, "user", "alice", "", now=0.0)  # expired ones would show
    assert [r.key for r in listed] == ["kept"]
