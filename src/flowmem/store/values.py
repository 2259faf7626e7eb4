"""The values the store's protocols take and give: addresses, sessions, tokens, pages, usage.

``flowmem.store.base`` re-exports each of them with the protocols; the back-ends and
the kinds of data import them from either.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, NamedTuple, TypeVar

from flowmem.core import Message
from flowmem.errors import ConfigurationError

T = TypeVar("T")

DEFAULT_LOCK_TIMEOUT = 5.0  # seconds an append waits for its turn (MEM-12)
PURGE_BATCH = 1000  # expired records one ``purge_expired`` call deletes at most (one transaction)
PAGE_ROWS = 512  # rows one ``page_bodies`` call returns at most
PAGE_CHARS = 256 * 1024  # characters of JSON text after which a page ends (one row at least)
TAIL_BATCH = 64  # rows the first batch of a read from a buffer's end holds (``read_tail``)
TAIL_BATCH_MAX = 1024  # the batches of ``read_tail`` double up to this many rows
TAIL_FIRST_MAX = 1024  # rows a first batch sized by a token budget holds at most (issue 38 §2: a batch is parsed whole)

SESSION_STATUSES: tuple[str, ...] = ("idle", "running", "completed", "failed")
SESSION_SCOPE = "session"  # the memory scope whose scope id is a session id (deleted with it)
USER_SCOPE = "user"  # the memory scope whose scope id is a user id (erased with the user)


class Address(NamedTuple):
    """Where a buffer or memory record lives: scope, resolved scope id, key."""

    scope: str
    scope_id: str
    key: str


@dataclass(frozen=True)
class SessionRecord:
    """A session (DESIGN.md §5). ``owner`` is a usable user id or None (owned by nobody)."""

    id: str  # public UUID, canonical lowercase text
    name: str
    owner: str | None
    status: str = "idle"
    agent: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True)
class TranscriptMessage:
    """One append-only row of a session's transcript, numbered per session from 1."""

    session_id: str
    seq: int
    row: Message


@dataclass(frozen=True)
class Erasure:
    """What ``Store.erase_user`` deleted: sessions, buffers, memory records and tokens."""

    sessions: int = 0
    buffers: int = 0
    records: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class SessionClaim:
    """Whose session a ``session``-scope write goes to, and whether it creates it (decision 0032).

    ``owner``: the session must be owned by this user id (None: by nobody), unless
    ``any_owner``. Without ``create``, a non-zero ``created_at`` also names the
    session's creation time: the write goes only to that very session, not to one
    deleted and made again with the same id. ``create``: a session that does not exist is created by the
    write, in its transaction (name ``""``, status ``idle``, ``created_at``), unless
    ``owner`` already owns ``limit`` sessions (0 = no limit; unowned sessions are
    not counted). A write whose claim fails stores nothing and creates nothing:
    AccessDeniedError for another owner, TooManySessionsError past the limit,
    NotFoundError for a session that is gone and not to be created.
    ``conceal``: another owner's session is NotFoundError too, for a caller that
    looked the session up and found none (a first write that lost the race to
    create it): the answer must not reveal that it exists now.
    """

    owner: str | None = None
    create: bool = False
    limit: int = 0
    created_at: float = 0.0
    any_owner: bool = False
    conceal: bool = False


@dataclass(frozen=True)
class WriteGuard:
    """What must still hold when a write commits; the store checks it inside the write.

    ``token_id``: the token the write was authenticated with still exists and is
    not revoked (an erasure deletes the user's tokens). ``session_id``: the session
    the write belongs to still exists. A write whose guard fails inside its write
    transaction stores nothing: AuthenticationError for the token (checked first),
    NotFoundError for the session (docs/decisions/0014). ``claim`` (with
    ``session_id``): the session's owner, and whether the write creates the session
    when it does not exist (``SessionClaim``, docs/decisions/0032).
    """

    token_id: str | None = None
    session_id: str | None = None
    claim: SessionClaim | None = None


