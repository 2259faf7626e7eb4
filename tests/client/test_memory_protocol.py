"""``flowmem.memory.Memory``: ``MemoryService`` in process and ``Client`` over HTTP, one interface.

``flowmem.memory.AsyncMemory`` is its awaited twin, implemented by ``AsyncClient``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import replace
from typing import Any

import httpx
import pytest

from flowmem.client import AsyncClient, Client
from flowmem.client.scoping import USER_RULE
from flowmem.errors import AccessDeniedError, ConfigurationError, NotFoundError
from flowmem.memory import OPERATIONS, AsyncMemory, Memory
from flowmem.results import BufferResult, PopResult, ReadResult, WriteResult
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, MemoryStore, open_store
from tests.client.conftest import Server

ALICE = ExecutionContext(user_id="alice", node_id="n1")


def _no_timestamps(value: Any) -> Any:
    if isinstance(value, BufferResult | PopResult):
        rows = value.messages if isinstance(value, BufferResult) else [value.message]
        cleaned = [{k: v for k, v in r.items() if k != "timestamp"} for r in rows if r]
        if isinstance(value, BufferResult):
            return replace(value, messages=cleaned)
        return replace(value, message=cleaned[0] if cleaned else None)
    return value


def _script(memory: Memory, session_ctx: ExecutionContext) -> list[Any]:
    """The same calls, in order, on any ``Memory``; their results."""
    user = {"role": "user", "content": "weather?"}
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "w"}]}
    result = {"role": "tool", "content": "sunny", "tool_call_id": "c1"}
    return [
        memory.append("user", "chat", [user, call], ALICE),
        memory.append("user", "chat", [result, result], ALICE, 10, return_messages=True),
        memory.load("user", "chat", ALICE),
        memory.load("user", "chat", ALICE, last=1),
        memory.pop_last("user", "chat", ALICE),
        memory.load("user", "chat", ALICE),
        memory.clear("user", "chat", ALICE),
        memory.pop_last("user", "chat", ALICE),
        memory.write("user", "profile", {"name": "Ada"}, ALICE, ttl=3600),
        memory.read("user", "profile", ALICE),
        memory.read("user", "missing", ALICE, default=7),
        memory.delete("user", "profile", ALICE),
        memory.delete("user", "profile", ALICE),
        memory.append("session", "chat_history", [user], session_ctx),
        memory.load("session", "chat_history", session_ctx),
        # refusals: the neutral results (MEM-7)
        memory.append("user", "chat", [user], ExecutionContext()),
        memory.load("session", "chat_history", None),
        memory.read("user", "profile", ExecutionContext(user_id="None"), default=1),
        memory.write("user", "profile", 1, None),
        memory.delete("user", "profile", None),
        memory.clear("session", "x", ExecutionContext(user_id="alice")),
        memory.pop_last("user", "chat", None),
    ]


def test_memory_service_and_client_are_memories(memory_server: Server) -> None:
    assert isinstance(MemoryService(open_store("memory://")), Memory)
    with memory_server.client("alice") as client:
        assert isinstance(client, Memory)


def _protocol_methods(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")}


def test_every_memory_operation_has_an_async_twin_with_the_same_signature() -> None:
    assert _protocol_methods(Memory) == _protocol_methods(AsyncMemory) == set(OPERATIONS)
    for op in OPERATIONS:
        plain, awaited = getattr(Memory, op), getattr(AsyncMemory, op)
        assert not inspect.iscoroutinefunction(plain) and inspect.iscoroutinefunction(awaited)
        assert inspect.signature(plain) == inspect.signature(awaited), op


def test_the_async_client_is_an_async_memory_with_the_clients_signatures() -> None:
    client = AsyncClient("http://127.0.0.1:1", "fm_x")
    assert isinstance(client, AsyncMemory)
    for op in OPERATIONS:
        assert inspect.iscoroutinefunction(getattr(AsyncClient, op))
        assert inspect.signature(getattr(AsyncClient, op)) == inspect.signature(getattr(Client, op))
    asyncio.run(client.close())


class _Blocking:
    """An ``AsyncMemory``'s operations run to completion one by one on one event loop."""

    def __init__(self, memory: AsyncMemory, loop: asyncio.AbstractEventLoop) -> None:
        self.memory, self.loop = memory, loop

    def __getattr__(self, op: str) -> Any:
        awaited = getattr(self.memory, op)
        return lambda *args, **kwargs: self.loop.run_until_complete(awaited(*args, **kwargs))


