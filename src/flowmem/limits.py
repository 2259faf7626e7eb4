"""Size and count limits on what one caller may store (``Limits``), with their defaults.

``MemoryService`` and ``SessionService`` enforce them for every consumer (the
Python API, the HTTP API, the nodes, the runtime); a refused write raises its own
typed error (``flowmem.errors``) and changes nothing. Sizes count what is stored:
the UTF-8 bytes of a value's JSON text, as the stores write it (``dump_json`` and
``check_size`` in ``flowmem.store.rows``). 0 turns a limit off.

Each limit is set by ``flowmem serve`` options or by the environment variable
named in ``ENV``, read by ``Limits.from_env``: by the server, by every CLI command
and by a ``MemoryService`` built without ``limits=`` in process, so one variable
means the same everywhere. A refusal names the setting that raises it
(``raise_hint``). The defaults fit what the providers accept in one message with an
image or a PDF (decision 0048); the HTTP body limit follows them (``body_bytes``).

The per-user quotas (``user_*``, as a ``Quotas``: ``Limits.quotas``) are enforced
by the store, which counts them across processes (decision 0044): a
``MemoryService`` gives its limits' quotas to its store when it is built, in the
server (``create_app``) as in process (decision 0112). This module is their one
home: the defaults (``Quotas``), the settings (``ENV``) and the refusal
(``quota_exceeded``); only the counting is spelled in each store backend.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

from flowmem.errors import ConfigurationError, IdempotencyKeyInvalidError, QuotaExceededError

KIB = 1024
MIB = 1024 * KIB
IDEMPOTENCY_KEY_MAX = 255  # characters of an Idempotency-Key (fixed)
VECTORS_PER_RECORD = 64  # vectors one record written over HTTP may carry (fixed; decision 0125)
VECTOR_DIMS = 4096  # dimensions of an embedding space written or searched over HTTP (fixed)
SEARCH_LIMIT = 100  # records one vector search over HTTP returns at most (fixed)
SEARCH_OFFSET = 10_000  # records a vector search over HTTP may skip (fixed: it keeps offset + limit)
MIN_BODY_BYTES = 8 * MIB  # the HTTP body limit is never below this (a batch of small messages)
BODY_ENVELOPE_BYTES = 1 * MIB  # a body's room beside its largest message: the other fields


@dataclass(frozen=True)
class Quotas:
    """What one user may keep stored, counted by the store across every process (0 = no quota).

    A user's data is what lives in its ``user`` scope and in the ``session`` scope of
    every session it owns; ``bytes`` is its buffers' rows and its records' values as
    stored JSON (UTF-8). A write that would take a user past one is refused whole
    (QuotaExceededError); one that shrinks (a delete, an evicting append) never is.
    These defaults are the quotas' only ones: ``Limits.user_*`` and a store that was
    given none (``Store.set_quotas``) take them from here.
    """

    bytes: int = 1024 * MIB
    buffers: int = 10_000
    records: int = 100_000

    def __post_init__(self) -> None:
        for name in QUOTA_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"quota {name} must be an integer >= 0, got {value!r}")

    @classmethod
    def off(cls) -> Quotas:
        """No quota at all."""
        return cls(0, 0, 0)


# a quota's name (QuotaExceededError.quota, the SQL triggers') -> the Limits field that sets it
QUOTA_FIELDS: dict[str, str] = {"bytes": "user_bytes", "buffers": "user_buffers", "records": "user_records"}
_QUOTAS = Quotas()


ENV: dict[str, str] = {
    "message_bytes": "FLOWMEM_MAX_MESSAGE_BYTES",
    "buffer_bytes": "FLOWMEM_MAX_BUFFER_BYTES",
    "record_bytes": "FLOWMEM_MAX_RECORD_BYTES",
    "session_metadata_bytes": "FLOWMEM_MAX_SESSION_METADATA_BYTES",
    "sessions_per_user": "FLOWMEM_MAX_SESSIONS_PER_USER",
    "idempotency_seconds": "FLOWMEM_IDEMPOTENCY_SECONDS",
    "user_bytes": "FLOWMEM_MAX_USER_BYTES",
    "user_buffers": "FLOWMEM_MAX_USER_BUFFERS",
    "user_records": "FLOWMEM_MAX_USER_RECORDS",
}
"""The environment variable that sets each ``Limits`` field (``Limits.from_env``)."""


class EnvSettings(ABC):
    """Frozen settings whose fields the environment sets: the variable ``ENV_VARIABLES`` names for each.

    The one reading of such settings (``Limits``, ``flowmem.api.ratelimit.RateLimits``):
    ``from_env`` in the server and the CLI, ``to_env`` for the worker processes.
    """

    ENV_VARIABLES: ClassVar[Mapping[str, str]]
    """field -> the variable that sets it"""
    ENV_KIND: ClassVar[str]
    """What a set variable must be, as a refusal says it (``parse_env`` reads it)."""

    @staticmethod
    @abstractmethod
    def parse_env(raw: str) -> Any:
        """The value of a set variable's text ``raw`` (ValueError when it is not ``ENV_KIND``)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The defaults, overridden by each ``ENV_VARIABLES`` variable that is set (``ENV_KIND``)."""
        return cls(**env_values(cls.ENV_VARIABLES, environ, cls.parse_env, cls.ENV_KIND))

    def to_env(self) -> dict[str, str]:
        """The environment variables that reproduce these settings (for worker processes)."""
        return env_of(self, self.ENV_VARIABLES)


