"""``FlowmemSessionService``: a Google ADK ``BaseSessionService`` whose sessions are flowmem sessions.

- **A session is a session** (DESIGN.md §5, decisions 0053, 0100): an ADK session is a
  flowmem session owned by its ``user_id`` (MEM-8), keyed as ADK keys it, by app, user
  and id: its flowmem session id is the ADK id when that id is free, else a fresh
  one (``adk-`` and a random hex), so "chat" of ana and "chat" of ben are two
  sessions, and a session created again after a delete is a new, empty one that no
  write of the deleted one reaches (its runner's appends are stale). ``GET
  /v1/sessions`` lists it for its owner, ``DELETE /v1/sessions/{id}`` and ``flowmem
  user erase`` remove it. An id that is not a usable identity is refused as MEM-6
  and MEM-13 say: a read finds nothing, a write raises ``ScopeRefusedError``; one
  WARNING is logged.
- **Events are rows** of the session's buffer ``adk`` (``events.py``), appended under
  the buffer rules: a ``function_response`` for an answered call is dropped (MEM-1),
  and a user message after an unanswered call first gets a healed placeholder next to
  the call (MEM-3), which the session returned to ADK holds too, so the next model
  request sends it instead of dropping the call.
- **State** with ``app:`` is shared by every user of the app, ``user:`` by the user's
  sessions of the app, ``temp:`` is never stored: as ADK's own services.
- **Built for a user** (``context=ExecutionContext(user_id=…)``, decision 0109): the
  service acts only as that user. ``list_sessions`` without a ``user_id`` (ADK's
  "every user of the app", kept for a service built for no user: an operator's) lists
  that user's sessions; any call naming another user raises ``AccessDeniedError``
  (MEM-9) before anything is read or written.
- **One history.** An append whose session object has not seen the latest stored
  event raises ADK's ``StaleSessionError`` and stores nothing, checked in the
  append's transaction (across processes) by the session's revision, or, for a
  session object that did not come from this service, by its events (never by
  time); appends of one session take turns.

The store calls run in a worker thread; a session's one at a time, in the order made
(``InOrder``, decision 0156): an append whose run was cancelled while it was being
stored ends before the session's next read or write, so the next run sees it instead
of making it stale, and one cancelled before its turn is never made. An append that
fails with no caller left (refused stale by another writer) is logged at ERROR.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import uuid
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions import BaseSessionService, Session, State
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from pydantic_core import to_jsonable_python

from flowmem.core import prepare
from flowmem.errors import (
    AccessDeniedError,
    ConflictError,
    FlowmemError,
    NotFoundError,
    ScopeRefusedError,
    SessionDeletedError,
    SessionStaleError,
)
from flowmem.integrations.adk.events import (
    HEALED_PREFIX,
    call_name,
    event_rows,
    events_of,
    events_of_json,
    healed_event,
    kept_json,
)
from flowmem.integrations.adk.kept import kept_events, whole_session
from flowmem.integrations.in_order import InOrder, Queues
from flowmem.scope import ExecutionContext, Refusal, usable_identity
from flowmem.service import MemoryService, check_message_sizes, kinds, session_access
from flowmem.service.checks import check_id_text, check_name, context_user
from flowmem.store import Store, open_store
from flowmem.store.adk import (
    DROPPED,
    EVENTS_KEY,
    REPLACED,
    TAKEN,
    AdkKey,
    AdkScopes,
    AdkSession,
    EventWrite,
    EventWritten,
    Seen,
)

log = logging.getLogger("flowmem")

MARKER = "flowmem:"
"""How a session's stored revision is spelled in ``Session._storage_update_marker``:
this, the revision, ``:`` and the flowmem session id (decision 0100)."""
FRESH = "adk-"
"""The start of a flowmem session id made for an ADK session whose own id was taken."""


def store_url(url: str) -> str:
    """The flowmem store URL of a database URL: ``sqlite+aiosqlite://`` reads as ``sqlite://``.

    So the URL given to ADK's ``DatabaseSessionService`` opens the same database kind
    here; a bare path is a SQLite file.
    """
    if "://" not in url:
        return f"sqlite:///{url}"
    scheme, rest = url.split("://", 1)
    base = scheme.split("+", 1)[0]
    return f"{'postgresql' if base == 'postgres' else base}://{rest}"


def split_state(state: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The (session, app, user) parts of a state or delta, JSON-safe; ``temp:`` keys dropped.

    ``app:``/``user:`` lose their prefix. Values are made JSON as ADK's database
    service makes them (a datetime becomes its ISO text); a value that cannot be is
    stored as its text, with a WARNING.
    """
    session: dict[str, Any] = {}
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for key, value in (state or {}).items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return _json_safe(session), _json_safe(app), _json_safe(user)


