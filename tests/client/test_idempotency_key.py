"""A caller's own ``idempotency_key=`` on every write of ``Client`` and ``AsyncClient``.

Against a scripted transport: the key is checked with the server's rule before
anything is sent, travels on every retry of its call, and a replayed answer is
marked ``replayed``. The real-server behaviour (a repeat writes nothing, another
body is ``idempotency_key_reused``) is in ``tests/client/test_serve.py``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from flowmem.client import AsyncClient, Client, RetryPolicy, calls
from flowmem.errors import ConfigurationError, IdempotencyKeyInvalidError
from flowmem.scope import ExecutionContext
from tests.client.sleeps import record_sleeps
from tests.client.test_retry import Script

POLICY = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.02)
KEY = "agent-7/step 3:batch~1"  # printable ASCII, spaces included
USER = {"role": "user", "content": "x"}
CONTEXT = ExecutionContext(session_id="s1")  # no user to look up first
# one answer every write route's reader accepts (each picks its own fields)
ANSWER = {
    "messages": [],
    "count": 1,
    "appended": 1,
    "appended_any": True,
    "resolved_scope_id": "alice",
    "success": True,
    "removed": 1,
    "message": None,
    "id": "s1",
    "name": "",
    "owner": "alice",
    "status": "idle",
    "agent": None,
    "metadata": {},
    "created_at": 1.0,
    "updated_at": 1.0,
    "turn_id": "t1",
    "stopped": False,
    "reset": True,
    "seq": 1,
    "role": "user",
    "content": "x",
    "user_id": "bob",
    "sessions": 0,
    "records": 0,
    "tokens": 0,
}
# a user's erasure counts its buffers; a session answer lists them (a list), so the
# erasure's count is answered only to the erase route
ERASURE = {**ANSWER, "buffers": 0}

# every write method of the clients, called with the key (the same on both clients)
WRITES: dict[str, Callable[[Any], Any]] = {
    "create_session": lambda c: c.create_session("n", idempotency_key=KEY),
    "delete_session": lambda c: c.delete_session("s1", idempotency_key=KEY),
    "send_turn": lambda c: c.send_turn("s1", "hi", idempotency_key=KEY),
    "stop_session": lambda c: c.stop_session("s1", idempotency_key=KEY),
    "reset_session": lambda c: c.reset_session("s1", idempotency_key=KEY),
    "edit_message": lambda c: c.edit_message("s1", 1, USER, idempotency_key=KEY),
    "delete_message": lambda c: c.delete_message("s1", 1, idempotency_key=KEY),
    "append_buffer": lambda c: c.append_buffer("user", "k", USER, idempotency_key=KEY),
    "clear_buffer": lambda c: c.clear_buffer("user", "k", idempotency_key=KEY),
    "pop_buffer": lambda c: c.pop_buffer("user", "k", idempotency_key=KEY),
    "write_record": lambda c: c.write_record("user", "k", 1, idempotency_key=KEY),
    "delete_record": lambda c: c.delete_record("user", "k", idempotency_key=KEY),
    "erase_user": lambda c: c.erase_user("bob", idempotency_key=KEY),
    "write": lambda c: c.write("session", "k", 1, CONTEXT, idempotency_key=KEY),
    "delete": lambda c: c.delete("session", "k", CONTEXT, idempotency_key=KEY),
    "append": lambda c: c.append("session", "k", USER, CONTEXT, idempotency_key=KEY),
    "clear": lambda c: c.clear("session", "k", CONTEXT, idempotency_key=KEY),
    "pop_last": lambda c: c.pop_last("session", "k", CONTEXT, idempotency_key=KEY),
}


def _ok(replayed: bool = False) -> httpx.Response:
    return httpx.Response(200, json=ANSWER, headers={"Idempotent-Replayed": "true"} if replayed else {})


def _routed(script: Script) -> httpx.MockTransport:
    """The script's answers, an erasure's 200 carrying the erasure's body."""

    def answer(request: httpx.Request) -> httpx.Response:
        response = script(request)
        if response.status_code == 200 and request.url.path.startswith("/v1/users/"):
            replayed = {k: v for k, v in response.headers.items() if k == "idempotent-replayed"}
            return httpx.Response(200, json=ERASURE, headers=replayed)
        return response

    return httpx.MockTransport(answer)