@dataclass(frozen=True)
class Limits(EnvSettings):
    """What one write may store, and one user keep (``user_*``); every field is a maximum, 0 = unlimited."""

    message_bytes: int = 50 * MIB
    """One stored buffer row (a message with its metadata and timestamp) as JSON.

    50 MiB: the largest request a provider takes (OpenAI: 50 MB), so one message
    with a 20 MB image or a 32 MB PDF as base64 fits (decision 0048)."""
    buffer_bytes: int = 64 * MIB
    """The sum of a buffer's rows as JSON, after an append (kept in the buffer header)."""
    record_bytes: int = 1 * MIB
    """One memory record value as JSON."""
    session_metadata_bytes: int = 16 * KIB
    """One session's metadata object as JSON."""
    sessions_per_user: int = 10_000
    """Sessions one owner may have at once (sessions owned by nobody are not counted)."""
    idempotency_seconds: int = 86_400
    """How long an ``Idempotency-Key`` and its answer are kept (0: until the owner is erased)."""
    user_bytes: int = _QUOTAS.bytes
    """Per-user quota: bytes of JSON one user's buffers and records hold together (the store counts)."""
    user_buffers: int = _QUOTAS.buffers
    """Per-user quota: buffers one user has (its ``user`` scope and its sessions' scopes)."""
    user_records: int = _QUOTAS.records
    """Per-user quota: memory records one user has."""

    ENV_VARIABLES: ClassVar[Mapping[str, str]] = ENV
    ENV_KIND: ClassVar[str] = "an integer"

    @staticmethod
    def parse_env(raw: str) -> int:
        """An integer (surrounding blanks aside); a refusal of a negative one is ``__post_init__``'s."""
        return int(raw.strip())

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"limit {item.name} must be an integer >= 0, got {value!r}")

    @property
    def body_bytes(self) -> int:
        """The HTTP body limit: the largest message or record plus 1 MiB, at least 8 MiB (0: none).

        It follows ``message_bytes`` and ``record_bytes`` (no setting of its own), so
        what one of them lets a caller store in process also fits in one request.
        """
        if not self.message_bytes or not self.record_bytes:
            return 0
        return max(MIN_BODY_BYTES, max(self.message_bytes, self.record_bytes) + BODY_ENVELOPE_BYTES)

    @property
    def quotas(self) -> Quotas:
        """The per-user quotas (``user_*``), as the store enforces them (``Store.set_quotas``)."""
        return Quotas(**{quota: getattr(self, name) for quota, name in QUOTA_FIELDS.items()})

    @classmethod
    def unlimited(cls) -> Limits:
        """Every limit off (trusted, in-process use such as tests and benchmarks)."""
        return cls(**{item.name: 0 for item in fields(cls)})



