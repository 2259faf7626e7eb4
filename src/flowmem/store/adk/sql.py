"""``SqlAdkSessions``: the ``AdkSessions`` protocol on a SQL store (SQLite or PostgreSQL).

It runs the backend's named statements (``adk.sqlite`` / ``adk.postgres``, merged into
the store's ``SQL``) through the store's own transactions. An event's append is one
transaction: the session row first (PostgreSQL: locked, so appends to one session
take turns across processes, and wait for a delete in flight), then the buffer's
lock (MEM-12, what every append to that buffer takes), the rows through the buffer
rules (``SqlBufferEditor`` under ``apply_rows``), the states, the revision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeVar

from flowmem.core import Message, Repair
from flowmem.errors import StoreBusyError
from flowmem.store.adk import (
    APPENDED,
    AdkKey,
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
from flowmem.store.editor import SqlBufferEditor, load_rows
from flowmem.store.engine import SqlKind
from flowmem.store.rows import check_buffer_bytes, check_texts, dump_json, stored_json

T = TypeVar("T")

READ_TRIES = 8  # reads of a session that moved while it was read, before StoreBusyError
UNLIMITED = 2**62  # a LIMIT both backends take for "every row"
EARLIEST = -1.0e300  # a time before every event's


def _session(row: Sequence[Any]) -> AdkSession:
    return AdkSession(
        id=row[0],
        app_name=row[1],
        user_id=row[2],
        state=stored_json(row[3]),
        revision=int(row[4]),
        last_event=row[5],
        created_at=float(row[6]),
        updated_at=float(row[7]),
        adk_id=row[8] or row[0],
    )


def _state(row: Sequence[Any] | None) -> dict[str, Any]:
    return {} if row is None else dict(stored_json(row[0]))


class SqlAdkSessions(SqlKind):
    """ADK sessions in a SQL store's ``adk_*`` tables, their events in its session buffers."""

    # --- writes --------------------------------------------------------------------------
    def create(
        self,
        session: AdkSession,
        app_delta: Mapping[str, Any],
        user_delta: Mapping[str, Any],
        guard: WriteGuard | None = None,
    ) -> AdkScopes:
        """Store a new session with its first states (see ``AdkSessions.create``)."""
        check_texts(id=session.id, app_name=session.app_name, user_id=session.user_id)
        state = dump_json(dict(session.state), "session state")

        key = session.key

        def work(conn: Any) -> AdkScopes:
            if self._run(conn, "adk_session_get", key).fetchone() is not None:
                raise exists(session)
            if self._run(conn, "adk_session_taken", (session.id,)).fetchone() is not None:
                raise id_taken(session.id)
            if guard is not None:
                self.store.check_guard(conn, guard)
            params = (
                session.id,
                session.app_name,
                session.user_id,
                state,
                session.revision,
                session.last_event,
                session.created_at,
                session.updated_at,
                session.adk_id,
            )
            if self._run(conn, "adk_session_insert", params).rowcount == 0:  # a create raced
                taken = self._run(conn, "adk_session_get", key).fetchone() is None
                raise id_taken(session.id) if taken else exists(session)
            app_state = self._update_app(conn, session.app_name, app_delta)
            user_state = self._update_user(conn, session.app_name, session.user_id, user_delta)
            return AdkScopes(session, app_state, user_state)

        return self.store.write(work)

    def append(self, key: AdkKey, seen: Seen, event: EventWrite) -> EventWritten:
        """Store one event's rows under the buffer rules, with its deltas (see ``AdkSessions``).

        The flowmem session is found by the ADK key first (its buffer's lock is what the
        write takes), then the key's row is locked: a session deleted and created again
        in between is another session, refused as stale.
        """
        for row in event.rows:
            dump_json(row, "message")  # NotSerializableError before any transaction
        with self.store.connection() as conn:
            found = self._run(conn, "adk_session_get", key).fetchone()
        if found is None:
            raise not_found(key)
        sid = str(found[0])
        address = events_address(sid)

        def work(conn: Any) -> EventWritten:
            found = self._run(conn, "adk_session_lock", key).fetchone()
            stored = None if found is None else _session(found)
            if stored is None or not matches(stored, key):
                raise not_found(key)
            check_stale(stored, seen)
            if stored.id != sid:  # deleted and created again since the lookup
                check_stale(stored, replace(seen, session_id=sid))
            self.store.hold_buffer(conn, address)
            whole = self._whole_before(conn, sid)
            editor = SqlBufferEditor(self.store.runner(conn), address)
            logged: list[Repair] = []
            fates, healed = apply_rows(editor, event.rows, logged)
            check_buffer_bytes(address, editor.bytes_before, editor.bytes, event.max_bytes)
            editor.flush()
            written = EventWritten(fates, healed, AdkScopes(stored))
            if not written.stored:
                return written
            kept = whole and event.event is not None and not healed and set(fates) == {APPENDED}
            self.store.record_repairs(conn, editor.buffer_id, logged)  # issue 37 §2
            app_state = self._update_app(conn, key.app_name, event.app_delta)
            user_state = self._update_user(conn, key.app_name, key.user_id, event.user_delta)
            after = replace(
                stored,
                state=merged(stored.state, event.session_delta),
                revision=stored.revision + 1,
                last_event=event.event_id,
                updated_at=event.timestamp,
            )
            state = dump_json(dict(after.state), "session state")
            self._run(
                conn,
                "adk_session_update",
                (state, after.revision, after.last_event, after.updated_at, sid),
            )
            self._keep(conn, sid, after.revision, event if kept else None)
            return EventWritten(fates, healed, AdkScopes(after, app_state, user_state))

        return self.store.write_at(address, work, hold=False)

    def _whole_before(self, conn: Any, sid: str) -> bool:
        """Whether adk_events holds every event of the session's buffer before a write (decision 0133).

        An empty (or absent) buffer holds none: events kept of rows since cleared are dropped.
        """
        found = self._run(conn, "adk_events_whole", (sid,)).fetchone()
        if found is not None and found[0]:
            return True
        if found is None or found[1] is None or int(found[1]) == 0:
            self._run(conn, "adk_events_clear", (sid,))
            return True
        return False

    def _keep(self, conn: Any, sid: str, seq: int, event: EventWrite | None) -> None:
        """Keep the event's JSON and stamp the buffer as whole, or unstamp it (decision 0133)."""
        if event is None or event.event is None:
            self._run(conn, "adk_events_mark", (None, None, sid))
            return
        self._run(conn, "adk_event_put", (sid, seq, event.timestamp, event.event))
        stamp = self._run(conn, "adk_events_stamp", (sid,)).fetchone()
        self._run(conn, "adk_events_mark", (int(stamp[0]), int(stamp[1]), sid))

    def _update_app(self, conn: Any, app_name: str, delta: Mapping[str, Any]) -> dict[str, Any]:
        if not delta:
            return _state(self._run(conn, "adk_app_get", (app_name,)).fetchone())
        self._run(conn, "adk_app_ensure", (app_name,))
        state = merged(_state(self._run(conn, "adk_app_lock", (app_name,)).fetchone()), delta)
        self._run(conn, "adk_app_put", (dump_json(state, "app state"), app_name))
        return state

    def _update_user(
        self, conn: Any, app_name: str, user_id: str, delta: Mapping[str, Any]
    ) -> dict[str, Any]:
        key = (app_name, user_id)
        if not delta:
            return _state(self._run(conn, "adk_user_get", key).fetchone())
        self._run(conn, "adk_user_ensure", key)
        state = merged(_state(self._run(conn, "adk_user_lock", key).fetchone()), delta)
        self._run(conn, "adk_user_put", (dump_json(state, "user state"), *key))
        return state

    # --- reads ----------------------------------------------------------------------------
    def read(self, key: AdkKey, rows: bool = True) -> tuple[AdkScopes, list[Message]] | None:
        """The session, its states and its events' rows as one moment (``_moment``); None when absent."""

        def bodies(conn: Any, session: AdkSession) -> list[Any]:
            address = events_address(session.id)
            return conn.execute(self.sql["load_all"], tuple(address)).fetchall() if rows else []

        found = self._moment(key, bodies)
        if not found:
            return None
        scopes, read = found
        return scopes, load_rows(read)

    def read_kept(
        self, key: AdkKey, recent: int | None = None, after: float | None = None
    ) -> tuple[AdkScopes, list[str]] | Literal[False] | None:
        """The session, its states and its kept events' JSON as one moment (see ``AdkSessions``).

        The events are one range read, ``after`` and ``recent`` applied in SQL; False
        when the buffer is not whole (its rows are read instead, decision 0133).
        """
        bound = UNLIMITED if recent is None else recent
        since = EARLIEST if after is None else after

        def texts(conn: Any, session: AdkSession) -> list[str] | Literal[False]:
            whole = self._run(conn, "adk_events_whole", (session.id,)).fetchone()
            if whole is None or not (whole[0] or not whole[1]):
                return False
            if not (whole[0] and bound):
                return []
            read = self._run(conn, "adk_events_read", (session.id, since, bound)).fetchall()
            return [str(row[0]) for row in reversed(read)]

        return self._moment(key, texts)

    def _moment(
        self, key: AdkKey, events: Callable[[Any, AdkSession], T | Literal[False]]
    ) -> tuple[AdkScopes, T] | Literal[False] | None:
        """The session, its states and what ``events`` reads of it, as one moment; None when absent.

        False when ``events`` says so. The session row is read before and after the
        rest: a write in between (its revision moved) makes the read start again, so
        the revision a reader gets is the one its events belong to.
        """
        app_name, user_id, session_id = key
        for _ in range(READ_TRIES):
            with self.store.connection() as conn:
                found = self._run(conn, "adk_session_get", key).fetchone()
                session = None if found is None else _session(found)
                if session is None or not matches(session, key):
                    return None
                got = events(conn, session)
                if got is False:
                    return False
                app_state = _state(self._run(conn, "adk_app_get", (app_name,)).fetchone())
                user_state = _state(self._run(conn, "adk_user_get", (app_name, user_id)).fetchone())
                again = self._run(conn, "adk_session_get", key).fetchone()
            if again is not None and (again[0], int(again[4])) == (session.id, session.revision):
                return AdkScopes(session, app_state, user_state), got
        raise StoreBusyError(
            f"ADK session {session_id} kept changing while it was read ({READ_TRIES} tries)"
        )

    def list(
        self, app_name: str, user_id: str | None
    ) -> tuple[dict[str, Any], list[tuple[AdkSession, Mapping[str, Any]]]]:
        """The app state and the app's sessions with their user state (see ``AdkSessions``)."""
        with self.store.reading() as conn:
            if user_id is None:
                found = self._run(conn, "adk_sessions_of_app", (app_name,)).fetchall()
                users = {
                    str(uid): dict(stored_json(text))
                    for uid, text in self._run(conn, "adk_users_of_app", (app_name,)).fetchall()
                }
            else:
                found = self._run(conn, "adk_sessions_of_user", (app_name, user_id)).fetchall()
                users = {user_id: _state(self._run(conn, "adk_user_get", (app_name, user_id)).fetchone())}
            app_state = _state(self._run(conn, "adk_app_get", (app_name,)).fetchone())
        sessions = [_session(row) for row in found]
        return app_state, [(s, users.get(s.user_id, {})) for s in sessions]

    def user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user state of one user of an app ({} when none)."""
        with self.store.connection() as conn:
            return _state(self._run(conn, "adk_user_get", (app_name, user_id)).fetchone())


__all__ = ["READ_TRIES", "SqlAdkSessions"]
