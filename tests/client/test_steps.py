"""``client/steps.py``: a request, its retries and an operation of several calls, as steps without I/O."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from flowmem.client import calls
from flowmem.client.base import Request, settings
from flowmem.client.errors import ServerUnreachableError
from flowmem.client.retry import RetryPolicy
from flowmem.client.steps import Awaited, Done, Identity, Steps, Wait, advance, exchange, expand
from flowmem.errors import CompactionStaleError

SETTINGS = settings("http://flowmem.test", "t", 5.0, RetryPolicy(max_attempts=2, base_delay=0.5, max_delay=0.5), 1, None)
HEALTH = httpx.Response(200, json={"status": "ok", "version": "1"})


def _stale() -> httpx.Response:
    return httpx.Response(409, json={"error": {"code": "compaction_stale", "message": "stale"}})


def test_a_transport_error_is_a_wait_then_the_same_request_again() -> None:
    steps = exchange(calls.health(), SETTINGS)
    first = advance(steps)
    assert isinstance(first, Request) and first.path == "/health"
    wait = advance(steps, httpx.ConnectError("refused"))
    assert isinstance(wait, Wait) and wait.seconds > 0
    assert advance(steps) == first
    done = advance(steps, HEALTH)
    assert isinstance(done, Done) and done.value.status == "ok"


def test_the_last_attempt_raises_the_unreachable_error_naming_the_url() -> None:
    steps = exchange(calls.health(), SETTINGS)
    advance(steps)
    advance(steps, httpx.ConnectError("refused"))
    advance(steps)
    with pytest.raises(ServerUnreachableError, match="after 2 attempt"):
        advance(steps, httpx.ConnectError("refused"))


def test_the_user_is_asked_once() -> None:
    identity = Identity()
    steps = identity.steps(SETTINGS)
    asked = advance(steps)
    assert isinstance(asked, Request) and asked.params == {"last": "0"}
    answer = {"messages": [], "count": 0, "resolved_scope_id": "alice"}
    assert advance(steps, httpx.Response(200, json=answer)) == Done("alice")
    assert advance(identity.steps(SETTINGS)) == Done("alice")  # kept: nothing sent


def test_a_calls_error_is_raised_in_the_work_that_yielded_it_and_an_awaitable_is_handed_out() -> None:
    seen: list[Any] = []

    def work() -> Steps[str]:
        try:
            yield calls.apply_compaction("user", "k", calls.Where(), "p1", "s")
        except CompactionStaleError as stale:
            seen.append(stale.code)
        seen.append((yield Awaited("summary")))
        return "done"

    steps = expand(work(), SETTINGS, Identity())
    assert isinstance(advance(steps), Request)
    awaited = advance(steps, _stale())
    assert awaited == Awaited("summary")
    assert advance(steps, "awaited summary") == Done("done")
    assert seen == ["compaction_stale", "awaited summary"]
