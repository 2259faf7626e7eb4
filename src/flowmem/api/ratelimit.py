"""Request rate limits, enforced before any route or body work (ASGI middleware).

Two token buckets, both kept in this worker's memory:

- per API token: ``requests_per_second`` with bursts of ``burst``. A request
  over it is answered ``429 rate_limited`` with ``Retry-After`` before its token
  is looked up or its body read. The bucket is keyed by a hash of the bearer
  token as the header parses (the scheme's case and the spaces do not count), so
  it also applies to a token that turns out to be valid.
- per peer address: every request answered 401 (no, unknown or revoked token)
  takes one of ``auth_failures`` allowances, refilled at
  ``auth_failures_per_minute``. A peer with none left is answered
  ``429 too_many_auth_failures`` with ``Retry-After`` for every request but the
  open paths (``/health``…), before any token is checked: guessing tokens is
  slowed to that rate.

The buckets live in one worker process: with ``--workers N`` a client may get up
to N times the rate (each worker counts its own requests). Behind a reverse
proxy the peer is the proxy unless uvicorn trusts its forwarded headers
(``--forwarded-allow-ips``). 0 turns a limit off.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem.api.errors import OPEN_PATHS, error_body
from flowmem.auth import bearer_token
from flowmem.errors import (
    AuthenticationError,
    AuthRateLimitedError,
    ConfigurationError,
    RateLimitedError,
)
from flowmem.limits import env_values

MAX_KEYS = 100_000  # buckets kept per table; the least recently used beyond it are forgotten


@dataclass(frozen=True)
class RateLimits:
    """Request rates one worker accepts; 0 turns a limit off."""

    requests_per_second: float = 100.0
    """Sustained requests per second per API token."""
    burst: int = 200
    """Requests one token may make at once above the sustained rate."""
    auth_failures: int = 20
    """Requests answered 401 one peer address may make in a row."""
    auth_failures_per_minute: float = 10.0
    """How fast a peer's allowance of 401s refills."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigurationError(f"{item.name} must be a number >= 0, got {value!r}")

    @classmethod
    def off(cls) -> RateLimits:
        """No rate limit at all."""
        return cls(0, 0, 0, 0)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RateLimits:
        """The defaults, overridden by each ``ENV`` variable that is set."""
        changes = env_values(ENV, environ, lambda raw: float(raw) if "." in raw else int(raw), "a number")
        return replace(cls(), **changes)

    def to_env(self) -> dict[str, str]:
        """The environment variables that reproduce these limits (for worker processes)."""
        return {variable: str(getattr(self, name)) for name, variable in ENV.items()}


ENV: dict[str, str] = {
    "requests_per_second": "FLOWMEM_RATE_LIMIT",
    "burst": "FLOWMEM_RATE_BURST",
    "auth_failures": "FLOWMEM_AUTH_FAILURES",
    "auth_failures_per_minute": "FLOWMEM_AUTH_FAILURES_PER_MINUTE",
}


class Buckets:
    """Token buckets by key: ``capacity`` tokens, refilled at ``rate`` per second."""

    def __init__(self, rate: float, capacity: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.capacity = max(capacity, 1.0)
        self.clock = clock
        self._table: OrderedDict[bytes | str, tuple[float, float]] = OrderedDict()

    def _level(self, key: bytes | str, now: float) -> float:
        stored = self._table.get(key)
        if stored is None:
            return self.capacity
        tokens, then = stored
        return min(self.capacity, tokens + (now - then) * self.rate)

    def wait(self, key: bytes | str) -> int:
        """Whole seconds until ``key`` has a token (0 when it has one now); takes nothing."""
        level = self._level(key, self.clock())
        if level >= 1.0:
            return 0
        return max(1, math.ceil((1.0 - level) / self.rate)) if self.rate > 0 else 3600

    def take(self, key: bytes | str) -> int:
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

    def charge(self, key: bytes | str) -> None:
        """Take one token even when none is left (the level may not go below zero)."""
        now = self.clock()
        self._table[key] = (max(self._level(key, now) - 1.0, 0.0), now)
        self._table.move_to_end(key)
        if len(self._table) > MAX_KEYS:
            self._table.popitem(last=False)


def _token_key(authorization: bytes) -> bytes:
    """A short fixed-size key for the token a header carries (the token itself is never kept).

    Keyed on the token as ``bearer_token`` parses it, not on the header's bytes: the
    scheme's letter case and the spaces around the token make no other bucket (issue 24
    §3). A header that does not parse is keyed as it is (it is refused with a 401).
    """
    try:
        token = bearer_token(authorization.decode("latin-1")).encode("latin-1")
    except AuthenticationError:
        token = authorization
    return hashlib.blake2b(token, digest_size=16).digest()


async def send_refusal(send: Send, error: RateLimitedError) -> None:
    """Answer 429 with the error envelope and ``Retry-After``."""
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
    """Refuse requests over a token's rate or from a peer with too many bad tokens (429)."""

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
        failures = self.limits.auth_failures
        self.peers = (
            Buckets(self.limits.auth_failures_per_minute / 60.0, failures, clock)
            if failures > 0
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 429 before anything else reads it."""
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer = str(client[0]) if client else ""
        if self.peers is not None:
            wait = self.peers.wait(peer)
            if wait:
                message = "too many requests with a bad token from this address; retry later"
                await send_refusal(send, AuthRateLimitedError(message, retry_after=wait))
                return
        if self.tokens is not None:
            authorization = next(
                (value for name, value in scope.get("headers", ()) if name == b"authorization"),
                None,
            )
            if authorization is not None:
                wait = self.tokens.take(_token_key(authorization))
                if wait:
                    message = "too many requests with this token; retry later"
                    await send_refusal(send, RateLimitedError(message, retry_after=wait))
                    return
        if self.peers is None:
            await self.app(scope, receive, send)
            return
        peers = self.peers

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 401:
                peers.charge(peer)
            await send(message)

        await self.app(scope, receive, counting_send)


__all__ = ["ENV", "Buckets", "RateLimitMiddleware", "RateLimits"]
