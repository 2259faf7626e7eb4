"""A compaction takes its turn after a write whose run was cancelled (decision 0152).

``_atomic_replace_items`` (what the SDK's compaction session calls) archives the stored
history and puts the compacted items in its place. Over a synchronous memory it runs in
a worker thread: it must run in the session's queue, or it overtakes a write still
going in a cancelled run's thread, archives without it, and the late write lands after
the summary. ``Gate`` (``tests/integrations/test_in_order.py``) holds the append of
``"first"`` until released.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

pytest.importorskip("agents")

from flowmem.integrations.openai_agents import FlowmemSession
from tests.integrations.test_in_order import OVERTAKE_SECONDS, Gate


def test_mem_3_a_compaction_after_a_cancelled_write_archives_it_instead_of_being_overtaken() -> None:
    gate = Gate()
    session = FlowmemSession("s1", gate)

    async def scenario() -> list[object]:
        first = asyncio.create_task(session.add_items([{"role": "user", "content": "first"}]))
        await asyncio.to_thread(gate.first_entered.wait, 30)
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        summary = [{"role": "user", "content": "summary"}]
        compacting = asyncio.create_task(session._atomic_replace_items(summary))  # type: ignore[arg-type]
        await asyncio.sleep(OVERTAKE_SECONDS)  # time for it to overtake the held write (it must not)
        gate.release.set()
        assert await compacting
        return [item.get("content") for item in await session.get_items()]  # type: ignore[union-attr]

    assert asyncio.run(scenario()) == ["summary"]
    archived = gate.load(session.scope, session.key, session.context, include_archived=True).messages
    assert [row["content"] for row in archived] == ["first", "summary"]
