"""Request rate limits, enforced before any route or body work (ASGI middleware).

Token buckets, all kept in this worker's memory:

- per API token: ``requests_per_second`` with bursts of ``burst``. A request
  over it is answered ``429 rate_limited`` with ``Retry-After`` before its token
  is looked up or its body read. The bucket is keyed by a hash of the bearer
  token as the header parses (the scheme's case and the spaces do not count), so
  it also applies to a token that turns out to be valid.
- per bad token and address: a request answered 401 (no, unknown or revoked
  token) takes one of that token's ``auth_failures`` allowances at that address,
  refilled at ``auth_failures_per_minute``. With none left, that token from that
  address is answered ``429 too_many_auth_failures`` before it is looked up. An
  agent retrying a revoked token is throttled on its own: nothing else from its
  address is (docs/decisions/0043).
- per address, for guessing: each *different* bad token (one whose own bucket was
  full) takes one of the address's ``auth_failures`` allowances. With none left,
  the address is *guessing*: a token this worker accepted before (``trusted``,
  kept as 16-byte hashes) goes on at once, so agents already at work behind the
  same proxy or NAT are not slowed; any other token waits before it is looked up,
  ``GUESS_DELAY_STEP`` seconds per guess past the allowance (forgotten at the
  refill rate), at most ``GUESS_DELAY_MAX``, then is looked up like any token: a
  valid one is served (a new agent behind the NAT gets in), a guess gets its 401.
  At most ``GUESS_SLOTS`` such requests of one address wait at once (and
  ``MAX_WAITING`` in the worker); one more is refused 429 before any lookup. So a
  guessing address gets at most ``GUESS_SLOTS`` answers per ``GUESS_DELAY_MAX``
  seconds, each costing one lookup, and holds at most ``GUESS_SLOTS`` connections
  waiting (issue 38 §4, docs/decisions/0105).

The open paths (``/health``…) are never limited. The buckets live in one worker
process: with ``--workers N`` a client may get up to N times the rate (each worker
counts its own requests). Behind a reverse proxy the address is the proxy's unless
``flowmem serve --forwarded-allow-ips`` names it. 0 turns a limit off.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem import metrics
from flowmem.api.errors import OPEN_PATHS, error_body
from flowmem.auth import bearer_token
from flowmem.errors import (
    AuthenticationError,
    AuthRateLimitedError,
    RateLimitedError,
)
from flowmem.limits import EnvSettings, check_non_negative

MAX_KEYS = 100_000  # buckets kept per table; the least recently used beyond it are forgotten
MAX_TRUSTED = 100_000  # tokens a worker remembers as accepted (16-byte hashes, least recent dropped)
NO_TOKEN = b""  # the key of a request without an Authorization header
GUESS_DELAY_STEP = 1.0  # seconds an unknown token from a guessing address waits, per guess past the allowance
GUESS_DELAY_MAX = 10.0  # seconds it waits at most before it is looked up
GUESS_SLOTS = 4  # unknown tokens of one guessing address waiting at once; one more is refused 429
MAX_WAITING = 1_000  # unknown tokens of guessing addresses waiting at once in a worker


ENV: dict[str, str] = {
    "requests_per_second": "FLOWMEM_RATE_LIMIT",
    "burst": "FLOWMEM_RATE_BURST",
    "auth_failures": "FLOWMEM_AUTH_FAILURES",
    "auth_failures_per_minute": "FLOWMEM_AUTH_FAILURES_PER_MINUTE",
}
"""The environment variable that sets each ``RateLimits`` field (``RateLimits.from_env``)."""


@dataclass(frozen=True)
class RateLimits(EnvSettings):
    """Request rates one worker accepts; 0 turns a limit off."""

    requests_per_second: float = 100.0
    """Sustained requests per second per API token."""
    burst: int = 200
    """Requests one token may make at once above the sustained rate."""
    auth_failures: int = 20
    """Requests answered 401 one bad token may make from one address in a row; also how
    many different bad tokens one address may try before only known tokens are served."""
    auth_failures_per_minute: float = 10.0
    """How fast those allowances refill."""

    def __post_init__(self) -> None:
        for item in fields(self):
            check_non_negative(item.name, getattr(self, item.name))

    @classmethod
    def off(cls) -> RateLimits:
        """No rate limit at all."""
        return cls(0, 0, 0, 0)

    ENV_VARIABLES: ClassVar[Mapping[str, str]] = ENV
    ENV_KIND: ClassVar[str] = "a number"

    @staticmethod
    def parse_env(raw: str) -> float | int:
        """A number: a float when it has a decimal point, else an integer."""
        return float(raw) if "." in raw else int(raw)


class Buckets:
    """Token buckets by key: ``capacity`` tokens, refilled at ``rate`` per second."""

    def __init__(self, rate: float, capacity: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.capacity = max(capacity, 1.0)
        self.clock = clock
        self._table: OrderedDict[Any, tuple[float, float]] = OrderedDict()

    def _level(self, key: Any, now: float) -> float:
        stored = self._table.get(key)
        if stored is None:
            return self.capacity
        tokens, then = stored
        return min(self.capacity, tokens + (now - then) * self.rate)

    def wait(self, key: Any) -> int:
        """Whole seconds until ``key`` has a token (0 when it has one now); takes nothing."""
        level = self._level(key, self.clock())
        if level >= 1.0:
            return 0
        return max(1, math.ceil((1.0 - level) / self.rate)) if self.rate > 0 else 3600

    def take(self, key: Any) -> int:
        """Take one token; return 0, or the whole seconds to wait when there is none (nothing taken)."""
        now = self.clock()
        level = self._level(key, now)
        if level < 1.0:
            return max(1, math.ceil((1.0 - level) / self.rate)) if self.rate > 0 else 3600
        self._table[key] = (level - 1.0, now)
        self._table.move_to_end(key)
        if len(self._table) > MAX_KEYS:
            self._table.popitem(last=False)
        return 0

    def charge(self, key: Any) -> bool:
        """Take one token even when none is left (never below zero); True when it was full."""
        now = self.clock()
        level = self._level(key, now)
        self._table[key] = (max(level - 1.0, 0.0), now)
        self._table.move_to_end(key)
        if len(self._table) > MAX_KEYS:
            self._table.popitem(last=False)
        return level >= self.capacity


class Trusted:
    """The tokens (16-byte keys) this worker accepted, the most recent ``size`` of them."""

    def __init__(self, size: int = MAX_TRUSTED) -> None:
        self.size = size
        self._keys: OrderedDict[bytes, None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def add(self, key: bytes) -> None:
        """Remember ``key`` as accepted (the oldest one is dropped past ``size``)."""
        self._keys[key] = None
        self._keys.move_to_end(key)
        if len(self._keys) > self.size:
            self._keys.popitem(last=False)

    def discard(self, key: bytes) -> None:
        """Forget ``key`` (it was refused: revoked, or its user erased)."""
        self._keys.pop(key, None)


class Guesses:
    """Guesses each address made past its allowance, forgotten at ``rate`` per second."""

    def __init__(self, rate: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.clock = clock
        self._table: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def count(self, peer: str) -> float:
        """The guesses ``peer`` made past its allowance that are not forgotten yet."""
        stored = self._table.get(peer)
        if stored is None:
            return 0.0
        guesses, then = stored
        return max(0.0, guesses - (self.clock() - then) * self.rate)

    def add(self, peer: str) -> None:
        """One more guess past the allowance from ``peer``."""
        self._table[peer] = (self.count(peer) + 1.0, self.clock())
        self._table.move_to_end(peer)
        if len(self._table) > MAX_KEYS:
            self._table.popitem(last=False)

    def delay(self, peer: str) -> float:
        """Seconds an unknown token from ``peer`` waits before it is looked up."""
        return min(GUESS_DELAY_MAX, GUESS_DELAY_STEP * max(1.0, self.count(peer)))


def _token_key(authorization: bytes | None) -> bytes:
    """A short fixed-size key for the token a header carries (the token itself is never kept).

    Keyed on the token as ``bearer_token`` parses it, not on the header's bytes: the
    scheme's letter case and the spaces around the token make no other bucket (issue 24
    §3). A header that does not parse is keyed as it is (it is refused with a 401).
    """
    if authorization is None:
        return NO_TOKEN
    try:
        token = bearer_token(authorization.decode("latin-1")).encode("latin-1")
    except AuthenticationError:
        token = authorization
    return hashlib.blake2b(token, digest_size=16).digest()


async def send_refusal(send: Send, error: RateLimitedError) -> None:
    """Answer 429 with the error envelope and ``Retry-After`` (counted by its code)."""
    metrics.rate_limited(error.code)
    payload = json.dumps(error_body(error.code, error.message)).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode("ascii")),
                (b"retry-after", str(error.retry_after).encode("ascii")),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class RateLimitMiddleware:
    """Refuse requests over a token's rate, and bad tokens past their allowance (429)."""

    def __init__(
        self,
        app: ASGIApp,
        limits: RateLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.limits = limits if limits is not None else RateLimits()
        per_token = self.limits.requests_per_second
        self.tokens = (
            Buckets(per_token, self.limits.burst or per_token, clock) if per_token > 0 else None
        )
        failures, refill = self.limits.auth_failures, self.limits.auth_failures_per_minute / 60.0
        on = failures > 0
        self.failures = Buckets(refill, failures, clock) if on else None  # (address, token)
        self.peers = Buckets(refill, failures, clock) if on else None  # address: different tokens
        self.guesses = Guesses(refill, clock)  # address: different bad tokens past its allowance
        self.trusted = Trusted()
        self.waiting: dict[str, int] = {}  # address: its unknown tokens waiting (guessing)
        self.waiting_total = 0

    def _bad_token_wait(self, peer: str, key: bytes) -> int:
        """Seconds before this bad token may be tried again from ``peer`` (0: now)."""
        if self.failures is None:
            return 0
        return self.failures.wait((peer, key))

    def _guessing(self, peer: str, key: bytes) -> bool:
        """Whether ``peer`` used its allowance of different bad tokens and ``key`` is not trusted."""
        if self.peers is None or key in self.trusted:
            return False
        return self.peers.wait(peer) > 0

    async def _wait_turn(self, peer: str) -> int:
        """Hold a guessing address's unknown token for its delay (0); seconds to retry if no slot."""
        held = self.waiting.get(peer, 0)
        if held >= GUESS_SLOTS or self.waiting_total >= MAX_WAITING:
            assert self.peers is not None
            return max(1, self.peers.wait(peer))
        self.waiting[peer] = held + 1
        self.waiting_total += 1
        try:
            await _sleep(self.guesses.delay(peer))
        finally:
            self.waiting_total -= 1
            left = self.waiting[peer] - 1
            if left:
                self.waiting[peer] = left
            else:
                del self.waiting[peer]
        return 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 429 before anything else reads it."""
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer = str(client[0]) if client else ""
        authorization = next(
            (value for name, value in scope.get("headers", ()) if name == b"authorization"),
            None,
        )
        key = _token_key(authorization)
        wait = self._bad_token_wait(peer, key)
        if wait:
            message = "too many requests with this bad token from this address; retry later"
            await send_refusal(send, AuthRateLimitedError(message, retry_after=wait))
            return
        if self._guessing(peer, key):
            wait = await self._wait_turn(peer)
            if wait:
                message = (
                    "too many different bad tokens from this address, and too many of its "
                    "unknown tokens already waiting to be checked; retry later"
                )
                await send_refusal(send, AuthRateLimitedError(message, retry_after=wait))
                return
        if self.tokens is not None and authorization is not None:
            wait = self.tokens.take(key)
            if wait:
                message = "too many requests with this token; retry later"
                await send_refusal(send, RateLimitedError(message, retry_after=wait))
                return
        if self.failures is None:
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._count(scope, peer, key, message.get("status"))
            await send(message)

        await self.app(scope, receive, counting_send)

    def _count(self, scope: Scope, peer: str, key: bytes, status: object) -> None:
        """Charge a 401 to its token at ``peer`` (and a new bad token to ``peer``); trust an accepted token."""
        if status == 401:
            self.trusted.discard(key)
            assert self.failures is not None and self.peers is not None
            if self.failures.charge((peer, key)):  # a token not failing lately: one more guess
                if self.peers.wait(peer):  # past the allowance: the next unknown token waits longer
                    self.guesses.add(peer)
                self.peers.charge(peer)
        elif scope.get("state", {}).get("principal") is not None:
            self.trusted.add(key)


async def _sleep(seconds: float) -> None:
    """Wait ``seconds`` on the loop (the tests replace it to count the waits)."""
    await asyncio.sleep(seconds)


__all__ = [
    "ENV",
    "GUESS_DELAY_MAX",
    "GUESS_DELAY_STEP",
    "GUESS_SLOTS",
    "MAX_WAITING",
    "Buckets",
    "Guesses",
    "RateLimitMiddleware",
    "RateLimits",
    "Trusted",
]
