"""The client's read of a buffer's repair log (issue 37 §2): ``Client.repairs`` and its async twin."""

from __future__ import annotations

import asyncio

from flowmem.client import RepairEntry, RepairLog
from tests.client.conftest import Server

CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
    "function": {"name": "f", "arguments": "{}"}}]}
NEXT = {"role": "user", "content": "and then?"}


def test_mem_3_the_client_reads_the_log_newest_first_and_pages_it(server: Server) -> None:
    with server.client("alice") as client:
        client.append_buffer("user", "chat", [CALL, NEXT])  # heals c1 (MEM-3)
        client.append_buffer("user", "chat", [{"role": "tool", "tool_call_id": "c1", "content": "x"}])
        log = client.repairs("user", "chat")
        assert isinstance(log, RepairLog) and log.resolved_scope_id == "alice"
        assert [(e.rule, e.call_ids, e.count) for e in log.repairs] == [
            ("MEM-10", ["c1"], 1),
            ("MEM-3", ["c1"], 1),
        ]
        assert all(isinstance(e, RepairEntry) for e in log.repairs) and log.next_before is None
        first = client.repairs("user", "chat", limit=1)
        assert [e.seq for e in first.repairs] == [2] and first.next_before == 2
        older = client.repairs("user", "chat", limit=1, before=first.next_before)
        assert [e.seq for e in older.repairs] == [1] and older.next_before is None
        rows = client.load_buffer("user", "chat").messages
        assert rows[log.repairs[0].positions[0]]["content"] == "x"


def test_mem_3_the_async_client_is_the_twin(server: Server) -> None:
    async def main() -> RepairLog:
        async with server.async_client("alice") as client:
            await client.append_buffer("user", "chat", [CALL, NEXT])
            return await client.repairs("user", "chat")

    log = asyncio.run(main())
    assert [(e.rule, e.call_ids) for e in log.repairs] == [("MEM-3", ["c1"])]


def test_a_refused_scope_reads_an_empty_log_with_its_code(server: Server) -> None:
    with server.client("alice") as client:
        log = client.repairs("session", "chat_history")
        assert log.repairs == [] and log.refused == "no_session_id"