def _json_safe(state: dict[str, Any]) -> dict[str, Any]:
    try:
        safe: dict[str, Any] = to_jsonable_python(state)
    except Exception:
        log.warning("ADK state holds values that are not JSON: they are stored as their text")
        safe = to_jsonable_python(state, fallback=str)
    return safe


def _merge(scopes: AdkScopes) -> dict[str, Any]:
    state = copy.deepcopy(dict(scopes.session.state))
    state.update({State.APP_PREFIX + k: v for k, v in copy.deepcopy(dict(scopes.app_state)).items()})
    state.update({State.USER_PREFIX + k: v for k, v in copy.deepcopy(dict(scopes.user_state)).items()})
    return state


def _session(scopes: AdkScopes, events: list[Event]) -> Session:
    stored = scopes.session
    session = Session(
        id=stored.adk_id,
        app_name=stored.app_name,
        user_id=stored.user_id,
        state=_merge(scopes),
        events=events,
        last_update_time=stored.updated_at,
    )
    session._storage_update_marker = _marker(stored)
    return session


def _marker(stored: AdkSession) -> str:
    """The ``_storage_update_marker`` of a session as stored: its revision and flowmem id."""
    return f"{MARKER}{stored.revision}:{stored.id}"


def _seen(session: Session) -> Seen:
    """What the session object saw: the revision and flowmem session of its marker, or its events."""
    marker = getattr(session, "_storage_update_marker", None)
    if isinstance(marker, str) and marker.startswith(MARKER):
        revision, _, sid = marker.removeprefix(MARKER).partition(":")
        return Seen(int(revision), session_id=sid or None)
    return Seen(None, frozenset(e.id for e in session.events))


def _taken(exc: FlowmemError) -> bool:
    """True when a create failed on its flowmem id, not its ADK key: another id is tried."""
    if isinstance(exc, ConflictError):
        return exc.details.get("reason") == TAKEN
    return True  # another owner's session (AccessDeniedError), or a deleted one


def _checked(app_name: object, user_id: object, session_id: object) -> None:
    """Refuse ids the HTTP API would refuse, before any store call, on reads as on writes.

    The app name, user id and session id (``check_name``): more than 255 code points,
    NUL or a lone surrogate raise ``InvalidInputError`` / ``InvalidTextError``. A
    well-formed id that is not a usable identity is left to MEM-6 and MEM-13.
    """
    check_name(app_name, "app_name", empty=True)
    check_id_text(user_id, "user_id")
    check_id_text(session_id, "session_id")


def _filtered(events: list[Event], config: GetSessionConfig | None) -> list[Event]:
    """The events ``config`` asks for, as ADK's database service selects them."""
    if config is None:
        return events
    if config.after_timestamp:
        events = [e for e in events if e.timestamp >= config.after_timestamp]
    if config.num_recent_events is not None:
        events = events[-config.num_recent_events :] if config.num_recent_events else []
    return events


