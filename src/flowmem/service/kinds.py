"""The framework adapters' kinds of data and record listings, through the memory service (decision 0115).

An adapter (``flowmem.integrations``) never touches ``MemoryService.store``: what it
stores beside the buffers and records it reaches here, from the service it was given.

- ``adk_sessions``, ``checkpoints``, ``conversations``: the kind's protocol
  (``flowmem.store.adk``, ``.checkpoints``, ``.conversations``) over the service's
  store, which counts every write against the owner's quotas the service gave it
  (decision 0112). The kind's calls take the ids the adapter checked with
  ``flowmem.service.checks`` and resolved with ``MemoryService.resolve`` (decision 0109):
  the adapter owns the shape of its data, the service who and what may be stored.
- ``check_listing``, ``list_records_raw``, ``iter_records_raw``, ``touch_record_raw``:
  a scope id's records under a key prefix (``flowmem.store.listing``), for callers that
  resolved the scope already (as the service's ``*_raw`` calls), their address checked
  as the service checks one.
- ``purge_expired``: every record expired by the service's clock, deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from flowmem.scope import check_scope
from flowmem.service.checks import check_key, check_prefixed, check_scope_id
from flowmem.store.adk import AdkSessions, adk_of
from flowmem.store.base import Address
from flowmem.store.checkpoints import Checkpoints, checkpoints_of
from flowmem.store.conversations import Conversations, conversations_of
from flowmem.store.listing import (
    LIST_BATCH,
    ListedRecord,
    iter_records,
    list_records,
    listing_of,
    touch_record,
)

if TYPE_CHECKING:
    from flowmem.service import MemoryService

def adk_sessions(memory: MemoryService) -> AdkSessions:
    """The ADK sessions kept beside ``memory``'s buffers; TypeError for a store that has none."""
    return adk_of(memory.store)


def checkpoints(memory: MemoryService) -> Checkpoints:
    """The LangGraph checkpoints kept beside ``memory``'s buffers; TypeError for a store that has none."""
    return checkpoints_of(memory.store)


def conversations(memory: MemoryService) -> Conversations:
    """The pydantic-ai conversations kept beside ``memory``'s buffers; TypeError for a store that has none."""
    return conversations_of(memory.store)


def check_listing(memory: MemoryService) -> None:
    """ConfigurationError when ``memory``'s store cannot list its records by key prefix."""
    listing_of(memory.store)


def list_records_raw(
    memory: MemoryService,
    scope: str,
    scope_id: str,
    prefix: str,
    *,
    now: float,
    start: str | None = None,
    limit: int = LIST_BATCH,
    values: bool = True,
) -> list[ListedRecord]:
    """One page of the live records of ``(scope, scope_id)`` whose key starts with ``prefix`` (no resolution)."""
    scope, scope_id, prefix = check_prefixed(scope, scope_id, prefix)
    return list_records(
        memory.store, scope, scope_id, prefix, now=now, start=start, limit=limit, values=values
    )


def iter_records_raw(
    memory: MemoryService,
    scope: str,
    scope_id: str,
    prefix: str,
    *,
    now: float,
    batch: int = LIST_BATCH,
) -> Iterator[ListedRecord]:
    """Every live record ``list_records_raw`` lists, read ``batch`` at a time (no resolution)."""
    scope, scope_id, prefix = check_prefixed(scope, scope_id, prefix)
    return iter_records(memory.store, scope, scope_id, prefix, now=now, batch=batch)


def touch_record_raw(
    memory: MemoryService,
    scope: str,
    scope_id: str,
    key: str,
    text: str,
    expires_at: float,
    now: float,
) -> bool:
    """Move a live record's expiry while it still holds ``text`` (``flowmem.store.listing.touch_record``)."""
    address = Address(check_scope(scope), check_scope_id(scope_id), check_key(key))
    return touch_record(memory.store, address, text, expires_at, now)


def purge_expired(memory: MemoryService) -> int:
    """Delete every record expired by the service's clock, a store batch at a time; how many went."""
    now, total = float(memory.clock()), 0
    while deleted := memory.store.purge_expired(now):
        total += deleted
    return total
