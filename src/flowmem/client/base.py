"""What ``Client`` and ``AsyncClient`` share: settings, request building, answer reading.

Neither sends anything from here: each runs ``attempts`` with its own httpx client
(sync or async) and its own sleep, and asks this module what to send and what an
answer means.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import httpx

from flowmem import __version__
from flowmem.client.calls import IDEMPOTENCY_HEADER, REPLAYED_HEADER, Call
from flowmem.client.errors import ServerUnreachableError, error_from_response, retry_after_seconds
from flowmem.client.retry import RetryPolicy
from flowmem.errors import ConfigurationError, FlowmemError, NotSerializableError
from flowmem.limits import check_idempotency_key

COMPACT_ATTEMPTS = 3  # plans ``compact`` makes at most while concurrent compactions change the rows

T = TypeVar("T")

URL_ENV = "FLOWMEM_URL"
TOKEN_ENV = "FLOWMEM_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8765"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 20
# a read of zero rows of the token's own user buffer: its resolved scope id is the user
WHOAMI_KEY = "chat_history"


@dataclass(frozen=True)
class Settings:
    """A client's resolved settings."""

    base_url: str
    token: str | None
    timeout: httpx.Timeout
    retry: RetryPolicy
    limits: httpx.Limits
    headers: dict[str, str]


def settings(
    base_url: str | None,
    token: str | None,
    timeout: float | httpx.Timeout | None,
    retry: RetryPolicy | None,
    max_connections: int,
    headers: Mapping[str, str] | None,
) -> Settings:
    """Resolve the constructor's arguments (``$FLOWMEM_URL``, ``$FLOWMEM_TOKEN`` by default)."""
    url = base_url or os.environ.get(URL_ENV) or DEFAULT_URL
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"base_url must be an http:// or https:// URL, got {url!r}")
    secret = token if token is not None else os.environ.get(TOKEN_ENV)
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int):
        raise ConfigurationError(f"max_connections must be an integer, got {max_connections!r}")
    if max_connections < 1:
        raise ConfigurationError(f"max_connections must be >= 1, got {max_connections}")
    if isinstance(timeout, httpx.Timeout):
        bound = timeout
    else:
        bound = httpx.Timeout(timeout, connect=None if timeout is None else min(timeout, 10.0))
    sent = {"User-Agent": f"flowmem-client/{__version__}", "Accept": "application/json"}
    sent.update(headers or {})
    if secret:
        sent["Authorization"] = f"Bearer {secret}"
    return Settings(
        base_url=url.rstrip("/"),
        token=secret or None,
        timeout=bound,
        retry=retry or RetryPolicy(),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        headers=sent,
    )


@dataclass(frozen=True)
class Request:
    """One logical request, the same on every attempt (its idempotency key included)."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    content: bytes | None


def request_of(call: Call[Any], idempotency_key: str | None = None) -> Request:
    """Build what is sent for ``call``: a write gets ``idempotency_key`` or a fresh key, kept for retries.

    A caller's key is checked with the server's rule first (IdempotencyKeyInvalidError).
    """
    headers: dict[str, str] = {}
    if idempotency_key is not None:
        if not call.is_write:
            raise ConfigurationError(f"{call.method} {call.path} is not a write: it takes no key")
        headers[IDEMPOTENCY_HEADER] = check_idempotency_key(idempotency_key)
    elif call.is_write:
        headers[IDEMPOTENCY_HEADER] = uuid.uuid4().hex
    content = None
    if call.has_body:
        # ASCII JSON: a lone surrogate travels as \ud800 and the server refuses it (invalid_text)
        try:
            content = json.dumps(call.body, allow_nan=False).encode("ascii")
        except (TypeError, ValueError) as exc:
            raise NotSerializableError(f"the request body is not JSON: {exc}") from exc
        headers["Content-Type"] = "application/json"
    return Request(call.method, call.path, call.query(), headers, content)


@dataclass(frozen=True)
class Refused:
    """An attempt that ended with a refusal: the error, and what the retry policy needs."""

    error: FlowmemError
    status: int | None
    retry_after: int | None


def read_answer(call: Call[T], response: httpx.Response) -> T | Refused:
    """Return the parsed answer of a 2xx (``replayed`` set on a repeat), or the refusal a 4xx/5xx stands for."""
    if response.status_code < 400:
        data = None if response.status_code == 204 or not response.content else response.json()
        answer = call.parse(data)
        if response.headers.get(REPLAYED_HEADER) == "true" and hasattr(answer, "replayed"):
            return replace(answer, replayed=True)  # type: ignore[type-var]
        return answer
    try:
        body = response.json()
    except ValueError:
        body = None
    header = response.headers.get("Retry-After")
    error = error_from_response(response.status_code, body, header)
    return Refused(error, response.status_code, retry_after_seconds(header))


def unreachable(exc: httpx.TransportError, attempts: int) -> FlowmemError:
    """The error raised when every attempt failed without an answer."""
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ConfigurationError(f"the client's URL cannot be used: {exc}")
    return ServerUnreachableError(
        f"the server did not answer after {attempts} attempt(s): {type(exc).__name__}: {exc}",
        attempts=attempts,
    )


def wait_after(
    policy: RetryPolicy, attempt: int, outcome: Refused | httpx.TransportError
) -> float | None:
    """Seconds to wait before the next attempt, or None when ``outcome`` is final."""
    if isinstance(outcome, httpx.TransportError):
        if isinstance(outcome, httpx.UnsupportedProtocol):
            return None
        return policy.wait_for(attempt, None, None, None)
    return policy.wait_for(attempt, outcome.status, outcome.error.code, outcome.retry_after)


__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "TOKEN_ENV",
    "URL_ENV",
    "WHOAMI_KEY",
    "Refused",
    "Request",
    "Settings",
    "read_answer",
    "request_of",
    "settings",
    "unreachable",
    "wait_after",
]
