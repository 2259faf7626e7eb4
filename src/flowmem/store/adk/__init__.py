"""ADK session storage: Google ADK's sessions, app state and user state (decision 0053).

An ADK session is a flowmem session (DESIGN.md §5) owned by its ``user_id``, keyed as
ADK keys it: by app, user and ADK session id (``adk_id``, decision 0100). Its flowmem
session id is the ADK id when that id was free (every session stored before decision
0100 has it), else a fresh one (``adk-`` and a random hex), so "chat" of ana and
"chat" of ben are two sessions, and a session created again after a delete is a new
one that no write of the deleted one reaches. Its events are rows of the session's buffer ``adk`` (written
through the buffer rules, so MEM-1, MEM-2, MEM-3 and MEM-10 apply to them); what ADK
keeps beside them lives here: the session's own state and revision
(``adk_sessions``), the state shared by every user of an app (``adk_app_states``) and
by every session of one user of an app (``adk_user_states``). Deleting the session
deletes its row; erasing the user deletes the user's states too.

``AdkSessions`` is the protocol every backend implements (``SqlAdkSessions`` over
SQLite, ``memory://`` among them, and PostgreSQL); ``adk_of(store)`` gives a store's.
States are JSON objects; rows are flowmem rows. Nothing here imports ADK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from flowmem.core import BufferEditor, Message, Repair, apply_append, is_healed, result_id
from flowmem.core.forwarding import ForwardingEditor
from flowmem.errors import ConflictError, NotFoundError, SessionStaleError
from flowmem.store.base import SESSION_SCOPE, Address, WriteGuard
from flowmem.store.values import Capability

EVENTS_KEY = "adk"
"""The key of the session buffer that holds an ADK session's events."""

APPENDED, REPLACED, DROPPED = "appended", "replaced", "dropped"


class AdkKey(NamedTuple):
    """An ADK session's key as ADK gives it: its app, its user and its ADK session id."""

    app_name: str
    user_id: str
    session_id: str
    """The ADK session id (``AdkSession.adk_id``), not the flowmem one."""


@dataclass(frozen=True)
class AdkSession:
    """One ADK session as stored: its app, owner, own state and revision."""

    id: str
    """The flowmem session id (the ADK id when it was free at creation, decision 0100)."""
    app_name: str
    user_id: str
    state: Mapping[str, Any] = field(default_factory=dict)
    revision: int = 0
    """How many events were stored in it: what a writer must have seen (StaleSessionError)."""
    last_event: str | None = None
    """The id of the event stored last (None: none yet)."""
    created_at: float = 0.0
    updated_at: float = 0.0
    adk_id: str = ""
    """The ADK session id, unique per app and user ("": the flowmem id, as before decision 0100)."""

    def __post_init__(self) -> None:
        if not self.adk_id:
            object.__setattr__(self, "adk_id", self.id)

    @property
    def key(self) -> AdkKey:
        """The session's ADK key: its app, user and ADK id."""
        return AdkKey(self.app_name, self.user_id, self.adk_id)


@dataclass(frozen=True)
class AdkScopes:
    """A session with the app state and user state it is read with."""

    session: AdkSession
    app_state: Mapping[str, Any] = field(default_factory=dict)
    user_state: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    """What a writer last read of a session: its revision, or (no revision) the events it holds."""

    revision: int | None
    events: frozenset[str] = frozenset()
    """Without a revision: the ids of the events the writer's session object holds."""
    session_id: str | None = None
    """The flowmem session the writer read (None: unknown); another one under its key is stale."""


@dataclass(frozen=True)
class EventWrite:
    """One event to store: its rows, its id and time, and its state deltas per scope."""

    rows: Sequence[Message]
    event_id: str
    timestamp: float
    session_delta: Mapping[str, Any] = field(default_factory=dict)
    app_delta: Mapping[str, Any] = field(default_factory=dict)
    user_delta: Mapping[str, Any] = field(default_factory=dict)
    max_bytes: int = 0
    """The buffer's size limit (``limits.buffer_bytes``; 0 = none): BufferFullError past it."""
    event: str | None = None
    """The event as its rows give it back, as ADK's JSON: kept beside the rows when they are
    all stored as given, so a session is read without rebuilding each event (decision 0133)."""