def capability(store: object, name: str, what: str) -> Any:
    """A store's capability ``store.<name>`` (its checkpoints, conversations, ADK sessions); TypeError when it has none."""
    found = getattr(store, name, None)
    if found is None:
        raise TypeError(f"{type(store).__name__} does not store {what}")
    return found


class Capability(Generic[T]):
    """A kind of data a store holds as its attribute ``name``: ``Capability[Protocol](name, what)(store)``.

    The lookup of the kinds each back-end builds over itself (checkpoints,
    conversations, ADK sessions), typed as the kind's protocol; a store without
    the attribute: TypeError ``f"{type(store).__name__} does not store {what}"``.
    """

    def __init__(self, name: str, what: str) -> None:
        self.name = name
        self.what = what

    def __call__(self, store: object) -> T:
        """The store's ``name`` attribute; TypeError for a store that has none."""
        found: T = capability(store, self.name, self.what)
        return found


BACKENDS: tuple[tuple[str, str], ...] = (
    ("flowmem.store.sqlite", "SqliteStore"),
    ("flowmem.store.postgres", "PostgresStore"),
)
"""The three back-ends: each one's module and store class."""


def backend_of(store: object) -> str | None:
    """The back-end whose store ``store`` is (``"memory"``, ``"sqlite"``, ``"postgres"``); None for another.

    Imports nothing: a back-end module not imported yet cannot have made this store
    (so no driver is ever imported here).
    """
    for module, name in BACKENDS:
        found = sys.modules.get(module)
        if found is not None and isinstance(store, getattr(found, name)):
            return module.rsplit(".", 1)[1]
    return None


class PerBackend(Generic[T]):
    """A kind of data's object for each store, made once per store (kept while the store lives).

    The kind is the package ``package`` (``flowmem.store.listing``), whose protocol is
    ``protocol``: a store that is one itself (``own(store)``) serves as it is; for
    the others each back-end's class is ``<package>.<backend>:<Backend><suffix>``
    (``flowmem.store.listing.sqlite:SqliteListing``), imported on first use and made
    over the store. A store of another back-end: ConfigurationError ``f"{type(store).__name__}
    cannot {doing}: use a MemoryStore, SqliteStore or PostgresStore, or a store implementing
    <package>.<protocol>"``.
    """

    def __init__(
        self, package: str, suffix: str, protocol: str, doing: str, own: Callable[[Any], bool]
    ) -> None:
        backends = [module.rsplit(".", 1)[1] for module, _ in BACKENDS]
        self.classes = {name: f"{package}.{name}:{name.title()}{suffix}" for name in backends}
        self.refusal = (
            f"cannot {doing}: use a MemoryStore, SqliteStore or PostgresStore, or a store "
            f"implementing {package}.{protocol}"
        )
        self.own = own

    def __call__(self, store: Any) -> T:
        """The store itself when it is one, else the object of its back-end over it (the same one on every call)."""
        if self.own(store):
            return store  # type: ignore[no-any-return]
        kept = per_store(store)
        found: T | None = kept.get(self)
        if found is None:
            path = self.classes.get(backend_of(store) or "")
            if path is None:
                raise ConfigurationError(f"{type(store).__name__} {self.refusal}")
            module, name = path.split(":")
            found = kept[self] = getattr(importlib.import_module(module), name)(store)
        return found


def per_store(store: Any) -> dict[Any, Any]:
    """The objects made once for ``store`` (its kinds' objects, by maker), kept on the store itself.

    Kept there, not in a dict keyed weakly by the store: each object holds its store, so
    such a dict's entry would keep the store alive forever (a store never closed, as
    ``memory://`` stores in tests often are, would never be collected).
    """
    kept: dict[Any, Any] = vars(store).setdefault("flowmem_per_store", {})
    return kept


def idempotency_owner(user_id: str | None, token_id: str | None) -> str:
    """Whose idempotency keys a principal uses: its user's, else its token's (a service principal).

    ``user:<id>`` keys are deleted with the user (``Store.erase_user``).
    """
    return f"user:{user_id}" if user_id is not None else f"token:{token_id}"


