"""The SQLite statements: ``SQL`` by name, its guarded forms, and the capabilities' own.

The statements of the LangGraph checkpoints, the pydantic-ai conversations and the
Google ADK sessions are merged in, each name used once.
"""

from __future__ import annotations

from flowmem.store.adk import sqlite as adk_tables
from flowmem.store.archive import sqlite as archive_tables
from flowmem.store.checkpoints import sqlite as checkpoint_tables
from flowmem.store.conversations import sqlite as conversation_tables
from flowmem.store.repairs import sqlite as repair_tables
from flowmem.store.sqlite.reserved import EXACT_BYTES
from flowmem.store.statements import guarded, merge

_B = "buffer_id = ?"
# a cut_* row's text, when SQL cannot give its facts, and an assistant row's call ids in order
_CUT_BODY = "CASE WHEN r.role = 'tool' OR r.tokens IS NULL OR NOT json_valid(r.body) THEN r.body END"
_CUT_CALLS = "CASE WHEN r.role = 'assistant' THEN COALESCE(r.calls, '[]') END"  # on the row: migration 23
# a read from the buffer's end, its first batch and the next ones: the header row, and each
# stored row as ``{row}`` (read_tail's body and count; read_tail_facts' facts, ``_CUT_ROW``)
_TAIL_FIRST = """WITH b AS (SELECT id, born, version, count, tokens, MAX(?, MIN(?,
                CASE WHEN tokens > 0 THEN count * ? * 9 / (8 * tokens) + 8 ELSE 0 END)) AS take
            FROM buffers WHERE scope = ? AND scope_id = ? AND key = ?)
        SELECT 0, b.count, NULL, b.tokens, b.born, b.version, b.take FROM b
        UNION ALL SELECT * FROM (SELECT 1, r.pos, r.body, r.tokens, NULL, NULL, NULL
            FROM buffer_rows r INDEXED BY buffer_rows_systems
            WHERE r.buffer_id = (SELECT id FROM b) AND r.role = 'system' ORDER BY r.pos)
        UNION ALL SELECT * FROM (SELECT 2, {row}
            FROM buffer_rows r WHERE r.buffer_id = (SELECT id FROM b) ORDER BY r.pos DESC
            LIMIT COALESCE((SELECT take FROM b), 0))"""
_TAIL_MORE = """WITH b AS (SELECT id, born, version FROM buffers
            WHERE scope = ? AND scope_id = ? AND key = ?)
        SELECT 0, NULL, NULL, NULL, b.born, b.version, NULL FROM b
        UNION ALL SELECT * FROM (SELECT 2, {row}
            FROM buffer_rows r WHERE r.buffer_id = (SELECT id FROM b) AND r.pos < ? ORDER BY r.pos DESC LIMIT ?)"""
# the call ids on a buffer's rows (``where``: which rows), for the statements that find
# declarations by the rows that make them (migration 23: no index of declarations by position)
_ROW_CALLS = "buffer_rows AS r, json_each(r.calls) AS j WHERE r.buffer_id = {b} AND r.calls IS NOT NULL AND {where}"
_TAIL_ROW = "r.pos, r.body, r.tokens, NULL, NULL, NULL"
_CUT_ROW = f"r.pos, {_CUT_BODY}, r.tokens, r.role, {_CUT_CALLS}, NULL"