@dataclass(frozen=True)
class EventWritten:
    """What storing an event did: each row's fate, the calls healed first, the session after."""

    fates: tuple[str, ...]
    """Per row: ``appended``, ``replaced`` (a healed placeholder, MEM-10) or ``dropped`` (MEM-1/2)."""
    healed: tuple[str, ...]
    """The call ids answered by a healed placeholder before the event's user row (MEM-3)."""
    scopes: AdkScopes

    @property
    def stored(self) -> bool:
        """True when at least one row of the event was stored (its state deltas were applied)."""
        return any(fate != DROPPED for fate in self.fates)


class AdkSessions(Protocol):
    """ADK sessions and their app and user state in one store."""

    def create(
        self,
        session: AdkSession,
        app_delta: Mapping[str, Any],
        user_delta: Mapping[str, Any],
        guard: WriteGuard | None = None,
    ) -> AdkScopes:
        """Store a new session and apply the app and user deltas, in one transaction.

        ``guard`` claims the flowmem session ``session.id`` (created, owned by ``user_id``).
        ConflictError, nothing stored, when the app and user have an ADK session
        ``session.adk_id`` already (``exists``), or when another ADK session uses the
        flowmem id ``session.id`` (``id_taken``: the caller picks another id).
        """
        ...

    def read(self, key: AdkKey, rows: bool = True) -> tuple[AdkScopes, list[Message]] | None:
        """The session ``key`` names, with its states and its events' rows, as one moment; None when absent."""
        ...

    def read_kept(
        self, key: AdkKey, recent: int | None = None, after: float | None = None
    ) -> tuple[AdkScopes, list[str]] | Literal[False] | None:
        """The session, its states and its kept events' JSON, oldest first, as one moment.

        ``after``: only events at or after this time; ``recent``: only the last so many
        of those. None when the session is absent; False when its events are not all
        kept (a healed or replaced row, another writer's, events stored before the
        store kept them, or a backend that keeps none): read the rows (decision 0133).
        """
        ...

    def list(
        self, app_name: str, user_id: str | None
    ) -> tuple[Mapping[str, Any], list[tuple[AdkSession, Mapping[str, Any]]]]:
        """The app state and the app's sessions (of one user, or all) with their user state.

        Ordered by update time, then user id, then id (as ADK's services list them).
        """
        ...

    def append(self, key: AdkKey, seen: Seen, event: EventWrite) -> EventWritten:
        """Store one event's rows under the buffer rules, with its state deltas, in one transaction.

        NotFoundError when the app and user have no session of the key's ADK id; SessionStaleError, nothing stored, when a write the caller has not seen
        was stored since ``seen``, or the session under the key is another one than
        ``seen.session_id`` (deleted and created again). The rows go through ``apply_append`` one by one (MEM-1,
        2, 3, 10); an event none of whose rows is stored changes nothing else.
        """
        ...

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]:
        """The user state of one user of an app ({} when none)."""
        ...


class TrackingEditor(ForwardingEditor[BufferEditor]):
    """A ``BufferEditor`` that reports what the append rules did with each row.

    It forwards every question and write to the editor it wraps, and remembers the
    writes so ``apply_rows`` can tell a row appended from one that replaced a healed
    placeholder (MEM-10) or was dropped (MEM-1, MEM-2), and which calls were healed.
    """

    def __init__(self, inner: BufferEditor) -> None:
        super().__init__(inner)
        self.appended: list[Message] = []
        self.replaced = 0
        self.healed: list[str] = []

    def append_row(self, row: Message) -> None:
        """Forwarded; the row is remembered as appended."""
        super().append_row(row)
        self.appended.append(row)

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Forwarded; the healed placeholders' call ids are remembered."""
        super().insert_after(position, rows)
        self.healed.extend(str(result_id(r)) for r in rows if is_healed(r))

    def replace(self, position: int, row: Message) -> None:
        """Forwarded; counted as a replacement."""
        super().replace(position, row)
        self.replaced += 1


