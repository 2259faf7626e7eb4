"""``SessionBuffers`` on a SQL store: one read-only query per method, whatever the number of sessions.

The statements are built here from three backend spellings (``SqliteBuffers``,
``PostgresBuffers``): the placeholder, the column that orders buffers by creation and
the expression reading a pydantic-ai record's head entry id. A list of sessions is
a list of placeholders (at most ``MAX_SESSIONS``, so at most a few hundred bound
values); every lookup is a seek of a primary key or of ``buffers (scope, scope_id, key)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from flowmem.errors import InvalidInputError
from flowmem.store.checkpoints import ROWS_TYPE
from flowmem.store.engine import SqlEngine
from flowmem.store.heads.facts import (
    CONVERSATION_LINE,
    GRAPH_LINE,
    MAX_SESSIONS,
    BufferCount,
    check_sessions,
    first_line,
    pick_place,
)
from flowmem.store.rows import stored_json


class SqlBuffers:
    """Reads a SQL store's buffers, checkpoints and conversation entries for ``SessionBuffers``."""

    P: ClassVar[str] = "?"
    BORN: ClassVar[str] = "born"
    """The buffers column that grows with every buffer created and is never reused."""
    HEAD_ID: ClassVar[str] = "json_extract(c.record, '$.head_id')"
    HEADS: ClassVar[str] = "buffers"
    """The headers as read (PostgreSQL's ``flowmem.store.headers.HEADS``, decision 0195)."""

    def __init__(self, store: SqlEngine[Any]) -> None:
        self.store = store

    def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self.store.connection() as conn:
            return list(conn.execute(sql, tuple(params)).fetchall())

    def _list(self, n: int) -> str:
        return ", ".join([self.P] * n)

    def buffers(self, session_id: str, limit: int) -> list[BufferCount]:
        """Every buffer of the session in key order, at most ``limit``."""
        p = self.P
        sql = f"""SELECT key, count, {self.BORN} FROM {self.HEADS} AS buffers
            WHERE scope = 'session' AND scope_id = {p} ORDER BY key LIMIT {p}"""
        return [BufferCount(k, int(c), int(b)) for k, c, b in self._rows(sql, (session_id, limit))]

    def counts(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], BufferCount]:
        """The buffers named by ``(session id, key)`` that exist."""
        wanted = sorted(set(pairs))
        if not wanted:
            return {}
        if len(wanted) > 4 * MAX_SESSIONS:
            raise InvalidInputError(f"at most {4 * MAX_SESSIONS} buffers at once")
        p = self.P
        match = " OR ".join([f"(scope_id = {p} AND key = {p})"] * len(wanted))
        sql = f"""SELECT scope_id, key, count, {self.BORN} FROM {self.HEADS} AS buffers
            WHERE scope = 'session' AND ({match})"""
        params = [value for pair in wanted for value in pair]
        return {(s, k): BufferCount(k, int(c), int(b)) for s, k, c, b in self._rows(sql, params)}

    def newest(self, session_ids: Sequence[str]) -> dict[str, BufferCount]:
        """Per session, among buffers that are no framework line: non-empty first, then created last."""
        ids = check_sessions(session_ids)
        if not ids:
            return {}
        p = self.P
        sql = f"""SELECT scope_id, key, count, born FROM (
                SELECT scope_id, key, count, {self.BORN} AS born, ROW_NUMBER() OVER (
                    PARTITION BY scope_id ORDER BY CASE WHEN count > 0 THEN 0 ELSE 1 END,
                    {self.BORN} DESC) AS n
                FROM {self.HEADS} AS buffers WHERE scope = 'session' AND scope_id IN ({self._list(len(ids))})
                AND substr(key, 1, {len(GRAPH_LINE)}) <> {p} AND key <> {p}
                AND substr(key, 1, {len(CONVERSATION_LINE) + 1}) <> {p}) AS ranked
            WHERE n = 1"""
        params = [*ids, GRAPH_LINE, CONVERSATION_LINE, CONVERSATION_LINE + "#"]
        return {s: BufferCount(k, int(c), int(b)) for s, k, c, b in self._rows(sql, params)}

    def graph_lines(self, session_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Per thread, first-line key -> line key of its latest root-namespace checkpoint: two queries."""
        ids = check_sessions(session_ids)
        if not ids:
            return {}
        p = self.P
        latest = f"""SELECT c.thread_id, c.versions FROM lg_checkpoints AS c
            WHERE c.ns = '' AND c.thread_id IN ({self._list(len(ids))})
            AND c.checkpoint_id = (SELECT MAX(d.checkpoint_id) FROM lg_checkpoints AS d
                WHERE d.thread_id = c.thread_id AND d.ns = '')"""
        wanted: list[tuple[str, str, str]] = []
        for thread_id, versions in self._rows(latest, ids):
            for channel, version in stored_json(versions).items():
                wanted.append((str(thread_id), str(channel), str(version)))
        if not wanted:
            return {}
        match = " OR ".join([f"(thread_id = {p} AND channel = {p} AND version = {p})"] * len(wanted))
        sql = f"""SELECT thread_id, blob FROM lg_blobs
            WHERE ns = '' AND type = {p} AND ({match})"""
        params = [ROWS_TYPE, *(value for triple in wanted for value in triple)]
        found: dict[str, dict[str, str]] = {}
        for thread_id, blob in self._rows(sql, params):
            key = str(stored_json(bytes(blob))["key"])
            found.setdefault(str(thread_id), {})[first_line(key)] = key
        return found

    def conversation_lines(self, session_ids: Sequence[str]) -> dict[str, str]:
        """Per conversation, the line its head entry ends: one query (record, entries, line ends)."""
        ids = check_sessions(session_ids)
        if not ids:
            return {}
        sql = f"""SELECT e.conversation_id, e.key, e.pos, (SELECT MAX(r.pos) FROM buffers AS b
                JOIN buffer_rows AS r ON r.buffer_id = b.id WHERE b.scope = 'session'
                AND b.scope_id = e.conversation_id AND b.key = e.key)
            FROM pa_conversations AS c JOIN pa_entries AS e
                ON e.conversation_id = c.conversation_id AND e.entry_id = {self.HEAD_ID}
            WHERE c.conversation_id IN ({self._list(len(ids))})"""
        places: dict[str, list[tuple[str, int, int | None]]] = {}
        for cid, key, pos, end in self._rows(sql, ids):
            places.setdefault(str(cid), []).append(
                (str(key), int(pos), None if end is None else int(end))
            )
        found = {cid: pick_place(where) for cid, where in places.items()}
        return {cid: key for cid, key in found.items() if key is not None}


__all__ = ["SqlBuffers"]
