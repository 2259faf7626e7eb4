"""``SqlSessions``: the SQL back-ends' sessions, their transcripts and a user's erasure.

A base of ``SqlStore`` (``sqlbase.py``) over ``SqlEngineBase``'s hooks: creating,
reading, listing and deleting sessions (a session's deletion takes its transcript,
its scope and every kind of data's rows of it), erasing a user, and the transcripts'
numbered rows. This module holds no SQL text: every statement is named and looked up
in the backend's ``SQL`` dict.
"""

from __future__ import annotations

import time

from flowmem.core import Message
from flowmem.store.base import (
    SESSION_SCOPE,
    USER_SCOPE,
    Address,
    Erasure,
    Idempotency,
    SessionRecord,
    TranscriptMessage,
    WriteGuard,
)
from flowmem.store.engine import C
from flowmem.store.rows import (
    check_none_running,
    check_not_running,
    check_page,
    check_texts,
    dump_json,
    guard_form,
    session_from_row,
    stored_json,
)
from flowmem.store.sqlengine import SqlEngineBase

SEQ_MAX = 9223372036854775807  # the largest transcript sequence number (64-bit)


class SqlSessions(SqlEngineBase[C]):
    """Sessions, transcripts and erasure, common to the SQL backends."""

    # --- sessions ---------------------------------------------------------------------------
    def create_session(
        self,
        session: SessionRecord,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> SessionRecord:
        """Insert a new session (ConflictError when the id exists; ``guard`` checked by the insert)."""
        check_texts(id=session.id, name=session.name, owner=session.owner, agent=session.agent)
        metadata = dump_json(dict(session.metadata), "session metadata")
        params = (
            session.id,
            session.name,
            session.owner,
            session.status,
            session.agent,
            metadata,
            session.created_at,
            session.updated_at,
        )
        what = f"session {session.id}"
        self._insert_new("session_insert", params, what, guard, idempotency, session)
        return session

    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the session or None."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["session_get"], (session_id,)).fetchone()
        return None if row is None else session_from_row(row)

    def list_sessions(
        self, owner: str | None, include_all: bool, limit: int, offset: int
    ) -> tuple[list[SessionRecord], int]:
        """Return a page of sessions (newest first) and the total under the same filter."""
        check_page(limit, offset)
        if not include_all and owner is None:
            return [], 0
        with self._reading() as conn:
            if include_all:
                rows = conn.execute(self.SQL["sessions_all"], (limit, offset)).fetchall()
                total = conn.execute(self.SQL["sessions_all_count"]).fetchone()
            else:
                rows = conn.execute(self.SQL["sessions_owned"], (owner, limit, offset)).fetchall()
                total = conn.execute(self.SQL["sessions_owned_count"], (owner,)).fetchone()
        return [session_from_row(r) for r in rows], int(total[0]) if total else 0

    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its transcript and its whole session scope in one transaction.

        True when it existed; an unknown id changes nothing.
        """

        def work(conn: C) -> bool:
            return self._delete_session(conn, session_id) is not None

        return self._write(work)

    def erase_user(self, user_id: str) -> Erasure:
        """Delete the user's sessions, ``user`` scope and tokens in one transaction.

        The tokens go first: a guarded write of one of them in flight (it holds
        the token row) commits before, so its rows are found and deleted below, and
        one not yet at its guard finds the token gone (docs/decisions/0014).
        """

        def work(conn: C) -> Erasure:
            tokens = conn.execute(self.SQL["tokens_of_user_delete"], (user_id,)).rowcount
            owned = conn.execute(self.SQL["sessions_of_owner"], (user_id,)).fetchall()
            check_none_running(owned)
            buffers = records = 0
            for session_id, _ in owned:
                dropped = self._delete_session(conn, session_id) or (0, 0)
                buffers, records = buffers + dropped[0], records + dropped[1]
            dropped = self._drop_scope(conn, USER_SCOPE, user_id)
            conn.execute(self.SQL["idem_of_owner_delete"], (f"user:{user_id}",))
            conn.execute(self.SQL["adk_user_states_drop"], (user_id,))  # ADK's user state
            conn.execute(self.SQL["usage_delete"], (user_id,))  # nothing of theirs is left
            return Erasure(len(owned), buffers + dropped[0], records + dropped[1], tokens)

        return self._write(work)

    def _delete_session(self, conn: C, session_id: str) -> tuple[int, int] | None:
        """Delete a session, its transcript and its scope; (buffers, records) dropped, None if absent.

        ConflictError (the caller's transaction rolls back) when the session is running.
        Deleting the row first waits for guarded writes holding it, so what they
        wrote is deleted below (docs/decisions/0014).
        """
        deleted = conn.execute(self.SQL["session_delete"], (session_id,)).fetchone()
        if deleted is None:
            return None
        check_not_running(session_id, deleted[0])
        # remembered: a write in flight, or a later one, must not create it again
        conn.execute(self.SQL["session_remember_deleted"], (session_id, time.time()))
        conn.execute(self.SQL["transcript_delete_all"], (session_id,))
        conn.execute(self.SQL["transcript_seq_delete"], (session_id,))
        for name in ("cp_drop_thread", "blob_drop_thread", "writes_drop_thread"):
            conn.execute(self.SQL[name], (session_id,))  # a LangGraph thread is the session
        for name in ("pa_drop", "pa_entries_drop"):
            conn.execute(self.SQL[name], (session_id,))  # so is a pydantic-ai conversation
        conn.execute(self.SQL["adk_session_drop"], (session_id,))  # an ADK session is the session
        return self._drop_scope(conn, SESSION_SCOPE, session_id)

    def _drop_scope(self, conn: C, scope: str, scope_id: str) -> tuple[int, int]:
        """Delete every buffer and record of one scope id; return (buffers, records) deleted."""
        found = conn.execute(self.SQL["scope_buffers"], (scope, scope_id)).fetchall()
        for buffer_id, key in found:
            self._hold_buffer(conn, Address(scope, scope_id, key))
            self._drop_buffer(conn, int(buffer_id))
        records = conn.execute(self.SQL["scope_records_delete"], (scope, scope_id)).rowcount
        return len(found), int(records)

    # --- transcripts -------------------------------------------------------------------------
    def add_transcript(
        self, session_id: str, row: Message, guard: WriteGuard | None = None
    ) -> TranscriptMessage:
        """Append a row with the next sequence number (never reused) while the session exists.

        NotFoundError (AuthenticationError for ``guard``'s token) and nothing written
        otherwise: the check is part of the statement that takes the number.
        """
        body = dump_json(row, "transcript row")
        self._check_session_id(session_id)
        kind, checks = guard_form(
            WriteGuard(None if guard is None else guard.token_id, session_id)
        )

        def work(conn: C) -> int:
            found = conn.execute(
                self.SQL[f"transcript_seq_next@{kind}"], (session_id, *checks)
            ).fetchone()
            if found is None:
                raise self._guard_error(conn, guard)
            seq = int(found[0])
            conn.execute(self.SQL["transcript_insert"], (session_id, seq, body))
            return seq

        seq = self._write(work)
        return TranscriptMessage(session_id, seq, stored_json(body))

    def list_transcript(
        self,
        session_id: str,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> tuple[list[TranscriptMessage], bool]:
        """A page of transcript rows numbered above ``since`` and below ``before``, and whether more exist: one statement."""
        check_page(limit)
        low = -1 if since is None else since
        high = SEQ_MAX if before is None else before
        name = "transcript_page_desc" if newest_first else "transcript_page_asc"
        with self._connection() as conn:
            rows = conn.execute(self.SQL[name], (session_id, low, high, limit + 1)).fetchall()
        items = [TranscriptMessage(session_id, int(s), stored_json(b)) for s, b in rows[:limit]]
        return items, len(rows) > limit

    def edit_transcript(self, session_id: str, seq: int, row: Message) -> bool:
        """Replace one transcript row (administrative tier); True if it existed."""
        body = dump_json(row, "transcript row")
        return self._changed("transcript_update", (body, session_id, seq))

    def delete_transcript(self, session_id: str, seq: int) -> bool:
        """Delete one transcript row (administrative tier); True if it existed."""
        return self._changed("transcript_delete", (session_id, seq))



__all__ = ["SEQ_MAX", "SqlSessions"]
