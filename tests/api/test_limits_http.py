"""Limits over HTTP: stored sizes (413/409 with their codes), request rates (429), the
append's default answer (O(1)) and paged, streamed buffer reads."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from flowmem.api import create_app, ratelimit
from flowmem.api.ratelimit import Buckets, RateLimits
from flowmem.auth import create_token, revoke_token
from flowmem.errors import QuotaExceededError
from flowmem.limits import Limits
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, Store, open_store
from tests.api.helpers import Api, make_tokens
from tests.api.transport import OneHopClient

SMALL = Limits(
    message_bytes=300,
    buffer_bytes=1000,
    record_bytes=100,
    session_metadata_bytes=50,
    sessions_per_user=2,
)


@pytest.fixture(params=["memory", "sqlite"])
def small(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The app with small stored-size limits and no rate limit."""
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/api.db"
    store: Store = open_store(url)
    tokens = make_tokens(store)
    app = create_app(store, limits=SMALL, rate_limits=RateLimits.off())
    with OneHopClient(app, raise_server_exceptions=False) as client:
        yield Api(client, store, tokens)
    store.close()


def _app(store: Store, rates: RateLimits) -> TestClient:
    return OneHopClient(create_app(store, rate_limits=rates), raise_server_exceptions=False)


def _error(response: object) -> tuple[int, str]:
    status = response.status_code  # type: ignore[attr-defined]
    return status, response.json()["error"]["code"]  # type: ignore[attr-defined]


def test_stored_sizes_are_refused_with_their_own_codes_and_nothing_is_written(small: Api) -> None:
    chat = Address("user", "alice", "k")
    big = {"messages": {"role": "user", "content": "x" * 300}}
    assert _error(small.call("POST", "/v1/buffers/user/k", json=big)) == (413, "message_too_large")
    assert small.store.count(chat) == 0
    statuses = []
    for _ in range(5):
        row = {"role": "user", "content": "y" * 200}
        statuses.append(small.call("POST", "/v1/buffers/user/k", json={"messages": row}))
    codes = [r.status_code for r in statuses]
    kept = codes.count(200)
    assert kept >= 3 and codes == [200] * kept + [409] * (5 - kept)
    assert _error(statuses[-1]) == (409, "buffer_full")
    assert small.store.count(chat) == kept  # the refused appends left nothing
    record = small.call("PUT", "/v1/memory/user/r", json={"value": "z" * 100})
    assert _error(record) == (413, "record_too_large")
    assert small.call("GET", "/v1/memory/user/r").json()["found"] is False
    meta = small.call("POST", "/v1/sessions", json={"name": "n", "metadata": {"m": "w" * 50}})
    assert _error(meta) == (413, "metadata_too_large")
    assert small.store.list_sessions("alice", False, 10, 0)[1] == 0
    for _ in range(2):
        assert small.call("POST", "/v1/sessions", json={"name": "n"}).status_code == 201
    assert _error(small.call("POST", "/v1/sessions", json={"name": "n"})) == (
        409,
        "too_many_sessions",
    )


def test_mem_14_append_answers_counts_without_the_buffer_unless_asked(api: Api) -> None:
    for n in range(5):
        plain = api.call("POST", "/v1/buffers/user/k", json={"messages": {"role": "user", "content": f"m{n}"}})
    assert plain.json() == {
        "messages": [],
        "count": 5,
        "appended": 1,
        "appended_any": True,
        "resolved_scope_id": "alice",
    }
    asked = api.call(
        "POST",
        "/v1/buffers/user/k",
        json={"messages": {"role": "user", "content": "m5"}, "return_messages": True},
    ).json()
    assert [m["content"] for m in asked["messages"]] == [f"m{n}" for n in range(6)]
    assert (asked["count"], asked["appended"]) == (6, 1)


