"""Retries: connection errors, 429 with Retry-After, 503; one Idempotency-Key per logical write."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from flowmem.client import AsyncClient, Client, RetryPolicy, ServerUnreachableError
from flowmem.client import retry as retry_module
from flowmem.errors import ConfigurationError, RateLimitedError, StoreBusyError, StoreCorruptError
from tests.client.sleeps import record_sleeps

OK_APPEND = {"messages": [], "count": 1, "appended": 1, "appended_any": True, "resolved_scope_id": "a"}
POLICY = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.02)


def _error(status: int, code: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"code": code, "message": code}}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """A transport answering from a list: an exception is raised, a response returned."""

    def __init__(self, *steps: httpx.Response | Exception) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, Exception):
            raise step
        return step


def _client(script: Script, policy: RetryPolicy = POLICY) -> Client:
    return Client("http://flowmem.test", "t", retry=policy, transport=httpx.MockTransport(script))


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The client's sleeps, recorded instead of slept."""
    return record_sleeps(monkeypatch)


def test_a_write_retried_after_connection_errors_keeps_its_idempotency_key(
    waits: list[float],
) -> None:
    script = Script(
        httpx.ConnectError("refused"),
        httpx.ReadError("connection reset"),
        httpx.Response(200, json=OK_APPEND),
    )
    with _client(script) as client:
        result = client.append_buffer("user", "k", {"role": "user", "content": "x"})
    assert result.appended == 1
    keys = [r.headers["Idempotency-Key"] for r in script.requests]
    assert len(keys) == 3 and len(set(keys)) == 1 and len(keys[0]) == 32
    bodies = {r.content for r in script.requests}
    assert len(bodies) == 1 and json.loads(bodies.pop())["messages"]["content"] == "x"
    assert len(waits) == 2 and all(0 < w <= 0.02 for w in waits)


def test_every_logical_write_gets_a_fresh_key_and_reads_get_none(waits: list[float]) -> None:
    script = Script(httpx.Response(200, json=OK_APPEND))
    with _client(script) as client:
        client.append_buffer("user", "k", {"role": "user", "content": "x"})
        client.append_buffer("user", "k", {"role": "user", "content": "x"})
    script2 = Script(httpx.Response(200, json={"value": 1, "found": True, "resolved_scope_id": "a"}))
    with _client(script2) as client:
        client.read_record("user", "k")
    first, second = (r.headers["Idempotency-Key"] for r in script.requests)
    assert first != second
    assert "Idempotency-Key" not in script2.requests[0].headers


@pytest.mark.parametrize(
    ("method", "build"),
    [
        ("PUT", lambda c: c.write_record("user", "k", 1)),
        ("DELETE", lambda c: c.delete_record("user", "k")),
        ("DELETE", lambda c: c.clear_buffer("user", "k")),
        ("POST", lambda c: c.stop_session("s")),
    ],
)
def test_every_write_method_carries_a_key(
    method: str, build: Callable[[Client], Any], waits: list[float]
) -> None:
    answer = {"success": True, "resolved_scope_id": "a", "removed": 0, "stopped": False}
    script = Script(httpx.Response(200, json={**answer, "status": "idle"}))
    with _client(script) as client:
        build(client)
    assert script.requests[0].method == method
    assert script.requests[0].headers["Idempotency-Key"]


def test_429_waits_exactly_retry_after_then_succeeds(waits: list[float]) -> None:
    script = Script(
        _error(429, "rate_limited", {"Retry-After": "2"}), httpx.Response(200, json=OK_APPEND)
    )
    with _client(script) as client:
        assert client.append_buffer("user", "k", []).count == 1
    assert waits == [2.0]


def test_429_whose_retry_after_passes_the_cap_is_raised_at_once(waits: list[float]) -> None:
    script = Script(_error(429, "rate_limited", {"Retry-After": "120"}))
    with _client(script) as client, pytest.raises(RateLimitedError) as raised:
        client.list_sessions()
    assert raised.value.retry_after == 120 and waits == [] and len(script.requests) == 1


def test_503_is_retried_until_the_store_answers(waits: list[float]) -> None:
    script = Script(
        _error(503, "store_busy"),
        _error(503, "store_unavailable"),
        httpx.Response(200, json={"status": "ok", "version": "x"}),
    )
    with _client(script) as client:
        assert client.store_health().status == "ok"
    assert len(script.requests) == 3 and len(waits) == 2


def test_retries_stop_after_max_attempts_with_the_last_error(waits: list[float]) -> None:
    script = Script(_error(503, "store_busy"))
    with _client(script) as client, pytest.raises(StoreBusyError):
        client.list_sessions()
    assert len(script.requests) == POLICY.max_attempts


def test_a_corrupt_store_and_a_4xx_are_final(waits: list[float]) -> None:
    script = Script(_error(503, "store_corrupt"))
    with _client(script) as client, pytest.raises(StoreCorruptError):
        client.list_sessions()
    assert len(script.requests) == 1
    script = Script(_error(404, "not_found"))
    with _client(script) as client, pytest.raises(Exception, match="not_found"):
        client.get_session("x")
    assert len(script.requests) == 1 and waits == []


def test_an_unreachable_server_raises_server_unreachable(waits: list[float]) -> None:
    script = Script(httpx.ConnectError("refused"))
    with _client(script) as client, pytest.raises(ServerUnreachableError) as raised:
        client.health()
    assert isinstance(raised.value.__cause__, httpx.ConnectError)
    assert raised.value.code == "server_unreachable" and raised.value.details["attempts"] == 4
    assert len(waits) == 3


def test_never_means_one_attempt(waits: list[float]) -> None:
    script = Script(httpx.ConnectError("refused"))
    with _client(script, RetryPolicy.never()) as client, pytest.raises(ServerUnreachableError):
        client.health()
    assert len(script.requests) == 1 and waits == []


def test_backoff_grows_exponentially_with_jitter_up_to_the_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=4.0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 4.0)]:
        samples = [policy.backoff(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= s <= ceiling for s in samples)
        assert len(set(samples)) > 1  # jittered
    assert {"store_corrupt", "schema_too_new"} == retry_module.FINAL_503


@pytest.mark.parametrize(
    "options",
    [{"max_attempts": 0}, {"max_attempts": 1.5}, {"base_delay": -1}, {"max_retry_after": "x"}],
)
def test_a_bad_policy_is_a_configuration_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**options)


def test_bad_client_settings_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        Client("ftp://x")
    with pytest.raises(ConfigurationError):
        Client("http://x", max_connections=0)


def test_async_client_retries_with_one_key(monkeypatch: pytest.MonkeyPatch) -> None:
    slept = record_sleeps(monkeypatch)
    script = Script(
        httpx.ConnectError("refused"),
        _error(429, "rate_limited", {"Retry-After": "1"}),
        _error(503, "store_busy"),
        httpx.Response(200, json=OK_APPEND),
    )

    async def main() -> int:
        transport = httpx.MockTransport(script)
        async with AsyncClient("http://flowmem.test", "t", retry=POLICY, transport=transport) as c:
            return (await c.append_buffer("user", "k", [])).appended

    assert asyncio.run(main()) == 1
    assert len({r.headers["Idempotency-Key"] for r in script.requests}) == 1
    assert len(script.requests) == 4 and slept[1] == 1.0