@dataclass(frozen=True)
class StoredAnswer:
    """An idempotency key as stored: its request's fingerprint and the answer kept for its repeats.

    ``status`` and ``body`` are the caller's answer as ``Idempotency.answer`` gave it,
    kept as given: the store reads neither. ``status`` 0: claimed by a request not yet
    answered (``Store.claim_idempotency``).
    """

    fingerprint: str
    status: int
    body: str
    expires_at: float | None


@dataclass(frozen=True)
class Idempotency:
    """An idempotency key a write records in its own transaction, with the answer kept for its repeats.

    ``answer`` is the caller's, and opaque to the store: given the write's outcome
    (what the store method returns) it gives the pair the key keeps
    (``StoredAnswer.status``, a non-zero code, and ``StoredAnswer.body``, a text). The
    store calls it once, before it commits, so the key, its answer and the write
    commit together or not at all (docs/decisions/0031, 0061). A write whose key is
    already recorded (by this owner) raises IdempotencyKeyInFlightError and writes
    nothing.
    """

    owner: str
    key: str
    fingerprint: str
    expires_at: float | None  # None: kept until its owner is erased
    answer: Callable[[Any], tuple[int, str]]

    def mapped(self, convert: Callable[[Any], Any]) -> Idempotency:
        """The same key for a write whose outcome ``convert`` turns into this one's."""
        answer = self.answer
        return replace(self, answer=lambda outcome: answer(convert(outcome)))


@dataclass(frozen=True)
class TokenRecord:
    """An API token: only its hash is stored. ``user_id`` None = a service principal."""

    id: str
    token_hash: str
    user_id: str | None
    permissions: frozenset[str]
    created_at: float
    revoked: bool = False
    label: str = ""


@dataclass(frozen=True)
class BodyPage:
    """One page of a paged buffer read (``Store.page_bodies``).

    ``version``: the buffer as the page found it, (buffer id, header version); None
    when there is no buffer. ``count``: the buffer's rows at that version.
    ``bodies``: ``(cursor, compact JSON text)`` in order. ``older``: on a first page
    asked with ``last``, rows exist below its first row. ``more``: rows below
    ``before`` follow this page's last one.
    """

    version: tuple[int, int] | None
    count: int
    bodies: list[tuple[int, str]] = field(default_factory=list)
    older: bool = False
    more: bool = False


class TailRow(NamedTuple):
    """One row of a read from a buffer's end: its cursor, the row, its default token count.

    ``tokens`` is ``flowmem.core.tokens.estimate_tokens`` of the row: stored with the
    row when it was appended, counted when read for a row stored before (issue 28).
    """

    cursor: int
    row: Message
    tokens: int


@dataclass(frozen=True)
class Tail:
    """A buffer read from its end (``BufferStore.read_tail``).

    ``count`` and ``tokens``: the buffer's rows and their default counts summed;
    ``systems``: every system row, in order; ``rows``: the rows newest first, fetched a
    batch at a time as the caller iterates (stop early: ``close`` it). ``version``:
    the buffer as the read found it, as ``BodyPage.version`` (a ``page_bodies`` call
    given it reads the same snapshot, or refuses); None when there is no buffer.
    """

    count: int
    tokens: int
    systems: list[TailRow]
    rows: Iterator[TailRow]
    version: tuple[int, int] | None = None

    def close(self) -> None:
        """Stop reading rows."""
        close = getattr(self.rows, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class Usage:
    """What a store counts for one user against its ``Quotas``."""

    bytes: int = 0
    buffers: int = 0
    records: int = 0


def quota_owner(scope: str, scope_id: str, session_owner: str | None) -> str | None:
    """Whose quota data at this scope counts against: the user of a ``user`` scope, a session's owner.

    ``session_owner``: the owner of the session ``scope_id`` names (``session`` scope
    only). None: nobody's (shared scopes, unowned sessions).
    """
    if scope == USER_SCOPE:
        return scope_id
    if scope == SESSION_SCOPE:
        return session_owner
    return None