def test_a_buffer_is_read_whole_streamed_or_page_by_page(api: Api) -> None:
    rows = [{"role": "user", "content": f"m{n} ✓"} for n in range(7)]
    api.call("POST", "/v1/buffers/user/k", json={"messages": rows})
    whole = api.call("GET", "/v1/buffers/user/k")
    assert whole.status_code == 200 and whole.headers["content-type"] == "application/json"
    assert int(whole.headers["content-length"]) == len(whole.content)  # small: one piece
    body = whole.json()
    assert [m["content"] for m in body["messages"]] == [r["content"] for r in rows]
    assert (body["count"], body["next_before"], body["appended"]) == (7, None, 0)
    assert body["resolved_scope_id"] == "alice"
    assert body["messages"] == api.store.load(Address("user", "alice", "k"))
    pages: list[list[str]] = []
    cursor: int | None = None
    while True:
        query = "?last=3" + ("" if cursor is None else f"&before={cursor}")
        page = api.call("GET", f"/v1/buffers/user/k{query}").json()
        assert page["count"] == 7
        pages.append([m["content"] for m in page["messages"]])
        cursor = page["next_before"]
        if cursor is None:
            break
    assert pages == [["m4 ✓", "m5 ✓", "m6 ✓"], ["m1 ✓", "m2 ✓", "m3 ✓"], ["m0 ✓"]]
    tail = api.call("GET", "/v1/buffers/user/k?last=2").json()  # `last` keeps its meaning
    assert [m["content"] for m in tail["messages"]] == ["m5 ✓", "m6 ✓"]
    empty = api.call("GET", "/v1/buffers/user/none").json()
    assert (empty["messages"], empty["count"], empty["next_before"]) == ([], 0, None)
    refused = api.call("GET", "/v1/buffers/user/k", who="service").json()
    assert (refused["messages"], refused["count"], refused["resolved_scope_id"]) == ([], 0, "")


def test_a_token_over_its_rate_gets_429_with_retry_after(tmp_path: Path) -> None:
    store = open_store("memory://")
    tokens = make_tokens(store)
    rates = RateLimits(requests_per_second=0.01, burst=5, auth_failures=0)
    with _app(store, rates) as client:
        alice = {"Authorization": f"Bearer {tokens['alice']}"}
        codes = [client.get("/v1/memory/user/k", headers=alice).status_code for _ in range(8)]
        assert codes == [200] * 5 + [429] * 3
        refused = client.get("/v1/memory/user/k", headers=alice)
        assert _error(refused) == (429, "rate_limited")
        assert int(refused.headers["retry-after"]) >= 1
        bob = {"Authorization": f"Bearer {tokens['bob']}"}
        assert client.get("/v1/memory/user/k", headers=bob).status_code == 200  # its own bucket
        assert client.get("/health").status_code == 200  # open paths are never limited


def test_a_tokens_bucket_is_the_same_however_the_header_is_spelled() -> None:
    """Issue 24 §3: the scheme's case and the spaces around the token made new buckets."""
    store = open_store("memory://")
    tokens = make_tokens(store)
    rates = RateLimits(requests_per_second=0.01, burst=5, auth_failures=0)
    token = tokens["alice"]
    spellings = [f"Bearer {token}", f"bearer {token}", f"BEARER  {token}", f"Bearer {token}   ", f" Bearer   {token}"]
    with _app(store, rates) as client:
        codes = [
            client.get("/v1/memory/user/k", headers={"Authorization": spellings[i % len(spellings)]}).status_code
            for i in range(10)
        ]
    assert codes == [200] * 5 + [429] * 5


def test_the_default_rate_refuses_a_flood_from_one_token() -> None:
    store = open_store("memory://")
    tokens = make_tokens(store)
    with _app(store, RateLimits()) as client:
        alice = {"Authorization": f"Bearer {tokens['alice']}"}
        codes = []
        for _ in range(3000):  # far more than the default 200 at once and 100 per second
            codes.append(client.get("/v1/none", headers=alice).status_code)
            if codes[-1] == 429:
                break
    assert codes[-1] == 429 and codes[0] == 404 and len(codes) > 200


