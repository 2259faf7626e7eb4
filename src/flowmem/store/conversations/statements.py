"""The conversation statements, written once and spelled per backend (the placeholder).

``statements`` is called by ``conversations.sqlite`` and ``conversations.postgres``;
nothing else reads it. ``many`` spells one of its single-row inserts for several rows
(``conversations.sql``, decision 0171).
"""

from __future__ import annotations

import re
from functools import lru_cache

_LINE = "(SELECT id FROM buffers WHERE scope = 'session' AND scope_id = {p} AND key = {p})"


def statements(p: str, stamp: str, heads: str = "buffers") -> dict[str, str]:
    """The conversation statements with placeholder ``p`` (``?`` or ``%s``).

    ``stamp``: the ``buffers`` column no other buffer ever had (SQLite's ``born``,
    PostgreSQL's ``id``), which with ``version`` says a line is unchanged. ``heads``: the
    headers as read (PostgreSQL's ``flowmem.store.headers.HEADS``, decision 0195).
    """
    line = _LINE.format(p=p)
    # the line an entry ends (the first holding it), and whether pa_messages holds its
    # entries' messages whole: the record's line stamp is the line's buffer as it is now;
    # then the line's buffer stamp and version (its state, decision 0183)
    whole = f"""SELECT e.conversation_id, e.key, e.pos, CASE WHEN b.{stamp} = c.line_stamp
                AND b.version = c.line_version THEN 1 ELSE 0 END, b.{stamp}, b.version
            FROM e JOIN pa_conversations AS c ON c.conversation_id = e.conversation_id
                AND c.line_key = e.key
            JOIN {heads} AS b ON b.scope = 'session' AND b.scope_id = e.conversation_id
                AND b.key = e.key"""
    return {
        "pa_get": f"""SELECT conversation_id, revision, scope, updated, record
            FROM pa_conversations WHERE conversation_id = {p}""",
        "pa_revision": f"SELECT revision FROM pa_conversations WHERE conversation_id = {p}",
        # the revision, the line whose messages pa_entries holds, and whether it is unchanged
        "pa_revision_line": f"""SELECT c.revision, c.line_key, c.line_stamp, c.line_version,
                CASE WHEN b.{stamp} = c.line_stamp AND b.version = c.line_version THEN 1 ELSE 0 END
            FROM pa_conversations AS c LEFT JOIN {heads} AS b ON b.scope = 'session'
                AND b.scope_id = c.conversation_id AND b.key = c.line_key
            WHERE c.conversation_id = {p}""",
        "pa_list_all": f"""SELECT conversation_id, revision, scope, updated, record
            FROM pa_conversations ORDER BY updated DESC, conversation_id DESC LIMIT {p}""",
        "pa_list_scope": f"""SELECT conversation_id, revision, scope, updated, record
            FROM pa_conversations WHERE scope = {p}
            ORDER BY updated DESC, conversation_id DESC LIMIT {p}""",
        "pa_put": f"""INSERT INTO pa_conversations (conversation_id, revision, scope, updated, record,
                line_key, line_stamp, line_version)
            VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (conversation_id) DO UPDATE SET
            revision = excluded.revision, scope = excluded.scope, updated = excluded.updated,
            record = excluded.record, line_key = excluded.line_key,
            line_stamp = excluded.line_stamp, line_version = excluded.line_version""",
        # the record with the stamp of its line as the line is now (decision 0171): the line's
        # key, stamp and version, or none of them when the line has no buffer; it returns them
        # (a save's line state, decision 0183)
        "pa_put_line": f"""INSERT INTO pa_conversations (conversation_id, revision, scope, updated, record,
                line_key, line_stamp, line_version)
            SELECT {p}, {p}, {p}, {p}, {p}, b.key, b.{stamp}, b.version
            FROM (SELECT 1 AS one) AS o LEFT JOIN {heads} AS b ON b.scope = 'session'
                AND b.scope_id = {p} AND b.key = {p}
            WHERE true ON CONFLICT (conversation_id) DO UPDATE SET
            revision = excluded.revision, scope = excluded.scope, updated = excluded.updated,
            record = excluded.record, line_key = excluded.line_key,
            line_stamp = excluded.line_stamp, line_version = excluded.line_version
            RETURNING line_key, line_stamp, line_version""",
        "pa_drop": f"DELETE FROM pa_conversations WHERE conversation_id = {p}",
        "pa_entries_drop": f"DELETE FROM pa_entries WHERE conversation_id = {p}",
        "pa_entry_put": f"""INSERT INTO pa_entries (entry_id, conversation_id, key, pos)
            VALUES ({p}, {p}, {p}, {p}) ON CONFLICT (entry_id, conversation_id, key)
            DO UPDATE SET pos = excluded.pos""",
        "pa_message_put": f"""INSERT INTO pa_messages (conversation_id, key, pos, entry_id, message)
            VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (conversation_id, key, pos)
            DO UPDATE SET entry_id = excluded.entry_id, message = excluded.message""",
        # an entry of one conversation: the line it ends last in (the newest copy)
        "pa_entry_in": f"""SELECT key, pos FROM pa_entries
            WHERE entry_id = {p} AND conversation_id = {p} ORDER BY key LIMIT 1""",
        "pa_entry_any": f"""SELECT conversation_id, key, pos FROM pa_entries
            WHERE entry_id = {p} ORDER BY conversation_id, key LIMIT 1""",
        # the history an entry ends, in one query: its line's rows up to its position
        "pa_history": f"""WITH e AS (SELECT conversation_id, key, pos FROM pa_entries
                WHERE entry_id = {p} ORDER BY conversation_id, key LIMIT 1)
            SELECT r.body FROM e JOIN buffers AS b ON b.scope = 'session'
                AND b.scope_id = e.conversation_id AND b.key = e.key
            JOIN buffer_rows AS r ON r.buffer_id = b.id AND r.pos <= e.pos ORDER BY r.pos""",
        # the conversations an entry is in (a copied history puts it in several)
        "pa_entry_holders": f"""SELECT DISTINCT conversation_id FROM pa_entries
            WHERE entry_id = {p} ORDER BY conversation_id""",
        # the history an entry ends in one conversation (a user-bound reader's, decision 0109)
        "pa_history_in": f"""WITH e AS (SELECT conversation_id, key, pos FROM pa_entries
                WHERE entry_id = {p} AND conversation_id = {p} ORDER BY key LIMIT 1)
            SELECT r.body FROM e JOIN buffers AS b ON b.scope = 'session'
                AND b.scope_id = e.conversation_id AND b.key = e.key
            JOIN buffer_rows AS r ON r.buffer_id = b.id AND r.pos <= e.pos ORDER BY r.pos""",
        # where the history an entry ends is, and whether its messages are whole (decision 0131)
        "pa_messages_line": f"""WITH e AS (SELECT conversation_id, key, pos FROM pa_entries
                WHERE entry_id = {p} ORDER BY conversation_id, key LIMIT 1) {whole}""",
        "pa_messages_line_in": f"""WITH e AS (SELECT conversation_id, key, pos FROM pa_entries
                WHERE entry_id = {p} AND conversation_id = {p} ORDER BY key LIMIT 1) {whole}""",
        # whether a line holds a message past a position (decision 0183)
        "pa_messages_after": f"""SELECT 1 FROM pa_messages
            WHERE conversation_id = {p} AND key = {p} AND pos > {p} LIMIT 1""",
        # the last messages of a line up to a position, newest first
        "pa_messages": f"""SELECT entry_id, message FROM pa_messages
            WHERE conversation_id = {p} AND key = {p} AND pos <= {p} ORDER BY pos DESC LIMIT {p}""",
        "pa_line_end": f"SELECT MAX(pos) FROM buffer_rows WHERE buffer_id = {line}",
        "pa_line_upto": f"""SELECT body FROM buffer_rows WHERE buffer_id = {line} AND pos <= {p}
            ORDER BY pos""",
        # answered: an answer is stored (SQLite writes no answered flag since its migration 23)
        "pa_declarations": f"""SELECT c.call_id, c.declared_pos, EXISTS (SELECT 1 FROM buffer_answers AS a
                WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id), r.body
            FROM buffer_calls AS c JOIN buffer_rows AS r
                ON r.buffer_id = c.buffer_id AND r.pos = c.declared_pos
            WHERE c.buffer_id = {line}
                AND (c.call_id = {p} OR substr(c.call_id, 1, {p}) = {p})
            ORDER BY c.declared_pos""",
    }


_VALUES = re.compile(r"VALUES (\([^()]*\))")


@lru_cache(maxsize=256)
def many(sql: str, count: int) -> str:
    """``sql``, an ``INSERT … VALUES (…)`` of one row, taking ``count`` rows in one statement (decision 0171).

    The one ``VALUES`` group repeated ``count`` times, the rest (its ``ON CONFLICT``)
    as it was; the parameters are the rows' one after another.
    """
    found = _VALUES.search(sql)
    if found is None or count < 1:
        raise ValueError("many() takes an INSERT with one VALUES group and a count of at least 1")
    group = found.group(1)
    return sql[: found.start(1)] + ", ".join([group] * count) + sql[found.end(1) :]
