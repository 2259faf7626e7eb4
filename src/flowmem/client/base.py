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
from urllib.parse import urlsplit

import httpx

from flowmem import __version__
from flowmem.client.calls import IDEMPOTENCY_HEADER, REPLAYED_HEADER, Call
from flowmem.client.errors import ServerUnreachableError, error_from_response, retry_after_seconds
from flowmem.client.retry import RetryPolicy
from flowmem.errors import (
    AuthenticationError,
    ConfigurationError,
    FlowmemError,
    NotFoundError,
    NotSerializableError,
)
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
TOKEN_COMMAND = "flowmem token create --user <user id>"
NO_ROUTE = "Not Found"  # the message of a 404 whose path matched no route of the server


@dataclass(frozen=True)
class Settings:
    """A client's resolved settings."""

    base_url: str
    token: str | None
    timeout: httpx.Timeout
    retry: RetryPolicy
    limits: httpx.Limits
    headers: dict[str, str]
    url_source: str = "argument"
    """Where ``base_url`` came from: ``argument``, ``environment`` ($FLOWMEM_URL) or ``default``."""
    token_source: str | None = "argument"
    """Where the token came from: ``argument``, ``environment`` ($FLOWMEM_TOKEN), ``headers``, or None."""


def _resolve_url(base_url: str | None) -> tuple[str, str]:
    """The base URL and where it came from; ConfigurationError unless http(s)."""
    from_env = os.environ.get(URL_ENV)
    url = base_url or from_env or DEFAULT_URL
    source = "argument" if base_url else "environment" if from_env else "default"
    if not url.startswith(("http://", "https://")):
        where = f" (from ${URL_ENV})" if source == "environment" else ""
        raise ConfigurationError(f"base_url must be an http:// or https:// URL, got {url!r}{where}")
    return url, source


def _resolve_token(
    token: str | None, headers: Mapping[str, str] | None
) -> tuple[str | None, str | None]:
    """The token (argument, else ``$FLOWMEM_TOKEN``) and where it came from."""
    secret = token if token is not None else os.environ.get(TOKEN_ENV)
    source = None if not secret else "argument" if token is not None else "environment"
    if source is None and any(name.lower() == "authorization" for name in headers or {}):
        source = "headers"
    return secret, source


def _check_options(retry: RetryPolicy | None, max_connections: int) -> None:
    """ConfigurationError for a retry that is not a RetryPolicy or a bad connection count."""
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int):
        raise ConfigurationError(f"max_connections must be an integer, got {max_connections!r}")
    if max_connections < 1:
        raise ConfigurationError(f"max_connections must be >= 1, got {max_connections}")


def _timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """The request timeout; connecting waits at most 10 s unless a Timeout says otherwise."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout, connect=None if timeout is None else min(timeout, 10.0))


def settings(
    base_url: str | None,
    token: str | None,
    timeout: float | httpx.Timeout | None,
    retry: RetryPolicy | None,
    max_connections: int,
    headers: Mapping[str, str] | None,
) -> Settings:
    """Resolve the constructor's arguments (``$FLOWMEM_URL``, ``$FLOWMEM_TOKEN`` by default)."""
    url, url_source = _resolve_url(base_url)
    secret, token_source = _resolve_token(token, headers)
    _check_options(retry, max_connections)
    sent = {"User-Agent": f"flowmem-client/{__version__}", "Accept": "application/json"}
    sent.update(headers or {})
    if secret:
        sent["Authorization"] = f"Bearer {secret}"
    return Settings(
        base_url=url.rstrip("/"),
        token=secret or None,
        timeout=_timeout(timeout),
        retry=retry or RetryPolicy(),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        headers=sent,
        url_source=url_source,
        token_source=token_source,
    )


HTTP_OPTIONS = ("base_url", "headers", "timeout", "limits")
"""The settings an ``httpx.Client`` or ``httpx.AsyncClient`` is made with, by their keyword."""


def http_options(settings: Settings) -> dict[str, Any]:
    """The keywords an ``httpx.Client`` or ``httpx.AsyncClient`` is made with for ``settings``."""
    return {name: getattr(settings, name) for name in HTTP_OPTIONS}