def test_repeated_bad_tokens_from_one_peer_get_429(tmp_path: Path) -> None:
    store = open_store("memory://")
    make_tokens(store)
    rates = RateLimits(requests_per_second=0, auth_failures=3, auth_failures_per_minute=1)
    with _app(store, rates) as client:
        bad = {"Authorization": "Bearer not-a-token"}
        codes = [client.get("/v1/memory/user/k", headers=bad).status_code for _ in range(5)]
        assert codes == [401, 401, 401, 429, 429]
        refused = client.get("/v1/memory/user/k", headers=bad)
        assert _error(refused) == (429, "too_many_auth_failures")
        assert int(refused.headers["retry-after"]) >= 1
        assert client.get("/health").status_code == 200


def test_a_revoked_token_retried_from_one_address_locks_out_no_other_token() -> None:
    """Issue 24 §3: one agent behind a proxy retrying its revoked token took every agent there down."""
    store = open_store("memory://")
    tokens = make_tokens(store)
    rates = RateLimits(requests_per_second=0, auth_failures=3, auth_failures_per_minute=1)
    with _app(store, rates) as client:
        revoked = {"Authorization": f"Bearer {tokens['revoked']}"}
        codes = [client.get("/v1/memory/user/k", headers=revoked).status_code for _ in range(6)]
        assert codes == [401, 401, 401, 429, 429, 429]  # that token, from that address, waits
        for who in ("alice", "bob"):  # never seen before, same address: served
            good = {"Authorization": f"Bearer {tokens[who]}"}
            assert client.get("/v1/memory/user/k", headers=good).status_code == 200
        assert client.get("/v1/memory/user/k").status_code == 401  # no token: its own allowance


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds each unknown token of a guessing address was held (not slept: recorded)."""
    held: list[float] = []

    async def record(seconds: float) -> None:
        held.append(seconds)

    monkeypatch.setattr(ratelimit, "_sleep", record)
    return held


def test_guesses_from_one_address_wait_longer_each_and_a_new_valid_token_is_served(
    waits: list[float],
) -> None:
    """Issue 38 §4: under an address's guessing lock a valid token never seen before got 429."""
    store = open_store("memory://")
    tokens = make_tokens(store)
    looked_up: list[str] = []
    lookup = store.token_by_hash

    def counted(token_hash: str) -> Any:
        looked_up.append(token_hash)
        return lookup(token_hash)

    store.token_by_hash = counted  # type: ignore[method-assign]
    rates = RateLimits(requests_per_second=0, auth_failures=3, auth_failures_per_minute=1)
    with _app(store, rates) as client:
        alice = {"Authorization": f"Bearer {tokens['alice']}"}
        assert client.get("/v1/memory/user/k", headers=alice).status_code == 200
        guesses = [{"Authorization": f"Bearer fm_guess{n}"} for n in range(6)]
        codes = [client.get("/v1/memory/user/k", headers=g).status_code for g in guesses]
        assert codes == [401] * 6  # every guess is looked up and told so …
        assert len(looked_up) == 1 + 6
        assert len(waits) == 3  # … those past the allowance after a wait growing with the guesses
        assert waits == sorted(waits) and waits[-1] > waits[0] >= ratelimit.GUESS_DELAY_STEP
        # a token this worker accepted before goes on at once
        assert client.get("/v1/memory/user/k", headers=alice).status_code == 200
        assert len(waits) == 3
        # a valid token it never accepted waits like a guess, and is then served
        bob = {"Authorization": f"Bearer {tokens['bob']}"}
        assert client.get("/v1/memory/user/k", headers=bob).status_code == 200
        assert len(waits) == 4 and waits[-1] <= ratelimit.GUESS_DELAY_MAX
        assert client.get("/v1/memory/user/k", headers=bob).status_code == 200
        assert len(waits) == 4  # now trusted


