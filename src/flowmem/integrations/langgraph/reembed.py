"""Move a ``FlowmemStore``'s vectors to a new embedding space while searches keep answering (issue 40).

``reembed(memory, index)`` re-embeds, with the new ``IndexConfig``'s embedder, every
text that has a vector in the active space, into a ``next`` space
(``flowmem.store.vectors``: ``begin``, ``pending``, ``fill``), then switches
atomically (``switch``: the next space becomes the active one and the old vectors
are deleted, in one transaction, only when no record is left pending). Until the
switch, searches and puts run in the old space as before; a record put meanwhile
loses its next-space vectors with its old value and is re-embedded on the next
pass. After it, a ``FlowmemStore`` must be built with the new index: one built with
the old one is refused (``EmbeddingSpaceError``) and says so.

Resumable: a run that stops (a crash, Ctrl-C, an embedder error) leaves the next
space and the vectors it filled; the next run with the same space goes on from
there (one with another space starts the move again).

Each vector is re-embedded from the text it was made from: the field path and
ordinal it records, read again from the record's value (``get_text_at_path``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.store.base.embed import get_text_at_path, tokenize_path

from flowmem.errors import ConflictError
from flowmem.integrations.langgraph.envelope import Envelope
from flowmem.integrations.langgraph.semantic import COLLECTION, Index
from flowmem.service import MemoryService
from flowmem.service.vector_kinds import vectors
from flowmem.store.vectors import Pending, Space, Vector, pack

PAGE = 256  # pending vectors read at a time
BATCH = 64  # records embedded per call of the embedder


@dataclass(frozen=True)
class Moved:
    """What a move did: from which space to which, records re-embedded, passes over the store."""

    old: Space
    new: Space
    records: int
    passes: int


def _texts(pending: Pending) -> list[tuple[str, int, str]]:
    """The (field, ordinal, text) a pending record's vectors were made from."""
    envelope = Envelope.of(json.loads(pending.text))
    if envelope is None:
        return []
    found: list[tuple[str, int, str]] = []
    for field, ordinal in pending.fields:
        texts = get_text_at_path(envelope.value, "$" if field == "$" else tokenize_path(field))
        if ordinal < len(texts):
            found.append((field, ordinal, texts[ordinal]))
    return found


def reembed(
    memory: MemoryService,
    index: Mapping[str, Any],
    *,
    space: str | None = None,
    batch: int = BATCH,
    progress: Callable[[int, int], None] | None = None,
    max_passes: int = 100,
) -> Moved:
    """Re-embed the store's ``FlowmemStore`` vectors into ``index``'s space, then switch to it.

    ``progress(done, pending)`` is called after each batch: records re-embedded in this
    run, and records pending when the pass began.
    """
    new = Index.of(index, space)
    kept = vectors(memory)
    spaces = kept.begin(COLLECTION, new.space)
    old = spaces.active
    if old is None:  # begin refuses a collection without vectors; a switch by another run since
        raise ConflictError("the store has no active embedding space: nothing to re-embed")
    done = passes = 0
    while True:
        waiting = kept.switch(COLLECTION)
        if waiting == 0:
            return Moved(old, new.space, done, passes)
        passes += 1
        if passes > max_passes:
            raise ConflictError(
                f"{waiting} records still wait to be re-embedded after {max_passes} passes: "
                "writes outpace the move; run flowmem reembed again when they slow down"
            )
        filled_in_pass = 0
        after = None
        while page := kept.pending(COLLECTION, after, PAGE):
            for start in range(0, len(page), batch):
                group = page[start : start + batch]
                texts = {p.address: _texts(p) for p in group}
                embedded = new.embed_documents([t for found in texts.values() for _, _, t in found])
                for pending in group:
                    found = [Vector(f, o, pack(embedded[t], new.space)) for f, o, t in texts[pending.address]]
                    if found and kept.fill(pending.address, pending.text, COLLECTION, found):
                        done += 1
                        filled_in_pass += 1
                if progress is not None:
                    progress(done, waiting)
            after = page[-1].address
        if filled_in_pass == 0:
            raise ConflictError(
                f"{waiting} records have vectors whose texts cannot be read again: nothing re-embedded"
            )