def raise_hint(name: str) -> str:
    """How to raise the limit ``name`` (a ``Limits`` field), for the error that refuses past it."""
    flag = "--idempotency-seconds" if name == "idempotency_seconds" else f"--max-{name.replace('_', '-')}"
    return (
        f"raise it with ${ENV[name]} or `flowmem serve {flag} N` "
        f"(in process: Limits({name}=N)); 0 = no limit"
    )


def quota_exceeded(quota: str, user: str, limit: int) -> QuotaExceededError:
    """The refusal of a write past ``user``'s quota ``quota`` (a ``Quotas`` field) of ``limit``.

    The one spelling of the error every store backend raises; it names the setting
    that raises the quota (``raise_hint``).
    """
    what = {"bytes": "bytes stored", "buffers": "buffers", "records": "memory records"}.get(quota, quota)
    how = raise_hint(QUOTA_FIELDS[quota]) if quota in QUOTA_FIELDS else "raise the quota"
    return QuotaExceededError(
        f"this write would take user {user!r} past its quota of {limit} {what}: delete some, "
        f"or {how}; nothing was written",
        quota,
        user,
        limit,
    )


def env_values(
    variables: Mapping[str, str],
    environ: Mapping[str, str] | None,
    parse: Callable[[str], Any],
    kind: str,
) -> dict[str, Any]:
    """Parse each set variable of ``variables`` (field -> variable name): field -> value.

    ``environ`` defaults to ``os.environ``; a blank variable counts as unset; one
    ``parse`` cannot read is a ConfigurationError saying it must be ``kind``.
    """
    source = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name, variable in variables.items():
        raw = source.get(variable)
        if raw is None or raw.strip() == "":
            continue
        try:
            values[name] = parse(raw)
        except ValueError:
            raise ConfigurationError(f"${variable} must be {kind}, got {raw!r}") from None
    return values


def env_of(settings: object, variables: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``variables`` (field -> variable name) that reproduce ``settings``' fields.

    ``env_values`` reads them back: a worker process is configured as its parent.
    """
    return {variable: str(getattr(settings, name)) for name, variable in variables.items()}


def check_non_negative(name: str, value: object) -> float:
    """Return ``value`` when it is a finite number >= 0 (a bool is not one); else ConfigurationError naming ``name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigurationError(f"{name} must be a number >= 0, got {value!r}")
    return value


def check_idempotency_key(value: object) -> str:
    """Return ``value`` when it is 1 to 255 printable ASCII characters; else IdempotencyKeyInvalidError.

    The one rule for an ``Idempotency-Key``: the server checks the header with it,
    ``flowmem.client`` a caller's ``idempotency_key=`` before sending anything.
    """
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= IDEMPOTENCY_KEY_MAX
        or not all(" " <= c <= "~" for c in value)
    ):
        raise IdempotencyKeyInvalidError(
            f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters",
            field="Idempotency-Key",
        )
    return value


__all__ = [
    "BODY_ENVELOPE_BYTES",
    "ENV",
    "IDEMPOTENCY_KEY_MAX",
    "KIB",
    "MIB",
    "MIN_BODY_BYTES",
    "QUOTA_FIELDS",
    "SEARCH_LIMIT",
    "SEARCH_OFFSET",
    "VECTORS_PER_RECORD",
    "VECTOR_DIMS",
    "EnvSettings",
    "Limits",
    "Quotas",
    "check_idempotency_key",
    "check_non_negative",
    "env_values",
    "quota_exceeded",
    "raise_hint",
]