class FlowmemSessionService(BaseSessionService):  # type: ignore[misc, unused-ignore]
    """ADK sessions in flowmem: sessions are flowmem sessions, events are buffer rows."""

    def __init__(self, db: MemoryService | str, *, context: ExecutionContext | None = None) -> None:
        """``db``: a database URL or a ``MemoryService``; ``context`` with a ``user_id``: act only as that user."""
        self.user = context_user(context, "FlowmemSessionService")  # its ids checked as the API's
        self._owned: Store | None = None  # the store this service opened, closed by ``close``
        if isinstance(db, MemoryService):
            self.memory = db
        elif isinstance(db, str):
            self._owned = open_store(store_url(db))
            self.memory = MemoryService(self._owned)
        else:
            raise TypeError(
                "FlowmemSessionService needs a database URL (sqlite:///adk.db, postgresql://…, "
                f"memory://) or a flowmem.service.MemoryService, got {type(db).__name__}"
            )
        self.tables = kinds.adk_sessions(self.memory)
        self._locks: weakref.WeakValueDictionary[tuple[str, str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._queues = Queues()  # per session: its store calls, one at a time in the order made
        self._copies = kept_events()  # whole sessions validated, copied on the next read (decision 0155)

    def _calls(self, app_name: str, user_id: str, session_id: str) -> InOrder:
        """The session's queue (decision 0156)."""
        return self._queues.of((app_name, user_id, session_id))

    # --- identities ----------------------------------------------------------------------
    def _ids(
        self, operation: str, app_name: str, user_id: str, session_id: str | None
    ) -> tuple[str, str] | Refusal:
        """The user id and session id as flowmem resolves them (MEM-6, MEM-13), or the refusal.

        The ids' text is checked first (``_checked``).
        """
        _checked(app_name, user_id, session_id)
        context = ExecutionContext(user_id=user_id, session_id=session_id)
        user = self.memory.resolve(f"ADK {operation}", "user", EVENTS_KEY, context)
        if isinstance(user, Refusal):
            return user
        self._own(user, operation)
        if session_id is None:
            return user, ""
        session = self.memory.resolve(f"ADK {operation}", "session", EVENTS_KEY, context)
        return session if isinstance(session, Refusal) else (user, session)

    def _own(self, user: str, operation: str) -> None:
        """AccessDeniedError (MEM-9) when a service built for a user is asked about another."""
        if self.user is not None and user != self.user:
            raise AccessDeniedError(
                f"ADK {operation} refused: the call names user {user!r}, this service is user "
                f"{self.user!r}'s (its context); nothing was read or changed",
                rule="MEM-9",
                argument="user_id",
            )

    @staticmethod
    def _refused(refusal: Refusal, operation: str) -> ScopeRefusedError:
        return ScopeRefusedError(
            f"ADK {operation} refused: {refusal.sentence} Give the session a usable user id "
            "and session id; nothing was stored",
            rule="MEM-6" if refusal.scope == "user" else "MEM-13",
            argument="user_id" if refusal.scope == "user" else "session_id",
        )

    # --- BaseSessionService ----------------------------------------------------------------
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session owned by ``user_id``; AlreadyExistsError when the app and user have its id.

        Keyed as ADK keys it (decision 0100): the flowmem session is the ADK id when it
        is free, else a fresh id: when another app's or user's ADK session, another
        owner's session, or a deleted session has it. So a create after a delete makes
        a new, empty session that no write of the deleted one reaches.
        """
        sid = session_id if session_id is not None else platform_uuid.new_uuid()
        ids = self._ids("session create", app_name, user_id, sid)
        if isinstance(ids, Refusal):
            raise self._refused(ids, "session create")
        user, sid = ids
        own, app, of_user = split_state(state)
        now = platform_time.get_time()
        for flowmem_id in (sid, f"{FRESH}{uuid.uuid4().hex}"):
            record = AdkSession(flowmem_id, app_name, user, own, 0, None, now, now, adk_id=sid)
            context = ExecutionContext(user_id=user, session_id=flowmem_id)
            guard = self.memory.session_claim(flowmem_id, context)
            try:
                calls = self._calls(app_name, user_id, sid)
                scopes = await calls.run(self.tables.create, record, app, of_user, guard)
            except (ConflictError, AccessDeniedError, SessionDeletedError) as exc:
                if flowmem_id == sid and _taken(exc):
                    continue
                raise AlreadyExistsError(f"Session with id {sid} already exists.") from exc
            return _session(scopes, [])
        raise AssertionError("unreachable: a fresh id is never taken")  # pragma: no cover

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (``config``: the most recent, or those since a time)."""
        ids = self._ids("session read", app_name, user_id, session_id)
        if isinstance(ids, Refusal):
            return None
        calls = self._calls(app_name, user_id, session_id)
        recent = None if config is None else config.num_recent_events
        after = config.after_timestamp if config is not None and config.after_timestamp else None
        if recent is None or recent >= 0:  # the events kept as JSON, filtered in SQL (decision 0133)
            kept = await calls.run(self.tables.read_kept, AdkKey(app_name, *ids), recent, after)
            if kept is None:
                return None
            if kept is not False:
                if recent is None and after is None:  # the whole session: its kept copy
                    return _session(kept[0], whole_session(self._copies, AdkKey(app_name, *ids), kept[1]))
                return _session(kept[0], events_of_json(kept[1]))
        rows = not (config is not None and config.num_recent_events == 0)
        found = await calls.run(self.tables.read, AdkKey(app_name, *ids), rows)
        if found is None:
            return None
        scopes, stored = found
        return _session(scopes, _filtered(events_of(stored), config))

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (of one user, or of all), oldest update first, without events.

        Without ``user_id``, a service built for a user lists that user's sessions (every
        user's only for a service built for none).
        """
        user = self.user
        check_name(app_name, "app_name", empty=True)
        if user_id is not None:
            ids = self._ids("session list", app_name, user_id, None)
            if isinstance(ids, Refusal):
                return ListSessionsResponse()
            user = ids[0]
        app_state, found = await asyncio.to_thread(self.tables.list, app_name, user)
        return ListSessionsResponse(
            sessions=[_session(AdkScopes(s, app_state, u), []) for s, u in found]
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session with everything stored for it; its id stays deleted (decision 0042)."""
        ids = self._ids("session delete", app_name, user_id, session_id)
        if isinstance(ids, Refusal):
            return
        calls = self._calls(app_name, user_id, session_id)
        found = await calls.run(self.tables.read, AdkKey(app_name, *ids), False)
        if found is not None:
            what = f"ADK delete_session of session {session_id!r} (app {app_name!r}, user {user_id!r})"
            await calls.write(what, session_access.delete_session, self.memory, found[0].session.id, ids[0])

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without their ``user:`` prefix."""
        ids = self._ids("user state read", app_name, user_id, None)
        if isinstance(ids, Refusal):
            return {}
        return dict(await asyncio.to_thread(self.tables.user_state, app_name, ids[0]))

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store an event under the buffer rules and add it to ``session`` as stored.

        StaleSessionError, nothing stored, when another writer stored an event since
        ``session`` was read; SessionNotFoundError when the session is gone. An event
        whose rows are all duplicates (MEM-1, MEM-2) is not stored and leaves
        ``session`` as it was.
        """
        if event.partial:
            return event
        _checked(session.app_name, session.user_id, session.id)
        if self.user is not None:
            self._own(usable_identity(session.user_id) or str(session.user_id), "event append")
        key = (session.app_name, session.user_id, session.id)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            return await self._append(session, event)

    async def _append(self, session: Session, event: Event) -> Event:
        delta = dict(event.actions.state_delta or {})
        kept = {k: v for k, v in delta.items() if not k.startswith(State.TEMP_PREFIX)}
        actions = event.actions.model_copy(update={"state_delta": kept})
        rows = prepare(event_rows(event.model_copy(update={"actions": actions}), uuid.uuid4().hex))
        check_message_sizes(rows, self.memory.limits.message_bytes)
        own, app, user = split_state(kept)
        write = EventWrite(
            rows, event.id, event.timestamp, own, app, user, self.memory.limits.buffer_bytes, kept_json(rows)
        )
        try:
            written = await self._calls(session.app_name, session.user_id, session.id).write(
                f"ADK append_event of event {event.id} (author {event.author!r}) to session "
                f"{session.id!r} (app {session.app_name!r}, user {session.user_id!r})",
                self.tables.append,
                AdkKey(session.app_name, session.user_id, session.id),
                _seen(session),
                write,
            )
        except SessionStaleError as exc:
            raise StaleSessionError(
                "The session has been modified in storage since it was loaded. "
                "Please reload the session before appending more events."
            ) from exc
        except NotFoundError as exc:
            raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        if not written.stored:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        self._heal_in_memory(session, written.healed)
        stored = event
        if DROPPED in written.fates:
            stored = events_of(r for r, fate in zip(rows, written.fates, strict=True) if fate != DROPPED)[0]
        self._place(session, stored, written, rows)
        session.last_update_time = written.scopes.session.updated_at
        session._storage_update_marker = _marker(written.scopes.session)
        return event

    def _heal_in_memory(self, session: Session, healed: tuple[str, ...]) -> None:
        """Put the healed placeholders the store wrote into ``session`` too, next to their calls (MEM-3)."""
        for call_id in healed:
            for index, candidate in enumerate(session.events):
                if not any(c.id == call_id for c in candidate.get_function_calls()):
                    continue
                name = call_name(candidate, call_id)
                end = index
                while end + 1 < len(session.events) and session.events[end + 1].get_function_responses():
                    end += 1
                session.events.insert(end + 1, healed_event(call_id, candidate, name))
                break

    def _place(self, session: Session, stored: Event, written: EventWritten, rows: list[Any]) -> None:
        """Add the stored event to ``session`` where it is stored: at the end, or where it
        replaced a healed placeholder (MEM-10)."""
        self._update_session_state(session, stored)
        replaced = {
            HEALED_PREFIX + str(row["metadata"].get("tool_call_id"))
            for row, fate in zip(rows, written.fates, strict=True)
            if fate == REPLACED
        }
        spots = [i for i, e in enumerate(session.events) if e.id in replaced]
        if not spots:
            session.events.append(stored)
            return
        session.events[spots[0]] = stored
        for index in reversed(spots[1:]):
            del session.events[index]

    # --- lifetime ----------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the store this service opened from a URL (a given MemoryService stays open)."""
        if self._owned is not None:
            await asyncio.to_thread(self._owned.close)

    async def __aenter__(self) -> FlowmemSessionService:
        """Enter the service's context; it closes on exit."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        """Close the service."""
        await self.close()


__all__ = ["FlowmemSessionService", "split_state", "store_url"]