def apply_rows(
    editor: BufferEditor, rows: Sequence[Message], logged: list[Repair] | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Apply the buffer rules to ``rows`` one by one; return each row's fate and the calls healed.

    Implements MEM-1, MEM-2, MEM-3 and MEM-10 through ``apply_append`` itself (no
    window): this only watches what it writes. ``logged`` gets what the buffer's
    repair log keeps of each row's append (``AppendOutcome.logged``, issue 37 §2).
    """
    tracking = TrackingEditor(editor)
    fates: list[str] = []
    for row in rows:
        appended, replaced = len(tracking.appended), tracking.replaced
        outcome = apply_append(tracking, [row])
        if logged is not None:
            logged.extend(outcome.logged)
        if len(tracking.appended) > appended:
            fates.append(APPENDED)
        elif tracking.replaced > replaced:
            fates.append(REPLACED)
        else:
            fates.append(DROPPED)
    return tuple(fates), tuple(tracking.healed)


def events_address(session_id: str) -> Address:
    """The buffer an ADK session's events live in."""
    return Address(SESSION_SCOPE, session_id, EVENTS_KEY)


def merged(state: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with the top-level keys of ``delta`` set (as ADK's ``dict.update``)."""
    out = dict(state)
    out.update(delta)
    return out


def check_stale(session: AdkSession, seen: Seen) -> None:
    """Raise SessionStaleError when the stored session moved on since the writer read it.

    A writer that read another flowmem session under the same key (it was deleted and
    the key created again: decision 0100) is stale whatever its revision. With a
    revision, any other revision is stale. Without one (a session object that was not
    read from flowmem): stale when the event stored last is not among the writer's
    events. Not by time, as ADK's DatabaseSessionService compares: an event's time is
    when it was made, not stored, so another writer's event stored after the writer's
    own latest one can be older than it, and a time check let an event in between a
    call and its answer (issue 36, decision 0100).
    """
    if seen.session_id is not None and seen.session_id != session.id:
        moved = True
    elif seen.revision is not None:
        moved = seen.revision != session.revision
    else:
        moved = session.last_event is not None and session.last_event not in seen.events
    if moved:
        raise SessionStaleError(
            f"session {session.id} was written since it was read (revision {session.revision}, "
            f"not {seen.revision}); nothing was stored. Read the session again and append to it "
            "(docs/decisions/0053)",
            session_id=session.id,
            revision=session.revision,
        )


def not_found(key: AdkKey) -> NotFoundError:
    """The refusal of a write to a session that is not this app's and user's."""
    return NotFoundError(
        f"no ADK session {key.session_id!r} of app {key.app_name!r} and user {key.user_id!r}",
        session_id=key.session_id,
    )


TAKEN = "session_id_taken"
"""``ConflictError.details["reason"]`` of ``id_taken``."""


def exists(session: AdkSession) -> ConflictError:
    """The refusal of an ADK session whose app, user and ADK id are taken."""
    return ConflictError(
        f"ADK session {session.adk_id!r} of app {session.app_name!r} and user "
        f"{session.user_id!r} already exists; use another id, or read it",
        session_id=session.adk_id,
        reason="exists",
    )


def id_taken(session_id: str) -> ConflictError:
    """The refusal of a flowmem session id another ADK session uses (the caller picks another)."""
    return ConflictError(
        f"the flowmem session {session_id} holds another ADK session; create this one "
        "under a fresh flowmem id (decision 0100)",
        session_id=session_id,
        reason=TAKEN,
    )


def matches(session: AdkSession | None, key: AdkKey) -> bool:
    """True when a stored session is the key's app's and user's."""
    return session is not None and (session.app_name, session.user_id) == key[:2]


adk_of = Capability[AdkSessions]("adk", "ADK sessions")
"""The ``AdkSessions`` of a store; TypeError for a store that has none."""


__all__ = [
    "APPENDED",
    "DROPPED",
    "EVENTS_KEY",
    "REPLACED",
    "TAKEN",
    "AdkKey",
    "AdkScopes",
    "AdkSession",
    "AdkSessions",
    "EventWrite",
    "EventWritten",
    "Seen",
    "TrackingEditor",
    "adk_of",
    "apply_rows",
    "check_stale",
    "events_address",
    "exists",
    "id_taken",
    "matches",
    "merged",
    "not_found",
]
