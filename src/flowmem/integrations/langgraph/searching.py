"""``FlowmemStore``'s searches: items in key order, or ranked by a query's embedding.

``scan_items`` pages through the records of one scope id under a namespace's key
prefix (``flowmem.store.listing``), keeps the items that match the filter and skips
``offset`` of them. ``ranked_items`` keeps the best ``offset + limit`` items by score
(``semantic.rank``, which reads their values with their vectors), and then, as ``InMemoryStore`` does, fills the page
with the items that have no vector, in key order, after the scored ones: ``offset``
counts through both, so pages never repeat (``InMemoryStore`` restarts the unscored
items at every offset).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langgraph.store.base import SearchItem, SearchOp

from flowmem.integrations.langgraph.envelope import Envelope, timestamp
from flowmem.integrations.langgraph.namespaces import Place, decode_record_key
from flowmem.integrations.langgraph.ops import matches
from flowmem.integrations.langgraph.semantic import Index, rank
from flowmem.service import MemoryService, kinds
from flowmem.store.listing import ListedRecord

SEARCH_BATCH = 100  # records one page of a search reads

Hit = tuple[SearchItem, ListedRecord]


def item_of(place: Place, record: ListedRecord, score: float | None = None) -> Hit | None:
    """The search hit of a listed record; None when it is not an item of a ``FlowmemStore``."""
    decoded = decode_record_key(record.key)
    envelope = Envelope.of(record.value) if decoded is not None else None
    if decoded is None or envelope is None:
        return None
    labels, key = decoded
    item = SearchItem(
        namespace=place.namespace(labels),
        key=key,
        value=envelope.value,
        created_at=timestamp(envelope.created_at),
        updated_at=timestamp(envelope.updated_at),
        score=score,
    )
    return item, record


def scan_items(
    memory: MemoryService,
    place: Place,
    prefix: str,
    op: SearchOp,
    skip: set[str],
    offset: int,
    limit: int,
) -> list[Hit]:
    """Up to ``limit`` items matching the filter after ``offset``, in key order (``skip``: keys left out)."""
    if limit == 0:
        return []
    wanted = offset + limit
    batch = SEARCH_BATCH if op.filter or skip else max(1, min(wanted, SEARCH_BATCH))
    found: list[Hit] = []
    skipped = 0
    now = float(memory.clock())
    for record in kinds.iter_records_raw(memory, place.scope, place.scope_id, prefix, now=now, batch=batch):
        if record.key in skip:
            continue
        hit = item_of(place, record)
        if hit is None:
            continue  # a record of another writer under our prefix: not an item
        if op.filter and not matches(hit[0].value, op.filter):
            continue
        if skipped < offset:
            skipped += 1
            continue
        found.append(hit)
        if len(found) == limit:
            break
    return found


def ranked_items(
    memory: MemoryService,
    index: Index,
    place: Place,
    prefix: str,
    op: SearchOp,
    query: Sequence[float],
) -> list[Hit]:
    """The page of items ranked by score against ``query``, then the unscored ones in key order."""
    keep = op.offset + op.limit
    filters = op.filter or {}

    def accept(key: str, text: str | None) -> bool:
        envelope = Envelope.of(json.loads(text)) if text is not None else None
        return envelope is not None and matches(envelope.value, filters)

    best, scored, seen = rank(
        memory, index, place.scope, place.scope_id, prefix, query,
        now=float(memory.clock()), keep=keep, accept=accept if op.filter else None,
    )
    found: list[Hit] = []
    for key, score, text in best[op.offset :]:
        hit = item_of(place, ListedRecord(key, text, None), score)  # read with its vectors
        if hit is not None:
            found.append(hit)
    if len(found) < op.limit and scored < keep:  # the unscored items follow
        offset = max(op.offset - scored, 0)
        found.extend(scan_items(memory, place, prefix, op, seen or set(), offset, op.limit - len(found)))
    return found