def test_the_same_calls_give_the_same_results_awaited(memory_server: Server) -> None:
    with memory_server.client("alice") as sync:
        session = sync.create_session()
    context = ExecutionContext(session_id=session.id, user_id="alice")
    loop = asyncio.new_event_loop()
    try:
        client = memory_server.async_client("alice")
        awaited = _script(_Blocking(client, loop), context)  # type: ignore[arg-type]
        loop.run_until_complete(client.close())
    finally:
        loop.close()
    local = _script(MemoryService(MemoryStore()), context)
    assert [_no_timestamps(r) for r in awaited] == [_no_timestamps(r) for r in local]
    assert all(type(a) is type(b) for a, b in zip(awaited, local, strict=True))


def test_the_same_calls_give_the_same_results_in_process_and_over_http(
    memory_server: Server,
) -> None:
    with memory_server.client("alice") as client:
        session = client.create_session()
        remote = _script(client, ExecutionContext(session_id=session.id, user_id="alice"))
    local_store = MemoryStore()
    local = _script(
        MemoryService(local_store), ExecutionContext(session_id=session.id, user_id="alice")
    )
    assert [_no_timestamps(r) for r in remote] == [_no_timestamps(r) for r in local]
    assert all(type(a) is type(b) for a, b in zip(remote, local, strict=True))
    assert remote[4].message["role"] == "tool" and remote[6].removed == 2
    refused = remote[-7:]
    assert all(r.refusal is not None for r in refused)
    assert [r.refusal.reason for r in refused] == [r.refusal.reason for r in local[-7:]]


