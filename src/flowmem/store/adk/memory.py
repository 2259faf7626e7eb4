"""``MemoryAdkSessions``: the ``AdkSessions`` protocol in a ``MemoryStore``'s dicts.

The reference the SQL tables are tested against. Everything happens under the
store's lock (and the events buffer's address lock, as every append takes it:
MEM-12); the events go into the store's own buffers, so the session's buffer routes
see them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from flowmem.core import Message, Repair
from flowmem.store.adk import (
    AdkScopes,
    AdkSession,
    EventWrite,
    EventWritten,
    Seen,
    apply_rows,
    check_stale,
    events_address,
    exists,
    id_taken,
    matches,
    merged,
    not_found,
)
from flowmem.store.base import WriteGuard
from flowmem.store.editor import SizedListEditor
from flowmem.store.engine import MemoryEngine
from flowmem.store.rows import check_buffer_bytes, check_texts, dump_json


def _json(value: Any, what: str) -> Any:
    """A copy of a value as its stored JSON keeps it (NotSerializableError otherwise)."""
    return json.loads(dump_json(value, what))


class MemoryAdkSessions:
    """ADK sessions and states in dicts of one ``MemoryStore``, events in its session buffers."""

    def __init__(self, store: MemoryEngine) -> None:
        self.store = store
        self._sessions: dict[str, AdkSession] = {}
        self._keys: dict[tuple[str, str, str], str] = {}
        """(app, user, ADK id) -> flowmem session id (decision 0100)."""
        self._apps: dict[str, dict[str, Any]] = {}
        self._users: dict[tuple[str, str], dict[str, Any]] = {}

    def create(
        self,
        session: AdkSession,
        app_delta: Mapping[str, Any],
        user_delta: Mapping[str, Any],
        guard: WriteGuard | None = None,
    ) -> AdkScopes:
        """Store a new session with its first states (see ``AdkSessions.create``)."""
        check_texts(id=session.id, app_name=session.app_name, user_id=session.user_id)
        session = replace(session, state=_json(dict(session.state), "session state"))
        app_delta, user_delta = _json(dict(app_delta), "app state"), _json(dict(user_delta), "user state")
        key = (session.app_name, session.user_id, session.adk_id)
        with self.store.locked() as tables:
            if key in self._keys:
                raise exists(session)
            if session.id in self._sessions:
                raise id_taken(session.id)
            created = self.store.check_guard(tables, guard)
            self.store.store_session(tables, created)
            self._sessions[session.id] = session
            self._keys[key] = session.id
            return self._scopes(session, app_delta, user_delta)

    def _scopes(
        self, session: AdkSession, app_delta: Mapping[str, Any], user_delta: Mapping[str, Any]
    ) -> AdkScopes:
        """Apply the deltas (the lock held) and return the session with copies of its states."""
        key = (session.app_name, session.user_id)
        if app_delta:
            self._apps[session.app_name] = merged(self._apps.get(session.app_name, {}), app_delta)
        if user_delta:
            self._users[key] = merged(self._users.get(key, {}), user_delta)
        return AdkScopes(
            copy.deepcopy(session),
            copy.deepcopy(self._apps.get(session.app_name, {})),
            copy.deepcopy(self._users.get(key, {})),
        )

    def append(
        self, app_name: str, user_id: str, session_id: str, seen: Seen, event: EventWrite
    ) -> EventWritten:
        """Store one event's rows under the buffer rules, with its deltas (see ``AdkSessions``)."""
        with self.store.locked():
            sid = self._keys.get((app_name, user_id, session_id))
        if sid is None:
            raise not_found(app_name, user_id, session_id)
        address = events_address(sid)
        rows = [_json(row, "message") for row in event.rows]
        deltas = [
            _json(dict(delta), what)
            for delta, what in (
                (event.session_delta, "session state"),
                (event.app_delta, "app state"),
                (event.user_delta, "user state"),
            )
        ]

        with self.store.locked_at(address) as tables:
            now = self._keys.get((app_name, user_id, session_id))
            stored = None if now is None else self._sessions.get(now)
            if stored is None or not matches(stored, app_name, user_id):
                raise not_found(app_name, user_id, session_id)
            check_stale(stored, seen)
            if now != sid:  # deleted and created again since the lookup: not the writer's
                check_stale(stored, replace(seen, session_id=sid))
            size = tables.sizes.get(address, 0)
            editor = SizedListEditor(copy.deepcopy(tables.buffers.get(address, [])), size)
            logged: list[Repair] = []
            fates, healed = apply_rows(editor, rows, logged)
            check_buffer_bytes(address, size, editor.bytes, event.max_bytes)
            written = EventWritten(fates, healed, AdkScopes(copy.deepcopy(stored)))
            if not written.stored:
                return written
            # the repair log's entries (issue 37 §2), checked against the quota with the rows
            log = self.store.stage_repairs(tables, address, logged, editor.bytes - size)
            # counted against the owner's quotas (the quota may refuse it: nothing written)
            self.store.set_buffer(tables, address, editor.rows, editor.bytes)
            log()
            after = replace(
                stored,
                state=merged(stored.state, deltas[0]),
                revision=stored.revision + 1,
                last_event=event.event_id,
                updated_at=event.timestamp,
            )
            self._sessions[sid] = after
            return EventWritten(fates, healed, self._scopes(after, deltas[1], deltas[2]))

    def read(
        self, app_name: str, user_id: str, session_id: str, rows: bool = True
    ) -> tuple[AdkScopes, list[Message]] | None:
        """The session, its states and its events' rows as one moment; None when absent."""
        with self.store.locked() as tables:
            sid = self._keys.get((app_name, user_id, session_id))
            session = None if sid is None else self._sessions.get(sid)
            if session is None or not matches(session, app_name, user_id):
                return None
            found = tables.buffers.get(events_address(session.id), []) if rows else []
            return self._scopes(session, {}, {}), copy.deepcopy(found)

    def read_kept(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        recent: int | None = None,
        after: float | None = None,
    ) -> tuple[AdkScopes, list[str]] | Literal[False] | None:
        """False: ``memory://`` keeps no events beside the rows, it reads them (decision 0133)."""
        return False

    def list(
        self, app_name: str, user_id: str | None
    ) -> tuple[dict[str, Any], list[tuple[AdkSession, Mapping[str, Any]]]]:
        """The app state and the app's sessions with their user state (see ``AdkSessions``)."""
        with self.store.locked():
            found = [
                s
                for s in self._sessions.values()
                if s.app_name == app_name and (user_id is None or s.user_id == user_id)
            ]
            found.sort(key=lambda s: (s.updated_at, s.user_id, s.adk_id))
            listed: list[tuple[AdkSession, Mapping[str, Any]]] = [
                (copy.deepcopy(s), copy.deepcopy(self._users.get((app_name, s.user_id), {})))
                for s in found
            ]
            return copy.deepcopy(self._apps.get(app_name, {})), listed

    def user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user state of one user of an app ({} when none)."""
        with self.store.locked():
            return copy.deepcopy(self._users.get((app_name, user_id), {}))

    # --- what the store's deletes call, its lock held ----------------------------------
    def drop_session(self, session_id: str) -> None:
        """Forget a deleted session (its events went with its buffers), and its key."""
        gone = self._sessions.pop(session_id, None)
        if gone is not None:
            self._keys.pop((gone.app_name, gone.user_id, gone.adk_id), None)

    def drop_user(self, user_id: str) -> None:
        """Forget an erased user's states, in every app."""
        for key in [k for k in self._users if k[1] == user_id]:
            del self._users[key]


__all__ = ["MemoryAdkSessions"]
