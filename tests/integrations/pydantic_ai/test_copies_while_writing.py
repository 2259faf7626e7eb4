"""A save's kept copy is made while its write runs (decision 0170), and keeps what the plain path keeps.

What a save validated is kept for the next load (``Validated``, decisions 0145, 0176):
planning it took the caller's thread after the write's answer, on the turn's way out.
``FlowmemConversationStore.copies_while_writing`` (the seam) makes it once the write is
queued, while the worker thread writes and waits for the disk, and keeps it once the
write is stored; False is the plain path (made and kept after). Both keep the same
segments, a load after either gives the same messages without validating, and a write
refused keeps nothing.
"""

from __future__ import annotations

import asyncio
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict

from flowmem.integrations import copies
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from tests.integrations.pydantic_ai.messages import turn


@pytest.mark.parametrize("ahead", [True, False], ids=["while-writing", "plain"])
def test_the_copy_is_made_while_the_write_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: bool
) -> None:
    """The write waits for the copy to be made: it is, while writing; the plain path (as before
    decision 0170) makes it after the write, so the write's wait runs out."""
    store = FlowmemConversationStore.from_url(f"sqlite:///{tmp_path / 'pa.db'}")
    store.copies_while_writing = ahead
    made = threading.Event()
    seen: list[bool] = []
    make = copies.KeptCopies.made

    def marked(self: Any, written: Any) -> Any:
        try:
            return make(self, written)
        finally:
            made.set()

    monkeypatch.setattr(copies.KeptCopies, "made", marked)
    write_now = store._write_now
    armed: list[bool] = []  # the second save's write waits (the first, a new conversation's, makes no copy)

    def waiting(*args: Any) -> None:
        write_now(*args)
        if armed:
            seen.append(made.wait(10 if ahead else 0.5))

    monkeypatch.setattr(store, "_write_now", waiting)

    async def scenario() -> None:
        await store.save(Conversation(conversation_id="c", messages=turn(0)))
        loaded = await store.load("c")
        assert loaded is not None
        loaded = await store.load("c")  # read again: kept
        assert loaded is not None
        made.clear()
        armed.append(True)
        loaded.messages.extend(turn(1))
        await store.save(loaded)

    try:
        asyncio.run(scenario())
    finally:
        store.close()
    assert seen == [ahead]


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: bool, turns: int
) -> tuple[Any, ...]:
    """Saves and loads of ``turns`` turns: the messages loaded, the kept segments (entry ids
    are new in each run: counted), the validations."""
    store = FlowmemConversationStore.from_url(f"sqlite:///{tmp_path / f'pa-{ahead}.db'}")
    store.copies_while_writing = ahead
    validated: list[int] = []
    validate = store._validated.validate

    def counted(texts: Any) -> Any:
        validated.append(len(texts))
        return validate(texts)

    monkeypatch.setattr(store._validated, "validate", counted)
    loads: list[bytes] = []

    async def scenario() -> None:
        await store.save(Conversation(conversation_id="c", messages=turn(0)))
        for i in range(1, turns + 1):
            loaded = await store.load("c")
            assert loaded is not None
            loads.append(pickle.dumps(loaded.messages))
            loaded.messages.extend(turn(i))
            await store.save(loaded)
        stale = Conversation(conversation_id="c", messages=[*turn(0), *turn(99)], revision="stale")
        with pytest.raises(ConversationConflict):
            await store.save(stale)  # refused: keeps nothing
        final = await store.load("c")
        assert final is not None
        loads.append(pickle.dumps(final.messages))

    try:
        asyncio.run(scenario())
        kept = [
            [(len(segment.ids), segment.texts, segment.plan is not None) for segment in line]
            for line in store._validated._lines.values()
        ]
    finally:
        store.close()
    return loads, kept, validated


@pytest.mark.parametrize("turns", [1, 3, copies.MAX_SEGMENTS + 2])
def test_the_copy_made_while_writing_keeps_what_the_plain_path_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, turns: int
) -> None:
    ahead = _run(tmp_path, monkeypatch, True, turns)
    assert ahead == _run(tmp_path, monkeypatch, False, turns)
    loads, kept, validated = ahead
    assert len(loads) == turns + 1
    assert validated == [
        4
    ]  # the first read alone: every save's messages kept, the refused one's not
    assert len(kept) == 1