def test_a_refusal_sends_nothing_and_logs_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    sent: list[httpx.Request] = []

    def never(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        raise AssertionError("a refused call must not reach the server")

    transport = httpx.MockTransport(never)
    with Client("http://x", "t", transport=transport) as client, caplog.at_level(
        logging.WARNING, logger="flowmem"
    ):
            result = client.append("session", "k", [{"role": "user", "content": "x"}], ALICE)
            assert client.read("user", "k", None, default=3) == ReadResult(value=3)
            assert client.write("user", "k", 1, ExecutionContext(user_id="null")) == WriteResult()
    assert result == BufferResult() and result.refusal is not None
    assert result.refusal.reason == "no_id"
    assert sent == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3  # one per refused call (MEM-7)
    assert "memory append of key 'k' refused" in warnings[0]
    assert "at node 'n1'" in warnings[0]
    assert "placeholder_id" in warnings[2]


def test_a_context_of_another_user_is_refused_before_anything_is_written(
    memory_server: Server,
) -> None:
    with memory_server.client("alice") as client:
        with pytest.raises(AccessDeniedError) as denied:
            client.append("user", "k", {"role": "user", "content": "x"}, ExecutionContext(user_id="bob"))
        assert denied.value.rule == USER_RULE and "'bob'" in denied.value.message
        assert client.user_id() == "alice"
    assert memory_server.store is not None
    assert memory_server.store.load(Address("user", "bob", "k")) == []
    assert memory_server.store.load(Address("user", "alice", "k")) == []
    with memory_server.client("service") as service:
        assert service.user_id() == ""
        with pytest.raises(AccessDeniedError, match="service token"):
            service.read("user", "k", ExecutionContext(user_id="alice"))


def test_session_and_shared_scopes_map_the_context_ids_to_the_query(
    memory_server: Server,
) -> None:
    with memory_server.client("alice") as alice, memory_server.client("shared") as shared:
        session = alice.create_session()
        context = ExecutionContext(session_id=session.id)
        assert alice.append("session", "notes", {"role": "user", "content": "x"}, context).count == 1
        assert alice.load_buffer("session", "notes", session_id=session.id).count == 1
        flow = ExecutionContext(workflow_id="wf", pipeline_id="p", execution_id="e")
        for scope in ("global", "workflow", "pipeline", "execution"):
            assert shared.write(scope, "k", scope, flow).success
            assert shared.read(scope, "k", flow).value == scope
        assert shared.read_record("execution", "k", execution_id="e").value == "execution"
        with pytest.raises(AccessDeniedError):
            alice.read("workflow", "k", flow)


def test_memory_service_pop_last_refuses_and_needs_a_store_that_pops() -> None:
    service = MemoryService(MemoryStore())
    service.append("user", "k", [{"role": "user", "content": "a"}], ALICE)
    popped = service.pop_last("user", "k", ALICE)
    assert popped.message is not None and popped.message["content"] == "a"
    assert (popped.success, popped.removed, popped.resolved_scope_id) == (True, 1, "alice")
    assert service.pop_last("user", "k", ALICE) == PopResult(None, True, "alice", 0)
    assert service.pop_last("user", "k", None).refusal is not None

    class NoPop:
        """A store without ``pop_last``."""

    bare = MemoryService(NoPop())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        bare.pop_last_raw("user", "alice", "k")


def _unwritten_session_script(memory: Memory) -> list[Any]:
    """Every read-like call on a session id nobody has written to yet."""
    context = ExecutionContext(session_id="s-never-written")
    return [
        memory.load("session", "chat_history", context),
        memory.load("session", "chat_history", context, last=2),
        memory.read("session", "profile", context, default=5),
        memory.delete("session", "profile", context),
        memory.clear("session", "chat_history", context),
        memory.pop_last("session", "chat_history", context),
    ]


def test_a_session_not_written_yet_reads_empty_over_http_as_in_process(
    memory_server: Server,
) -> None:
    """The adapters' first read comes before their first write: it must not be a 404."""
    local = _unwritten_session_script(MemoryService(MemoryStore()))
    with memory_server.client("alice") as client:
        remote = _unwritten_session_script(client)
        assert remote == local
        assert all(type(a) is type(b) for a, b in zip(remote, local, strict=True))
        assert remote[0] == BufferResult(resolved_scope_id="s-never-written")
        assert client.list_sessions().total == 0  # and nothing was created
        with pytest.raises(NotFoundError):  # the explicit routes still say 404
            client.load_buffer("session", "chat_history", session_id="s-never-written")
    with memory_server.client("bob") as bob:  # another user's session reads as empty too
        context = ExecutionContext(session_id="s-alice")
        with memory_server.client("alice") as alice:
            alice.append("session", "k", {"role": "user", "content": "mine"}, context)
        assert bob.load("session", "k", context).messages == []
        with pytest.raises(NotFoundError):  # and a write to it is refused, 404 as well
            bob.append("session", "k", {"role": "user", "content": "x"}, context)


def test_the_async_client_reads_a_session_not_written_yet_as_empty(
    memory_server: Server,
) -> None:
    context = ExecutionContext(session_id="s-never-written")

    async def scenario() -> list[Any]:
        async with memory_server.async_client("alice") as client:
            return [
                await client.load("session", "chat_history", context),
                await client.read("session", "profile", context, default=5),
                await client.delete("session", "profile", context),
                await client.clear("session", "chat_history", context),
                await client.pop_last("session", "chat_history", context),
            ]

    local = _unwritten_session_script(MemoryService(MemoryStore()))
    assert asyncio.run(scenario()) == [local[0], *local[2:]]