@dataclass(frozen=True)
class Request:
    """One logical request, the same on every attempt (its idempotency key included)."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    content: bytes | None

    def built(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        """The httpx request ``http`` sends for this one (its base URL, headers and timeout applied)."""
        return http.build_request(
            self.method, self.path, params=self.params, headers=self.headers, content=self.content
        )


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


def url_said(settings: Settings) -> str:
    """The base URL and where it came from, as an error message says it."""
    if settings.url_source == "environment":
        return f"{settings.base_url} (from ${URL_ENV})"
    if settings.url_source == "default":
        return f"{settings.base_url} (the default: no base_url given, ${URL_ENV} unset)"
    return settings.base_url


def _url_of(settings: Settings, request: Request) -> str:
    """The URL ``request`` was sent to (without its query)."""
    return settings.base_url + request.path


def unreachable(
    exc: httpx.TransportError, attempts: int, settings: Settings, request: Request
) -> FlowmemError:
    """The error raised when every attempt failed without an answer: the URL tried, where it came from."""
    url = _url_of(settings, request)
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ConfigurationError(
            f"the client's URL cannot be used: {exc} ({request.method} {url}; "
            f"base URL {url_said(settings)})",
            url=url,
        )
    return ServerUnreachableError(
        f"the server did not answer {request.method} {url} after {attempts} attempt(s): "
        f"{type(exc).__name__}: {exc}. Is `flowmem serve` running at {url_said(settings)}? "
        f"Give the server's URL as base_url= or in ${URL_ENV}.",
        attempts=attempts,
        url=url,
    )


def _said_anew(error: FlowmemError, message: str) -> FlowmemError:
    """``error`` with ``message`` in place of its own (its class, code and details kept)."""
    error.message = message
    error.args = (message,)
    return error


def _without_v1(settings: Settings) -> str | None:
    """The base URL without a trailing ``/v1`` (None when it does not end so)."""
    parts = urlsplit(settings.base_url)
    if not parts.path.rstrip("/").endswith("/v1"):
        return None
    root = parts.path.rstrip("/")[: -len("/v1")]
    return parts._replace(path=root, query="", fragment="").geturl()


def explained(error: FlowmemError, settings: Settings, request: Request) -> FlowmemError:
    """The refusal to raise for ``error``: with what to do when the client's settings are the cause.

    A 401 names the token's source (``token=``, ``$FLOWMEM_TOKEN``) and how to make
    one; a 404 that matched no route of the server names the URL tried, and is a
    ``ConfigurationError`` saying to drop ``/v1`` when the base URL ends in it
    (the client adds ``/v1`` itself; decision 0103).
    """
    if isinstance(error, AuthenticationError):
        if settings.token_source is None:
            return _said_anew(
                error,
                f"{error.message}: the client sent no token. Pass token= or set ${TOKEN_ENV} "
                f"(make one on the server's machine with `{TOKEN_COMMAND}`).",
            )
        source = {"environment": f"from ${TOKEN_ENV}", "headers": "in headers="}.get(
            settings.token_source, "given as token="
        )
        return _said_anew(
            error,
            f"{error.message}: the token {source} was refused by the server at "
            f"{url_said(settings)} (revoked, or made for another database?). "
            f"Make one with `{TOKEN_COMMAND}`.",
        )
    if type(error) is NotFoundError and error.code == "not_found" and error.message == NO_ROUTE:
        url = _url_of(settings, request)
        root = _without_v1(settings)
        if root is not None:
            fix = f"set ${URL_ENV}={root}" if settings.url_source == "environment" else f"use base_url={root!r}"
            wrong = ConfigurationError(
                f"{request.method} {url} matched no route of the server: the base URL "
                f"{url_said(settings)} ends in /v1, and the client adds /v1 to every path itself. "
                f"Drop /v1: {fix}.",
                url=url,
                **error.details,
            )
            wrong.__cause__ = error
            return wrong
        return _said_anew(
            error,
            f"{error.message}: {request.method} {url} matched no route of the server "
            f"(is {url_said(settings)} the root of a flowmem server, as new as this client?)",
        )
    return error


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
    "explained",
    "http_options",
    "read_answer",
    "request_of",
    "settings",
    "unreachable",
    "url_said",
    "wait_after",
]