SQL: dict[str, str] = {
    # the header's fifth column lists its unanswered calls (migration 23, decision 0137):
    # the editor keeps the list and writes it with the header when it changed; the sixth says
    # that the list is an open call's only entry and an answer's entry carries the declaration
    # it answered (migration 28, decision 0180)
    "header_get": """SELECT id, count, last_major, bytes, unanswered, 1 AS carried FROM buffers
        WHERE scope = ? AND scope_id = ? AND key = ?""",
    "header_insert": """INSERT INTO buffers (scope, scope_id, key) VALUES (?, ?, ?) ON CONFLICT DO NOTHING
        RETURNING id, count, last_major, bytes, unanswered, 1 AS carried""",
    "header_update": "UPDATE buffers SET count = ?, last_major = ?, bytes = ?, tokens = tokens + ?, version = version + 1 WHERE id = ?",
    "header_listed": """UPDATE buffers SET count = ?, last_major = ?, bytes = ?, tokens = tokens + ?,
        unanswered = ?, version = version + 1 WHERE id = ?""",
    "open_list": "SELECT unanswered FROM buffers WHERE id = ?",
    "declared_of": f"SELECT declared_pos, ord FROM buffer_calls WHERE {_B} AND call_id = ?",
    # a declaration not listed: an entry of its own, or carried by an answer (migration 28);
    # the editor asks the header's list first
    "is_declared": """SELECT 1 FROM buffer_calls WHERE buffer_id = ?1 AND call_id = ?2
        UNION ALL SELECT 1 FROM buffer_answers WHERE buffer_id = ?1 AND call_id = ?2
            AND declared_pos IS NOT NULL LIMIT 1""",
    "answer_of": f"SELECT pos, healed FROM buffer_answers WHERE {_B} AND call_id = ? ORDER BY pos LIMIT 1",
    # the first non-tool row after the turn, on the primary key: the scan passes the
    # turn's result run and stops (decision 0094); the editor asks once per turn
    "run_end": f"""SELECT MAX(pos) FROM buffer_rows WHERE {_B} AND pos > ? AND pos < COALESCE(
        (SELECT pos FROM buffer_rows WHERE {_B} AND pos > ? AND role <> 'tool'
            ORDER BY pos LIMIT 1),
        9223372036854775807)""",
    "oldest": f"SELECT pos, body FROM buffer_rows WHERE {_B} ORDER BY pos LIMIT 1",
    "newest": f"SELECT pos, body FROM buffer_rows WHERE {_B} ORDER BY pos DESC LIMIT 1",
    "row_get": f"SELECT body FROM buffer_rows WHERE {_B} AND pos = ?",
    "next_pos": f"SELECT MIN(pos) FROM buffer_rows WHERE {_B} AND pos > ?",
    "rows_before": f"SELECT COUNT(*) FROM buffer_rows WHERE {_B} AND pos < ?",  # an index
    "max_before": f"SELECT MAX(pos) FROM buffer_rows WHERE {_B} AND pos > ? AND pos < ?",
    # the row's call ids with it (its last parameter, JSON or NULL: migration 23)
    "row_insert": "INSERT INTO buffer_rows (buffer_id, pos, role, body, tokens, calls) VALUES (?, ?, ?, ?, ?, ?)",
    "row_update": """UPDATE buffer_rows SET role = ?1, body = ?2, tokens = ?3, calls = ?6
        WHERE buffer_id = ?4 AND pos = ?5""",
    "row_delete": f"DELETE FROM buffer_rows WHERE {_B} AND pos = ?",
    "call_insert": f"""INSERT INTO buffer_calls (buffer_id, call_id, declared_pos, ord, answered)
        VALUES (?, ?, ?, ?, EXISTS (SELECT 1 FROM buffer_answers WHERE {_B} AND call_id = ?))
        ON CONFLICT DO NOTHING""",
    # a row's declarations, by the call ids on the row (no index by position: migration 23)
    "calls_delete": f"""DELETE FROM buffer_calls WHERE buffer_id = ?1 AND declared_pos = ?2
        AND call_id IN (SELECT j.value FROM {_ROW_CALLS.format(b="?1", where="r.pos = ?2")})""",
    "answer_insert": "INSERT INTO buffer_answers (buffer_id, call_id, pos, healed) VALUES (?, ?, ?, ?)",
    "answer_delete": f"DELETE FROM buffer_answers WHERE {_B} AND call_id = ? AND pos = ?",
    # an answer's entry with the declaration it answered, listed until then (NULL: none), one
    # entry for both (migration 28, decision 0180); its removal gives back what it carried
    "answer_carry": """INSERT INTO buffer_answers (buffer_id, call_id, pos, healed, declared_pos, ord)
        VALUES (?, ?, ?, ?, ?, ?)""",
    "answer_drop": f"DELETE FROM buffer_answers WHERE {_B} AND call_id = ? AND pos = ? RETURNING declared_pos, ord",
    "answer_uncarry": f"""UPDATE buffer_answers SET declared_pos = NULL, ord = NULL
        WHERE {_B} AND call_id = ? AND declared_pos = ?""",
    # a call open again: its declarations' entries go, the header lists them
    "calls_of_drop": f"DELETE FROM buffer_calls WHERE {_B} AND call_id = ?",
    "shift_rows": f"UPDATE buffer_rows SET pos = -(pos + ?) WHERE {_B} AND pos > ? AND pos < ?",
    # the moved rows' declarations, found by the rows' call ids (the rows moved first, to
    # -(pos + need); back before the rows: the editor's order)
    "shift_calls": f"""UPDATE buffer_calls SET declared_pos = -(declared_pos + ?1) WHERE buffer_id = ?2
        AND declared_pos > ?3 AND declared_pos < ?4 AND call_id IN (SELECT j.value
            FROM {_ROW_CALLS.format(b="?2", where="r.pos > -(?4 + ?1) AND r.pos < -(?3 + ?1)")})""",
    "shift_answers": f"UPDATE buffer_answers SET pos = -(pos + ?) WHERE {_B} AND pos > ? AND pos < ?",
    # the moved rows' declarations an answer carries, found as shift_calls finds them
    "shift_carried": f"""UPDATE buffer_answers SET declared_pos = -(declared_pos + ?1) WHERE buffer_id = ?2
        AND declared_pos > ?3 AND declared_pos < ?4 AND call_id IN (SELECT j.value
            FROM {_ROW_CALLS.format(b="?2", where="r.pos > -(?4 + ?1) AND r.pos < -(?3 + ?1)")})""",
    "unflip_rows": f"UPDATE buffer_rows SET pos = -pos WHERE {_B} AND pos < 0",
    "unflip_calls": f"""UPDATE buffer_calls SET declared_pos = -declared_pos WHERE buffer_id = ?1
        AND declared_pos < 0 AND call_id IN (SELECT j.value FROM {_ROW_CALLS.format(b="?1", where="r.pos < 0")})""",
    "unflip_answers": f"UPDATE buffer_answers SET pos = -pos WHERE {_B} AND pos < 0",
    "unflip_carried": f"""UPDATE buffer_answers SET declared_pos = -declared_pos WHERE buffer_id = ?1
        AND declared_pos < 0 AND call_id IN (SELECT j.value FROM {_ROW_CALLS.format(b="?1", where="r.pos < 0")})""",
    "was_evicted": f"SELECT 1 FROM buffer_evicted WHERE {_B} AND call_id = ?",
    "evicted_insert": f"""INSERT INTO buffer_evicted (buffer_id, call_id, seq) VALUES (?, ?,
        (SELECT COALESCE(MAX(seq), 0) + 1 FROM buffer_evicted WHERE {_B}))
        ON CONFLICT (buffer_id, call_id) DO UPDATE SET seq = excluded.seq""",
    "evicted_trim": f"""DELETE FROM buffer_evicted WHERE {_B} AND archived = 0 AND seq <=
        (SELECT MAX(seq) FROM buffer_evicted WHERE {_B}) - ?""",
    # --- outside the editor ---
    # the buffer id first (a scalar subquery), so the rows come from the (buffer_id, pos) index
    "load_all": """SELECT body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE scope = ? AND scope_id = ? AND key = ?) ORDER BY pos""",
    "load_last": """SELECT body FROM (SELECT pos, body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE scope = ? AND scope_id = ? AND key = ?) ORDER BY pos DESC LIMIT ?) AS tail
        ORDER BY pos""",
    "bodies_before": """SELECT pos, body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE scope = ? AND scope_id = ? AND key = ?) AND pos < ? ORDER BY pos""",
    "bodies_last_before": """SELECT pos, body FROM (SELECT pos, body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE scope = ? AND scope_id = ? AND key = ?) AND pos < ?
        ORDER BY pos DESC LIMIT ?) AS tail ORDER BY pos""",
    "count": "SELECT count FROM buffers WHERE scope = ? AND scope_id = ? AND key = ?",
    # an owner's bytes, exact: user_usage's upper bound less the buffers' unused reservations (migration 25)
    "usage_get": f"""SELECT {EXACT_BYTES.format(u='u')}, u.buffers, u.records
        FROM user_usage AS u WHERE u.user_id = ?""",
    "usage_delete": "DELETE FROM user_usage WHERE user_id = ?",
    # a paged read (page_bodies): the header, the (last+1)-th newest row below a cursor, a page
    "page_head": "SELECT id, born, version, count FROM buffers WHERE scope = ? AND scope_id = ? AND key = ?",
    "page_floor": f"SELECT pos FROM buffer_rows WHERE {_B} AND pos < ? ORDER BY pos DESC LIMIT 1 OFFSET ?",
    "page_rows": f"SELECT pos, body FROM buffer_rows WHERE {_B} AND pos > ? AND pos < ? ORDER BY pos LIMIT ?",
    # a read from the buffer's end (read_tail): the header (0), the system rows (1) and the
    # newest rows (2) in one statement; then older rows below a cursor, with the header
    # again, so that each batch is seen to be of the first one's buffer and version
    # (the first batch: the rows a token budget makes at the buffer's average, see tail.py)
    "tail_first": _TAIL_FIRST.format(row=_TAIL_ROW),
    "tail_more": _TAIL_MORE.format(row=_TAIL_ROW),
    # a buffer stored before its rows were counted (migration 13): its tokens, counted
    "tail_uncounted": """WITH b AS (SELECT id, born, version FROM buffers
            WHERE scope = ? AND scope_id = ? AND key = ?)
        SELECT 0, NULL, NULL, NULL, b.born, b.version, NULL FROM b
        UNION ALL SELECT 3, NULL, NULL, (SELECT SUM(tokens) FROM buffer_rows, b WHERE buffer_id = b.id),
            NULL, NULL, NULL
        UNION ALL SELECT 4, r.pos, r.body, NULL, NULL, NULL, NULL FROM b, buffer_rows r
            WHERE r.buffer_id = b.id AND r.tokens IS NULL""",
    # read_tail's rows as a window's facts (read_tail_facts, issue 38 §2): the stored role and
    # count, an assistant row's call ids from the row (migration 23); the text only when SQL cannot
    # give the facts (a tool row, an uncounted row, a text that is not JSON)
    "cut_first": _TAIL_FIRST.format(row=_CUT_ROW),
    "cut_more": _TAIL_MORE.format(row=_CUT_ROW),
    "read_begin": "BEGIN",
    "read_end": "COMMIT",
    "clear_rows": f"DELETE FROM buffer_rows WHERE {_B}",
    "clear_calls": f"DELETE FROM buffer_calls WHERE {_B}",
    "clear_answers": f"DELETE FROM buffer_answers WHERE {_B}",
    "clear_evicted": f"DELETE FROM buffer_evicted WHERE {_B}",
    "clear_header": "DELETE FROM buffers WHERE id = ?",
    "scope_buffers": "SELECT id, key FROM buffers WHERE scope = ? AND scope_id = ? ORDER BY id",
    "scope_records_delete": "DELETE FROM records WHERE scope = ? AND scope_id = ?",
    "sessions_of_owner": "SELECT id, status FROM sessions WHERE owner = ? ORDER BY id",
    "tokens_of_user_delete": "DELETE FROM tokens WHERE user_id = ?",
    "records_purge": """DELETE FROM records WHERE expires_at <= ? AND (scope, scope_id, key) IN
        (SELECT scope, scope_id, key FROM records WHERE expires_at <= ? LIMIT ?)""",
    # idempotency keys (docs/decisions/0031); a second insert of one key is a unique violation
    "idem_insert": """INSERT INTO idempotency_keys (owner, key, fingerprint, status, body, expires_at)
        VALUES (?, ?, ?, ?, ?, ?)""",
    "idem_claim": """INSERT INTO idempotency_keys (owner, key, fingerprint, status, body, expires_at)
        VALUES (?, ?, ?, 0, '', ?) ON CONFLICT (owner, key) DO UPDATE
        SET fingerprint = excluded.fingerprint, status = 0, body = '', expires_at = excluded.expires_at
        WHERE idempotency_keys.expires_at <= ?""",
    "idem_get": "SELECT fingerprint, status, body, expires_at FROM idempotency_keys WHERE owner = ? AND key = ?",
    "idem_drop_expired": "DELETE FROM idempotency_keys WHERE owner = ? AND key = ? AND expires_at <= ?",
    "idem_answer": "UPDATE idempotency_keys SET status = ?, body = ? WHERE owner = ? AND key = ? AND status = 0",
    "idem_release": "DELETE FROM idempotency_keys WHERE owner = ? AND key = ? AND status = 0",
    "idem_of_owner_delete": "DELETE FROM idempotency_keys WHERE owner = ?",
    "idem_purge": """DELETE FROM idempotency_keys WHERE expires_at <= ? AND (owner, key) IN
        (SELECT owner, key FROM idempotency_keys WHERE expires_at <= ? LIMIT ?)""",
    "record_get": "SELECT value, expires_at FROM records WHERE scope = ? AND scope_id = ? AND key = ?",
    "record_put": """INSERT INTO records (scope, scope_id, key, value, expires_at) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (scope, scope_id, key) DO UPDATE SET value = excluded.value,
        expires_at = excluded.expires_at""",
    "record_delete": "DELETE FROM records WHERE scope = ? AND scope_id = ? AND key = ?",
    "session_insert": """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at,
        updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
    "session_get": "SELECT id, name, owner, status, agent, metadata, created_at, updated_at FROM sessions WHERE id = ?",
    "sessions_all": """SELECT id, name, owner, status, agent, metadata, created_at, updated_at
        FROM sessions ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?""",
    "sessions_all_count": "SELECT COUNT(*) FROM sessions",
    "sessions_owned": """SELECT id, name, owner, status, agent, metadata, created_at, updated_at
        FROM sessions WHERE owner = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?""",
    "sessions_owned_count": "SELECT COUNT(*) FROM sessions WHERE owner = ?",
    "session_status": "UPDATE sessions SET status = ? WHERE id = ?",
    "session_status_get": "SELECT status FROM sessions WHERE id = ?",
    "session_status_guard": "SELECT status FROM sessions WHERE id = ?",
    "session_delete": "DELETE FROM sessions WHERE id = ? RETURNING status",
    "transcript_seq_delete": "DELETE FROM transcript_seq WHERE session_id = ?",
    "transcript_insert": "INSERT INTO transcripts (session_id, seq, body) VALUES (?, ?, ?)",
    "transcript_page_asc": """SELECT seq, body FROM transcripts WHERE session_id = ? AND seq > ?
        AND seq < ? ORDER BY seq LIMIT ?""",
    "transcript_page_desc": """SELECT seq, body FROM transcripts WHERE session_id = ? AND seq > ?
        AND seq < ? ORDER BY seq DESC LIMIT ?""",
    "transcript_update": "UPDATE transcripts SET body = ? WHERE session_id = ? AND seq = ?",
    "transcript_delete": "DELETE FROM transcripts WHERE session_id = ? AND seq = ?",
    "transcript_delete_all": "DELETE FROM transcripts WHERE session_id = ?",
    "token_insert": """INSERT INTO tokens (id, token_hash, user_id, permissions, created_at, revoked,
        label) VALUES (?, ?, ?, ?, ?, ?, ?)""",
    "token_by_hash": """SELECT id, token_hash, user_id, permissions, created_at, revoked, label
        FROM tokens WHERE token_hash = ?""",
    "tokens_all": """SELECT id, token_hash, user_id, permissions, created_at, revoked, label
        FROM tokens ORDER BY created_at, id""",
    "token_revoke": "UPDATE tokens SET revoked = 1 WHERE id = ?",
    "schema_table": """CREATE TABLE IF NOT EXISTS flowmem_schema (
        version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)""",
    "schema_version": "SELECT COALESCE(MAX(version), 0) FROM flowmem_schema",
    "schema_insert": "INSERT INTO flowmem_schema (version, applied_at) VALUES (?, ?)",
    "token_valid": "SELECT 1 FROM tokens WHERE id = ? AND revoked = 0",
}

# Write guards (docs/decisions/0014): the condition a guarded write checks inside its
# own transaction, which SQLite's write lock serializes with every erasure and delete.
_TOKEN_VALID = "EXISTS (SELECT 1 FROM tokens WHERE id = ? AND revoked = 0)"
GUARDS: dict[str, str] = {
    "token": _TOKEN_VALID,
    "session": "EXISTS (SELECT 1 FROM sessions WHERE id = ?)",
    "both": f"EXISTS (SELECT 1 FROM sessions WHERE id = ? AND {_TOKEN_VALID})",
    # a claim (docs/decisions/0032): the session exists AND is owned by the claimed owner
    "owned": "EXISTS (SELECT 1 FROM sessions WHERE id = ? AND owner IS ?)",
    "both_owned": f"EXISTS (SELECT 1 FROM sessions WHERE id = ? AND owner IS ? AND {_TOKEN_VALID})",
    "same": "EXISTS (SELECT 1 FROM sessions WHERE id = ? AND owner IS ? AND created_at = ?)",
    "both_same": f"""EXISTS (SELECT 1 FROM sessions WHERE id = ? AND owner IS ? AND created_at = ?
        AND {_TOKEN_VALID})""",
}
# A claiming write's first statement: create the session unless it exists (or the
# token is not valid, or its owner is at the limit; the count runs only for a
# session that does not exist yet). CASE evaluates its branches in order.
_ENSURE = """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at,
    updated_at) SELECT ?, '', ?, 'idle', NULL, '{{}}', ?, ? WHERE CASE {token}
    WHEN EXISTS (SELECT 1 FROM sessions WHERE id = ?) THEN 0
    WHEN EXISTS (SELECT 1 FROM deleted_sessions WHERE id = ?) THEN 0
    WHEN ? = 0 OR ? IS NULL THEN 1
    ELSE (SELECT COUNT(*) FROM sessions WHERE owner = ?) < ? END
    ON CONFLICT (id) DO NOTHING"""
SQL["session_ensure"] = _ENSURE.format(token="")
SQL["session_ensure@token"] = _ENSURE.format(token=f"WHEN NOT {_TOKEN_VALID} THEN 0")
SQL["session_owner"] = "SELECT owner FROM sessions WHERE id = ?"
SQL["session_deleted"] = "SELECT 1 FROM deleted_sessions WHERE id = ?"
SQL["session_remember_deleted"] = """INSERT INTO deleted_sessions (id, deleted_at) VALUES (?, ?)
    ON CONFLICT (id) DO UPDATE SET deleted_at = excluded.deleted_at"""
_GUARDED: dict[str, str] = {
    "guard": "SELECT 1 WHERE {guard}",
    "session_insert": """INSERT INTO sessions (id, name, owner, status, agent, metadata,
        created_at, updated_at) SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE {guard}""",
    "record_put": """INSERT INTO records (scope, scope_id, key, value, expires_at)
        SELECT ?, ?, ?, ?, ? WHERE {guard} ON CONFLICT (scope, scope_id, key) DO UPDATE
        SET value = excluded.value, expires_at = excluded.expires_at""",
    "transcript_seq_next": """INSERT INTO transcript_seq (session_id, last_seq) SELECT ?, 1
        WHERE {guard} ON CONFLICT (session_id) DO UPDATE SET last_seq = last_seq + 1
        RETURNING last_seq""",
}
SQL.update(guarded(_GUARDED, GUARDS))
merge(SQL, checkpoint_tables.SQL, conversation_tables.SQL, adk_tables.SQL, archive_tables.SQL, repair_tables.SQL)


__all__ = ["GUARDS", "SQL"]
