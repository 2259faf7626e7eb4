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
  a request from that address is refused the same way unless its token is one
  this worker accepted before (``trusted``, kept as 16-byte hashes): agents
  already at work behind the same proxy or NAT go on, and a guess is refused
  without being looked up, so guessing is slowed to the refill rate.

The open paths (``/health``…) are never limited. The buckets live in one worker
process: with ``--workers N`` a client may get up to N times the rate (each worker
counts its own requests). Behind a reverse proxy the address is the proxy's unless
``flowmem serve --forwarded-allow-ips`` names it. 0 turns a limit off.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowmem import metrics
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
MAX_TRUSTED = 100_000  # tokens a worker remembers as accepted (16-byte hashes, least recent dropped)
NO_TOKEN = b""  # the key of a request without an Authorization header


@dataclass(frozen=True)
class RateLimits:
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
        self.trusted = Trusted()

    def _bad_token_wait(self, peer: str, key: bytes) -> tuple[int, str]:
        """Seconds to wait before this token may be tried from ``peer`` (0: now), and why."""
        if self.failures is None or self.peers is None:
            return 0, ""
        wait = self.failures.wait((peer, key))
        if wait:
            return wait, "too many requests with this bad token from this address; retry later"
        if key not in self.trusted:
            wait = self.peers.wait(peer)
            if wait:
                return wait, (
                    "too many different bad tokens from this address: only tokens this "
                    "server accepted before are served from it for now; retry later"
                )
        return 0, ""

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
        wait, message = self._bad_token_wait(peer, key)
        if wait:
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
                self.peers.charge(peer)
        elif scope.get("state", {}).get("principal") is not None:
            self.trusted.add(key)


__all__ = ["ENV", "Buckets", "RateLimitMiddleware", "RateLimits", "Trusted"]