def _client(script: Script) -> Client:
    return Client("http://flowmem.test", "t", retry=POLICY, transport=_routed(script))


def _async_client(script: Script) -> AsyncClient:
    return AsyncClient("http://flowmem.test", "t", retry=POLICY, transport=_routed(script))


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without sleeping."""
    record_sleeps(monkeypatch)


def _keyed_methods(cls: type) -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if "idempotency_key" in inspect.signature(member).parameters
        and not name.startswith("_")
        and name != "call"
    }


def test_every_write_method_of_both_clients_takes_an_idempotency_key() -> None:
    assert _keyed_methods(Client) == _keyed_methods(AsyncClient) == set(WRITES)
    for name in ("normalize", "check"):  # stateless POSTs: nothing to write twice
        assert name not in WRITES


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_write_sends_the_callers_key_on_every_retry(name: str) -> None:
    script = Script(httpx.ConnectError("refused"), httpx.Response(503, json={}), _ok())
    with _client(script) as client:
        WRITES[name](client)
    keys = [r.headers["Idempotency-Key"] for r in script.requests]
    assert keys == [KEY, KEY, KEY]


@pytest.mark.parametrize("name", sorted(WRITES))
def test_an_async_write_sends_the_callers_key_on_every_retry(name: str) -> None:
    script = Script(httpx.ReadError("reset"), _ok())

    async def main() -> None:
        async with _async_client(script) as client:
            await WRITES[name](client)

    asyncio.run(main())
    assert [r.headers["Idempotency-Key"] for r in script.requests] == [KEY, KEY]


@pytest.mark.parametrize("bad", ["", "k" * 256, "clé", "tab\there", "new\nline", 42, b"bytes"])
def test_an_invalid_key_is_refused_before_any_request(bad: Any) -> None:
    script = Script(_ok())
    with _client(script) as client:
        with pytest.raises(IdempotencyKeyInvalidError) as refused:
            client.append_buffer("user", "k", USER, idempotency_key=bad)
        assert refused.value.code == "invalid_idempotency_key"
        # a Memory write on the user scope would first ask who the token is: not even that
        with pytest.raises(IdempotencyKeyInvalidError):
            client.append("user", "k", USER, ExecutionContext(user_id="alice"), idempotency_key=bad)

    async def main() -> None:
        async with _async_client(script) as client:
            with pytest.raises(IdempotencyKeyInvalidError):
                await client.write_record("user", "k", 1, idempotency_key=bad)
            with pytest.raises(IdempotencyKeyInvalidError):
                await client.clear("user", "k", ExecutionContext(user_id="alice"), idempotency_key=bad)

    asyncio.run(main())
    assert script.requests == []


def test_the_longest_key_the_server_takes_is_taken() -> None:
    script = Script(_ok())
    longest = "~" * 255
    with _client(script) as client:
        client.append_buffer("user", "k", USER, idempotency_key=longest)
    assert script.requests[0].headers["Idempotency-Key"] == longest


def test_a_key_on_a_read_is_a_configuration_error_and_sends_nothing() -> None:
    script = Script(_ok())
    with _client(script) as client, pytest.raises(ConfigurationError):
        client.call(calls.health(), idempotency_key=KEY)
    assert script.requests == []


NO_CONTENT = {"delete_session", "delete_message"}  # 204: no result to mark


@pytest.mark.parametrize("name", sorted(set(WRITES) - NO_CONTENT))
def test_an_answer_marked_idempotent_replayed_is_a_replayed_result(name: str) -> None:
    script = Script(_ok(replayed=True), _ok())
    with _client(script) as client:
        replayed = WRITES[name](client)
        fresh = WRITES[name](client)
    assert replayed.replayed is True and fresh.replayed is False
    assert replayed == fresh  # the flag is not part of the result's value