def test_a_guess_delay_never_passes_its_bound() -> None:
    now = [0.0]
    guesses = ratelimit.Guesses(rate=1.0, clock=lambda: now[0])
    assert guesses.delay("a") == ratelimit.GUESS_DELAY_STEP
    for _ in range(100):
        guesses.add("a")
    assert guesses.delay("a") == ratelimit.GUESS_DELAY_MAX
    now[0] += 1_000  # forgotten at the refill rate
    assert guesses.count("a") == 0.0


def test_a_guessing_address_holds_at_most_its_slots_and_one_more_is_refused_unlooked_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The waits hold connections: a parallel guesser gets GUESS_SLOTS of them, no more, no lookup."""
    release = asyncio.Event()
    inner_calls: list[bytes] = []

    async def held(seconds: float) -> None:
        await release.wait()

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        inner_calls.append(dict(scope["headers"])[b"authorization"])  # the gate's lookup
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    monkeypatch.setattr(ratelimit, "_sleep", held)
    middleware = ratelimit.RateLimitMiddleware(
        inner, RateLimits(requests_per_second=0, auth_failures=1, auth_failures_per_minute=1)
    )

    async def call(n: int) -> int:
        statuses: list[int] = []
        scope = {
            "type": "http", "method": "GET", "path": "/v1/sessions", "client": ("192.0.2.1", 1),
            "headers": [(b"authorization", f"Bearer fm_guess{n}".encode())],
        }

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await middleware(scope, None, send)  # type: ignore[arg-type]
        return statuses[0]

    async def run() -> list[int]:
        assert await call(0) == 401  # the allowance: the address is guessing now
        waiting = [asyncio.create_task(call(n)) for n in range(1, 1 + ratelimit.GUESS_SLOTS)]
        await asyncio.sleep(0.01)
        refused = await call(99)
        release.set()
        return [refused, *await asyncio.gather(*waiting)]

    codes = asyncio.run(run())
    assert codes == [429] + [401] * ratelimit.GUESS_SLOTS
    assert b"Bearer fm_guess99" not in inner_calls  # refused before any lookup
    assert middleware.waiting == {} and middleware.waiting_total == 0


def test_a_trusted_token_that_is_revoked_is_refused_and_no_longer_trusted() -> None:
    store = open_store("memory://")
    rates = RateLimits(requests_per_second=0, auth_failures=1, auth_failures_per_minute=1)
    token, record = create_token(store, "alice")  # /v1/sessions: no token cache (decision 0034)
    with _app(store, rates) as client:
        mine = {"Authorization": f"Bearer {token}"}
        assert client.get("/v1/sessions", headers=mine).status_code == 200
        client.get("/v1/sessions", headers={"Authorization": "Bearer fm_guess"})  # locks
        assert client.get("/v1/sessions", headers=mine).status_code == 200  # trusted
        revoke_token(store, record.id)
        assert client.get("/v1/sessions", headers=mine).status_code == 401
        assert client.get("/v1/sessions", headers=mine).status_code == 429


def test_buckets_refill_with_time() -> None:
    now = [0.0]
    buckets = Buckets(rate=2.0, capacity=2, clock=lambda: now[0])
    assert [buckets.take("k") for _ in range(3)] == [0, 0, 1]
    now[0] += 0.5
    assert buckets.take("k") == 0 and buckets.take("k") == 1
    assert buckets.take("other") == 0
    buckets.charge("k")  # never below zero
    now[0] += 0.5
    assert buckets.wait("k") == 0


def test_rate_limits_come_from_the_environment() -> None:
    from flowmem.api.ratelimit import ENV

    rates = RateLimits.from_env({ENV["requests_per_second"]: "2.5", ENV["auth_failures"]: "7"})
    assert (rates.requests_per_second, rates.burst, rates.auth_failures) == (2.5, 200, 7)
    assert RateLimits.from_env(rates.to_env()) == rates


def test_streamed_read_of_a_large_buffer_matches_the_stored_rows(api: Api) -> None:
    rows = [{"role": "user", "content": f"row {n} " + "é" * 50} for n in range(1200)]
    for start in range(0, 1200, 600):
        api.call("POST", "/v1/buffers/user/big", json={"messages": rows[start : start + 600]})
    streamed = api.call("GET", "/v1/buffers/user/big")
    assert "content-length" not in streamed.headers  # written a chunk at a time
    body = json.loads(streamed.content)
    assert body["count"] == 1200
    assert [m["content"] for m in body["messages"]] == [r["content"] for r in rows]


# --- what providers accept fits over HTTP too; one setting read everywhere (decision 0048) --


def _screenshot_body(raw_bytes: int) -> dict[str, object]:
    """An append body: a Responses user message with a screenshot data URL."""
    data = base64.b64encode(os.urandom(raw_bytes)).decode("ascii")
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{data}"}
    return {"format": "responses", "messages": [{"role": "user", "content": [image]}]}


def test_a_screenshot_of_1_6_mb_is_appended_with_the_default_limits(api: Api) -> None:
    answer = api.call("POST", "/v1/buffers/user/shots", json=_screenshot_body(1_200_000))
    assert answer.status_code == 200, answer.text
    assert answer.json()["appended"] == 1


def test_a_message_over_the_8_mib_the_body_once_allowed_fits_under_a_raised_limit() -> None:
    store = open_store("memory://")
    tokens = make_tokens(store)
    limits = Limits(message_bytes=12 * 1024 * 1024)
    app = create_app(store, limits=limits, rate_limits=RateLimits.off())
    with OneHopClient(app, raise_server_exceptions=False) as client:
        api = Api(client, store, tokens)
        fits = api.call("POST", "/v1/buffers/user/big", json=_screenshot_body(7_000_000))  # 9.3 MB
        assert fits.status_code == 200, fits.text[:300]
        over = api.call("POST", "/v1/buffers/user/big", json=_screenshot_body(11_000_000))
        assert over.status_code == 413
        error = over.json()["error"]
        assert error["code"] == "payload_too_large" and f"{limits.body_bytes} bytes" in error["message"]
        assert "$FLOWMEM_MAX_MESSAGE_BYTES" in error["message"]


def test_the_app_reads_flowmem_max_message_bytes_when_given_no_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWMEM_MAX_MESSAGE_BYTES", "500")
    store = open_store("memory://")
    tokens = make_tokens(store)
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        api = Api(client, store, tokens)
        answer = api.call("POST", "/v1/buffers/user/k", json={"messages": {"role": "user", "content": "x" * 600}})
    assert _error(answer) == (413, "message_too_large")
    assert "raise it with $FLOWMEM_MAX_MESSAGE_BYTES" in answer.json()["error"]["message"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_server_and_an_in_process_service_refuse_past_flowmem_max_user_bytes_alike(
    backend: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLOWMEM_MAX_USER_BYTES", "1000")
    small = {"role": "user", "content": "x" * 300}
    large = {"role": "user", "content": "y" * 800}

    def url(name: str) -> str:
        return "memory://" if backend == "memory" else f"sqlite:///{tmp_path / name}"

    local = open_store(url("local.db"))
    service = MemoryService(local)  # built in process, without limits=
    service.append("user", "chat", small, ExecutionContext(user_id="alice"))
    with pytest.raises(QuotaExceededError) as refused:
        service.append("user", "chat", large, ExecutionContext(user_id="alice"))
    local.close()
    served = open_store(url("served.db"))
    tokens = make_tokens(served)
    app = create_app(served, rate_limits=RateLimits.off())  # without limits= too
    with OneHopClient(app, raise_server_exceptions=False) as client:
        api = Api(client, served, tokens)
        assert api.call("POST", "/v1/buffers/user/chat", json={"messages": small}).status_code == 200
        answer = api.call("POST", "/v1/buffers/user/chat", json={"messages": large})
        assert api.call("GET", "/v1/buffers/user/chat").json()["count"] == 1
    served.close()
    assert _error(answer) == (409, refused.value.code) == (409, "quota_exceeded")
    assert answer.json()["error"]["message"] == refused.value.message
    assert "$FLOWMEM_MAX_USER_BYTES" in refused.value.message
