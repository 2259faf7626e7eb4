"""PostgreSQL's statements: ``SQL`` by name, the write guards and the append's queries.

The capability packages' statements (checkpoints, conversations, ADK) are merged in.
"""

from __future__ import annotations

from flowmem.store.adk import postgres as adk_tables
from flowmem.store.archive import postgres as archive_tables
from flowmem.store.checkpoints import postgres as checkpoint_tables
from flowmem.store.conversations import postgres as conversation_tables
from flowmem.store.editor import CARRIED_ROW
from flowmem.store.headers import HEADS, ROOM, TAIL, derived
from flowmem.store.repairs import postgres as repair_tables
from flowmem.store.statements import guarded, merge

# the advisory lock keys of a token and a session (their ids hashed: a collision only
# makes a revocation or a delete wait for one more append); see HELD below
TOKEN_KEYS, SESSION_KEYS = 0x666D7401, 0x666D7302
_HOLD_TOKEN = f"pg_advisory_xact_lock({TOKEN_KEYS}, hashtext(id))"
_HOLD_SESSION = f"pg_advisory_xact_lock({SESSION_KEYS}, hashtext(id))"
_B = "buffer_id = %s"
_ADDR = "scope = %s AND scope_id = %s AND key = %s"
# the header as its readers see it (decision 0195, flowmem.store.headers): ``b`` and its tail
# ``t``, the derived counters (``_D``), and what the editor takes after the sixth column: the
# tail's rows and tokens (a header write adds them) and the room it may grow in unwritten
_TAILED = f"buffers b CROSS JOIN LATERAL ({TAIL.format(h='b')}) AS t"
_D = derived("b", "t")
_COUNTERS = f"b.id, {_D['count']}, {_D['last_major']}, {_D['bytes']}"
_TAIL_HEAD = f"t.n, t.tok, {ROOM.format(h='b')}"
# Every string a stored row's body may give as one of its call ids, whatever
# ``flowmem.core.call_ids`` took: each entry of ``tool_calls`` (top level and in
# ``metadata``), its ``tool_call_id`` and ``id``, trimmed of what Python's ``str.strip``
# trims (``usable_call_id``), with the row's position. More strings than ids is
# harmless (a declaration matches on its position too); none is missed. ``where``
# picks the rows (alias ``r``).
_STRIPPED = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
_ROW_IDS = f"""SELECT r.pos, btrim(e.value ->> k.name, '{_STRIPPED}') AS id FROM buffer_rows r
    CROSS JOIN LATERAL (SELECT r.body::json AS j) AS m
    CROSS JOIN LATERAL (SELECT m.j -> 'tool_calls' AS calls
        UNION ALL SELECT m.j -> 'metadata' -> 'tool_calls') AS s
    CROSS JOIN LATERAL json_array_elements(CASE WHEN json_typeof(s.calls) = 'array'
        THEN s.calls END) AS e
    CROSS JOIN (VALUES ('tool_call_id'), ('id')) AS k(name)
    WHERE r.role = 'assistant' AND {{where}}"""
# Those rows' declarations, each looked up on the whole primary key by a subplan (a
# join could scan the buffer's calls under a generic plan with no statistics):
# their ctids, for the statement's own WHERE. ``pos``: where the id's row declared it;
# ``a``: the parameters (a subquery in ``calls_delete``: a statement the pipeline may
# merge into a WITH cannot begin with its own).
# Since migration 28 (decision 0159) the declarations are rows of ``buffer_call_ids``
# (``buffer_calls`` is a view of it, ``row_at`` its rows' ctids): ``at`` names the column.
_DECLARED_AT = """SELECT (SELECT c.ctid FROM buffer_call_ids c
    WHERE c.buffer_id = a.b AND c.call_id = d.id AND c.declared_pos = {pos} AND c.ord IS NOT NULL)
    FROM {a} CROSS JOIN LATERAL ({ids}) AS d"""
_DECLARED = "{at} = ANY (ARRAY(" + _DECLARED_AT + "))"
# A row's declarations gone (an eviction, a row replaced), into the tables: since
# migration 35 (decision 0194) a declaration of its own is a row of ``buffer_call_ids``
# (deleted), a carried one is in its answer's row (its ``declared_pos`` and ``declared_ord``
# cleared, a HOT update: no index reads them); both found by the call ids the row's body names,
# each on its key (the table's, the rows' answers' key), with the declaring position.
# As the pipeline merges it, the WITH list is lifted (``/with``).
_ROW_OF = "r.buffer_id = a.b AND r.pos = a.p"
_GONE_WITH = {
    "calls_delete": f"""calls_at AS (SELECT
            ARRAY(SELECT (SELECT c.ctid FROM buffer_call_ids c WHERE c.buffer_id = a.b
                AND c.call_id = d.id AND c.declared_pos = a.p) FROM ({_ROW_IDS.format(where=_ROW_OF)}) AS d) AS ats,
            ARRAY(SELECT (SELECT t.ctid FROM buffer_rows t WHERE t.buffer_id = a.b
                AND t.call_id = d.id AND t.declared_pos = a.p)
                FROM ({_ROW_IDS.format(where=_ROW_OF)}) AS d) AS carried
        FROM (SELECT %s::bigint AS b, %s::bigint AS p) AS a),
    calls_drop AS (DELETE FROM buffer_call_ids WHERE ctid = ANY ((SELECT ats FROM calls_at)::tid[]))""",
}
_GONE = {
    "calls_delete": """UPDATE buffer_rows SET declared_pos = NULL, declared_ord = NULL
        WHERE ctid = ANY ((SELECT carried FROM calls_at)::tid[])""",
}
SQL: dict[str, str] = {
    # the header's fifth column lists its unanswered calls (migration 26, decision 0153, as
    # SQLite's 23): the editor keeps the list and writes it with the header when it changed;
    # the sixth (CARRIED_ROW) says the list is an open call's only entry and an answer's row
    # holds the declaration it answered (migration 34, decision 0190)
    # and since decision 0195 the header as derived with its tail, the tail's rows, its tokens
    # and the room the buffer may grow in with its header unwritten (SqlBufferEditor's head)
    "header_get": f"""SELECT {_COUNTERS}, b.unanswered, {CARRIED_ROW} AS carried, {_TAIL_HEAD}
        FROM {_TAILED} WHERE {_ADDR}""",
    "header_insert": f"""INSERT INTO buffers (scope, scope_id, key) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING
        RETURNING id, count, last_major, bytes, unanswered, {CARRIED_ROW} AS carried, 0::bigint, 0::bigint,
            {ROOM.format(h="buffers")}""",
    "header_update": "UPDATE buffers SET count = %s, last_major = %s, bytes = %s, tokens = tokens + %s, version = version + 1 WHERE id = %s",
    "header_listed": """UPDATE buffers SET count = %s, last_major = %s, bytes = %s, tokens = tokens + %s,
        unanswered = %s, version = version + 1 WHERE id = %s""",
    "open_list": "SELECT unanswered FROM buffers WHERE id = %s",
    # a call's declarations of their own (not the ones its answers' rows carry)
    "declared_of": f"SELECT declared_pos, ord FROM buffer_call_ids WHERE {_B} AND call_id = %s",
    "is_declared": f"SELECT 1 FROM buffer_calls WHERE {_B} AND call_id = %s LIMIT 1",
    "answer_of": f"SELECT pos, healed FROM buffer_answers WHERE {_B} AND call_id = %s ORDER BY pos LIMIT 1",
    # the first non-tool row after the declaring turn, on the primary key: the scan
    # stops there, past the run's tool rows only (decision 0068)
    "run_end": f"""SELECT MAX(pos) FROM buffer_rows WHERE {_B} AND pos > %s AND pos < COALESCE(
        (SELECT pos FROM buffer_rows WHERE {_B} AND pos > %s AND role <> 'tool'
            ORDER BY pos LIMIT 1), 9223372036854775807)""",
    "oldest": f"SELECT pos, body FROM buffer_rows WHERE {_B} ORDER BY pos LIMIT 1",
    "newest": f"SELECT pos, body FROM buffer_rows WHERE {_B} ORDER BY pos DESC LIMIT 1",
    "row_get": f"SELECT body FROM buffer_rows WHERE {_B} AND pos = %s",
    "next_pos": f"SELECT MIN(pos) FROM buffer_rows WHERE {_B} AND pos > %s",
    "rows_before": f"SELECT COUNT(*) FROM buffer_rows WHERE {_B} AND pos < %s",  # an index
    "max_before": f"SELECT MAX(pos) FROM buffer_rows WHERE {_B} AND pos > %s AND pos < %s",
    # the listing editor gives a row's call ids with it (its last parameter, as on SQLite),
    # which PostgreSQL does not store: it finds a row's declarations by the call ids its
    # body names (decision 0139), and each call row is the smaller for it (decision 0153)
    # since migration 35 (decision 0194) a result's row is its answer: the last three
    # parameters are the call id it answers (``result_id``; NULL: none, the answers' key skips
    # the row) and the declaration it carries, listed until then (its position and order)
    "row_insert": """INSERT INTO buffer_rows (buffer_id, pos, role, body, tokens, call_id, declared_pos, declared_ord)
        SELECT %s::bigint, %s::bigint, %s::text, %s::text, %s::integer, c.id, c.p, c.o
        FROM (VALUES (%s::text, %s::text, %s::bigint, %s::integer)) AS c(calls, id, p, o)""",
    "row_update": """UPDATE buffer_rows SET role = %s, body = %s, tokens = %s, call_id = a.id,
            declared_pos = a.dp, declared_ord = a.o
        FROM (VALUES (%s::bigint, %s::bigint, %s::text, %s::text, %s::bigint, %s::integer))
            AS a(b, p, calls, id, dp, o)
        WHERE buffer_id = a.b AND pos = a.p""",
    "row_delete": f"DELETE FROM buffer_rows WHERE {_B} AND pos = %s",
    # no ON CONFLICT: a turn's call ids are distinct (core.call_ids) and a row's old
    # declarations are deleted before it is re-indexed, and a speculative insertion
    # writes one more WAL record per call (its confirmation)
    # into the table (migration 28, decision 0159): a declaration's row; the view's
    # trigger (``callids``) would do the same at the cost of a function call
    "call_insert": f"""INSERT INTO buffer_call_ids (buffer_id, call_id, declared_pos, ord, answered)
        VALUES (%s, %s, %s, %s, EXISTS (SELECT 1 FROM buffer_answers WHERE {_B} AND call_id = %s))""",
    # what an answer's row carries (``row_insert``: decision 0194), read before the row goes
    # or is replaced; the call's first answer but that row (None: the row was its last)
    "answer_carried": f"SELECT declared_pos, declared_ord FROM buffer_rows WHERE {_B} AND pos = %s",
    "answer_other": f"""SELECT pos FROM buffer_answers WHERE {_B} AND call_id = %s AND pos <> %s
        ORDER BY pos LIMIT 1""",
    # a call open again (its last answer gone): its declarations' rows go, the header lists them
    "calls_of_drop": f"DELETE FROM buffer_call_ids WHERE {_B} AND call_id = %s",
    # "calls_delete": below (_GONE), into the tables (decision 0164)
    "shift_rows": f"UPDATE buffer_rows SET pos = -(pos + %s) WHERE {_B} AND pos > %s AND pos < %s",
    # the moved rows' declarations (the rows moved first, to -(pos + n)), by their call ids
    "shift_calls": f"""WITH a AS (SELECT %s::bigint AS n, %s::bigint AS b, %s::bigint AS lo,
            %s::bigint AS hi)
        UPDATE buffer_call_ids SET declared_pos = -(declared_pos + (SELECT n FROM a))
        WHERE {_DECLARED.format(at="ctid", pos="-d.pos - a.n", a="a", ids=_ROW_IDS.format(
            where="r.buffer_id = a.b AND r.pos > -(a.hi + a.n) AND r.pos < -(a.lo + a.n)"))}""",
    # the declarations the moved rows' answers carry, moved on with them (an answer is a row:
    # shift_rows moves it): found on the rows' answers' key by the moved rows' call ids, each
    # at its old position; no flip (the column is in no unique key)
    "shift_carried": f"""WITH a AS (SELECT %s::bigint AS n, %s::bigint AS b, %s::bigint AS lo,
            %s::bigint AS hi)
        UPDATE buffer_rows SET declared_pos = declared_pos + (SELECT n FROM a)
        WHERE ctid = ANY (ARRAY(SELECT (SELECT t.ctid FROM buffer_rows t WHERE t.buffer_id = a.b
                AND t.call_id = d.id AND t.declared_pos = -d.pos - a.n)
            FROM a CROSS JOIN LATERAL ({_ROW_IDS.format(
                where="r.buffer_id = a.b AND r.pos > -(a.hi + a.n) AND r.pos < -(a.lo + a.n)")}) AS d))""",
    "unflip_rows": f"UPDATE buffer_rows SET pos = -pos WHERE {_B} AND pos < 0",
    # the declarations on the partial index of moved ones (buffer_call_ids_moved: empty but
    # mid-shift); the answers on the buffer's rows of the table, as the shift finds them (an
    # index on their position would make each answer's update a new row version, not HOT)
    "unflip_calls": f"UPDATE buffer_call_ids SET declared_pos = -declared_pos WHERE {_B} AND declared_pos < 0",
    "was_evicted": f"SELECT 1 FROM buffer_evicted WHERE {_B} AND call_id = %s",
    "evicted_insert": f"""INSERT INTO buffer_evicted (buffer_id, call_id, seq) VALUES (%s, %s,
        (SELECT COALESCE(MAX(seq), 0) + 1 FROM buffer_evicted WHERE {_B}))
        ON CONFLICT (buffer_id, call_id) DO UPDATE SET seq = excluded.seq""",
    "evicted_trim": f"""DELETE FROM buffer_evicted WHERE {_B} AND NOT archived AND seq <=
        (SELECT MAX(seq) FROM buffer_evicted WHERE {_B}) - %s""",
    # --- outside the editor ---
    # set_config runs in the FROM subquery (volatile: never pulled up), so before the lock.
    # The transaction's statements after it use generic plans: re-planning the append's
    # facts query at every execution (a custom plan) cost more than running it.
    "timed_lock": """SELECT pg_advisory_xact_lock(%s)
        FROM (SELECT set_config('lock_timeout', %s, true),
            set_config('plan_cache_mode', 'force_generic_plan', true)) AS bound""",
    "advisory_lock": "SELECT pg_advisory_xact_lock(%s)",
    "begin": "BEGIN",
    "commit": "COMMIT",
    "rollback": "ROLLBACK",
    # the buffer id first (a scalar subquery), so the rows come from the (buffer_id, pos) index
    "load_all": f"""SELECT body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE {_ADDR}) ORDER BY pos""",
    # run unprepared with the buffer id known, so the planner sees how many rows this
    # buffer has and walks the primary key backwards instead of sorting the buffer
    "load_last": """SELECT body FROM (SELECT pos, body FROM buffer_rows WHERE buffer_id = %s
        ORDER BY pos DESC LIMIT %s) AS tail ORDER BY pos""",
    "bodies_before": f"""SELECT pos, body FROM buffer_rows WHERE buffer_id =
        (SELECT id FROM buffers WHERE {_ADDR}) AND pos < %s ORDER BY pos""",
    # like load_last: unprepared, with the buffer id known
    "bodies_last_before": """SELECT pos, body FROM (SELECT pos, body FROM buffer_rows
        WHERE buffer_id = %s AND pos < %s ORDER BY pos DESC LIMIT %s) AS tail ORDER BY pos""",
    "count": f"SELECT count FROM {HEADS} AS b WHERE {_ADDR}",
    "database_bytes": "SELECT pg_database_size(current_database())",
    # an owner's bytes, exact: user_usage's upper bound less the buffers' unused reservations (migration 27)
    # (reserved.EXACT_BYTES with each owned buffer's bytes as derived with its tail, decision 0195)
    "usage_get": f"""SELECT u.bytes - (SELECT COALESCE(SUM(b.reserved - b.bytes - b.log_bytes), 0)
            FROM {HEADS} AS b WHERE b.owner = u.user_id), u.buffers, u.records
        FROM user_usage AS u WHERE u.user_id = %s""",
    "usage_delete": "DELETE FROM user_usage WHERE user_id = %s",
    "quotas_set": """SELECT set_config('flowmem.quota_bytes', %s, false),
        set_config('flowmem.quota_buffers', %s, false), set_config('flowmem.quota_records', %s, false)""",
    # a paged read (page_bodies): one statement, one snapshot; the page is cut by size on the
    # server (octet_length reads no TOASTed body), so the client gets the page only
    "page_head": f"SELECT id, id, version, count FROM {HEADS} AS b WHERE {_ADDR}",
    "page_floor": f"SELECT pos FROM buffer_rows WHERE {_B} AND pos < %s ORDER BY pos DESC LIMIT 1 OFFSET %s",
    "page_rows": f"SELECT pos, body FROM buffer_rows WHERE {_B} AND pos > %s AND pos < %s ORDER BY pos LIMIT %s",
}
_PAGE = """LEFT JOIN LATERAL (SELECT pos, body, fetched FROM (
        SELECT pos, body, COUNT(*) OVER () AS fetched, ROW_NUMBER() OVER (ORDER BY pos) AS n,
            SUM(octet_length(body)) OVER (ORDER BY pos ROWS UNBOUNDED PRECEDING)
                - octet_length(body) AS ahead
        FROM (SELECT pos, body FROM buffer_rows WHERE buffer_id = b.id AND pos > {low} AND pos < %s
            ORDER BY pos LIMIT %s) AS page) AS sized
    WHERE n = 1 OR (n <= %s AND ahead < %s)) AS p ON true"""
SQL |= {
    "page_read": f"""SELECT b.id, b.version, b.count, NULL::bigint, p.pos, p.body, p.fetched
    FROM {HEADS} b {_PAGE.format(low="%s")} WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s
    ORDER BY p.pos""",
    "page_read_last": f"""SELECT b.id, b.version, b.count, f.floor, p.pos, p.body, p.fetched
    FROM {HEADS} b CROSS JOIN LATERAL (SELECT (SELECT pos FROM buffer_rows WHERE buffer_id = b.id
        AND pos < %s ORDER BY pos DESC LIMIT 1 OFFSET %s) AS floor) AS f
    {_PAGE.format(low="GREATEST(%s, COALESCE(f.floor, -1))")}
    WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s ORDER BY p.pos""",
    # a read from the buffer's end (read_tail): the header (0), the system rows (1) and the
    # newest rows (2) in one statement; then older rows below a cursor, with the header
    # again, so that each batch is seen to be of the first one's buffer and version
    # (the first batch: the rows a token budget makes at the buffer's average, see tail.py)
    "tail_first": f"""WITH b AS (SELECT id, version, count, tokens, GREATEST(%s::bigint, LEAST(%s::bigint,
                CASE WHEN tokens > 0 THEN count * %s::bigint * 9 / (8 * tokens) + 8 ELSE 0 END)) AS take
            FROM {HEADS} AS h WHERE {_ADDR})
        SELECT 0, b.count, NULL::text, b.tokens, b.id, b.version, b.take FROM b
        UNION ALL (SELECT 1, r.pos, r.body, r.tokens::bigint, NULL::bigint, NULL::bigint, NULL::bigint
            FROM buffer_rows r WHERE r.buffer_id = (SELECT id FROM b) AND r.role = 'system' ORDER BY r.pos)
        UNION ALL (SELECT 2, r.pos, r.body, r.tokens::bigint, NULL, NULL, NULL FROM buffer_rows r
            WHERE r.buffer_id = (SELECT id FROM b) ORDER BY r.pos DESC LIMIT COALESCE((SELECT take FROM b), 0))""",
    "tail_more": f"""WITH b AS (SELECT id, version FROM {HEADS} AS h WHERE {_ADDR})
        SELECT 0, NULL::bigint, NULL::text, NULL::bigint, b.id, b.version, NULL::bigint FROM b
        UNION ALL (SELECT 2, r.pos, r.body, r.tokens::bigint, NULL, NULL, NULL FROM buffer_rows r
            WHERE r.buffer_id = (SELECT id FROM b) AND r.pos < %s ORDER BY r.pos DESC LIMIT %s)""",
    # a buffer stored before its rows were counted (migration 13): its tokens, counted
    "tail_uncounted": f"""WITH b AS (SELECT id, version FROM {HEADS} AS h WHERE {_ADDR})
        SELECT 0, NULL::bigint, NULL::text, NULL::bigint, b.id, b.version, NULL::bigint FROM b
        UNION ALL SELECT 3, NULL, NULL, (SELECT SUM(tokens) FROM buffer_rows, b
            WHERE buffer_id = b.id)::bigint, NULL, NULL, NULL
        UNION ALL SELECT 4, r.pos, r.body, NULL, NULL, NULL, NULL FROM b, buffer_rows r
            WHERE r.buffer_id = b.id AND r.tokens IS NULL""",
    "clear_rows": f"DELETE FROM buffer_rows WHERE {_B}",
    # a buffer's declarations and answers are one table's rows (migration 28): the second finds none left
    "clear_calls": f"DELETE FROM buffer_call_ids WHERE {_B}",
    "clear_answers": f"DELETE FROM buffer_call_ids WHERE {_B}",
    "clear_evicted": f"DELETE FROM buffer_evicted WHERE {_B}",
    "clear_header": "DELETE FROM buffers WHERE id = %s",
    "scope_buffers": "SELECT id, key FROM buffers WHERE scope = %s AND scope_id = %s ORDER BY id",
    "scope_records_delete": "DELETE FROM records WHERE scope = %s AND scope_id = %s",
    "sessions_of_owner": "SELECT id, status FROM sessions WHERE owner = %s ORDER BY id FOR UPDATE",
    "tokens_of_user_delete": f"DELETE FROM tokens WHERE user_id = %s AND {_HOLD_TOKEN} IS NOT NULL",
    "records_purge": """DELETE FROM records WHERE expires_at <= %s AND (scope, scope_id, key) IN
        (SELECT scope, scope_id, key FROM records WHERE expires_at <= %s LIMIT %s)""",
    # idempotency keys (docs/decisions/0031); a second insert of one key is a unique violation
    "idem_insert": """INSERT INTO idempotency_keys (owner, key, fingerprint, status, body, expires_at)
        VALUES (%s, %s, %s, %s, %s, %s)""",
    "idem_claim": """INSERT INTO idempotency_keys (owner, key, fingerprint, status, body, expires_at)
        VALUES (%s, %s, %s, 0, '', %s) ON CONFLICT (owner, key) DO UPDATE
        SET fingerprint = excluded.fingerprint, status = 0, body = '', expires_at = excluded.expires_at
        WHERE idempotency_keys.expires_at <= %s""",
    "idem_get": "SELECT fingerprint, status, body, expires_at FROM idempotency_keys WHERE owner = %s AND key = %s",
    "idem_drop_expired": "DELETE FROM idempotency_keys WHERE owner = %s AND key = %s AND expires_at <= %s",
    "idem_answer": "UPDATE idempotency_keys SET status = %s, body = %s WHERE owner = %s AND key = %s AND status = 0",
    "idem_release": "DELETE FROM idempotency_keys WHERE owner = %s AND key = %s AND status = 0",
    "idem_of_owner_delete": "DELETE FROM idempotency_keys WHERE owner = %s",
    "idem_purge": """DELETE FROM idempotency_keys WHERE expires_at <= %s AND (owner, key) IN
        (SELECT owner, key FROM idempotency_keys WHERE expires_at <= %s LIMIT %s)""",
    "record_get": f"SELECT value, expires_at FROM records WHERE {_ADDR}",
    "record_put": """INSERT INTO records (scope, scope_id, key, value, expires_at)
        VALUES (%s, %s, %s, %s, %s) ON CONFLICT (scope, scope_id, key) DO UPDATE
        SET value = excluded.value, expires_at = excluded.expires_at""",
    "record_delete": f"DELETE FROM records WHERE {_ADDR}",
    "session_insert": """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at,
        updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)""",
    "session_get": "SELECT id, name, owner, status, agent, metadata, created_at, updated_at FROM sessions WHERE id = %s",
    "sessions_all": """SELECT id, name, owner, status, agent, metadata, created_at, updated_at
        FROM sessions ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s""",
    "sessions_all_count": "SELECT COUNT(*) FROM sessions",
    "sessions_owned": """SELECT id, name, owner, status, agent, metadata, created_at, updated_at
        FROM sessions WHERE owner = %s ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s""",
    "sessions_owned_count": "SELECT COUNT(*) FROM sessions WHERE owner = %s",
    # a clear's running-turn guard: the share lock waits for a status change in flight
    "session_status_guard": "SELECT status FROM sessions WHERE id = %s FOR SHARE",
    "session_status_cas": """UPDATE sessions SET status = %s WHERE id = %s
        AND (%s::text[] IS NULL OR status = ANY(%s::text[]))""",
    "session_delete": f"DELETE FROM sessions WHERE id = %s AND {_HOLD_SESSION} IS NOT NULL RETURNING status",
    "transcript_seq_delete": "DELETE FROM transcript_seq WHERE session_id = %s",
    "transcript_insert": "INSERT INTO transcripts (session_id, seq, body) VALUES (%s, %s, %s)",
    "transcript_page_asc": """SELECT seq, body FROM transcripts WHERE session_id = %s AND seq > %s
        AND seq < %s ORDER BY seq LIMIT %s""",
    "transcript_page_desc": """SELECT seq, body FROM transcripts WHERE session_id = %s AND seq > %s
        AND seq < %s ORDER BY seq DESC LIMIT %s""",
    "transcript_update": "UPDATE transcripts SET body = %s WHERE session_id = %s AND seq = %s",
    "transcript_delete": "DELETE FROM transcripts WHERE session_id = %s AND seq = %s",
    "transcript_delete_all": "DELETE FROM transcripts WHERE session_id = %s",
    "token_insert": """INSERT INTO tokens (id, token_hash, user_id, permissions, created_at, revoked,
        label) VALUES (%s, %s, %s, %s, %s, %s, %s)""",
    "token_by_hash": """SELECT id, token_hash, user_id, permissions, created_at, revoked, label
        FROM tokens WHERE token_hash = %s""",
    "tokens_all": """SELECT id, token_hash, user_id, permissions, created_at, revoked, label
        FROM tokens ORDER BY created_at, id""",
    # each takes the exclusive form of the lock an append holds shared (see HELD below)
    "token_revoke": f"UPDATE tokens SET revoked = TRUE WHERE id = %s AND {_HOLD_TOKEN} IS NOT NULL",
    "schema_table": """CREATE TABLE IF NOT EXISTS flowmem_schema (
        version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)""",
    "schema_version": "SELECT COALESCE(MAX(version), 0) FROM flowmem_schema",
    "schema_insert": "INSERT INTO flowmem_schema (version, applied_at) VALUES (%s, %s)",
    "token_valid": "SELECT 1 FROM tokens WHERE id = %s AND NOT revoked",
}

# Write guards (docs/decisions/0014): a guarded write locks the rows its guard reads
# until it commits: the token FOR SHARE (a revocation or an erasure, which update or
# delete it, waits for the write, and a write waiting for them finds it gone) and
# the session FOR KEY SHARE (its delete waits likewise; status updates do not).
# Always the token first, then the session, then the buffer's advisory lock: the
# order an erasure takes them in, so the two never wait for each other in a cycle.
# An uncorrelated EXISTS runs once before its query's rows (an initPlan), and
# ``FOR SHARE`` keeps the planner from turning it into a join, so that order holds.
_TOKEN_VALID = "EXISTS (SELECT 1 FROM tokens WHERE id = %s AND NOT revoked FOR SHARE)"
GUARDS: dict[str, str] = {
    "token": _TOKEN_VALID,
    "session": "EXISTS (SELECT 1 FROM sessions WHERE id = %s FOR KEY SHARE)",
    "both": f"EXISTS (SELECT 1 FROM sessions WHERE id = %s AND {_TOKEN_VALID} FOR KEY SHARE)",
    # a claim (docs/decisions/0032): the session exists AND is owned by the claimed owner
    "owned": """EXISTS (SELECT 1 FROM sessions WHERE id = %s
        AND owner IS NOT DISTINCT FROM %s::text FOR KEY SHARE)""",
    "both_owned": f"""EXISTS (SELECT 1 FROM sessions WHERE id = %s
        AND owner IS NOT DISTINCT FROM %s::text AND {_TOKEN_VALID} FOR KEY SHARE)""",
    "same": """EXISTS (SELECT 1 FROM sessions WHERE id = %s AND owner IS NOT DISTINCT FROM
        %s::text AND created_at = %s::double precision FOR KEY SHARE)""",
    "both_same": f"""EXISTS (SELECT 1 FROM sessions WHERE id = %s AND owner IS NOT DISTINCT FROM
        %s::text AND created_at = %s::double precision AND {_TOKEN_VALID} FOR KEY SHARE)""",
}
# A claiming write's first statement (in the append's pipeline: no round trip of
# its own): create the session unless it exists (or the token is not valid, or its
# owner is at the limit). CASE evaluates its branches in order and an initPlan runs
# only when its branch is reached, so the token is locked first (the order of
# docs/decisions/0014) and the owner's sessions are counted only for a new session.
# ON CONFLICT waits for a concurrent first write of the same id and then does nothing.
_ENSURE = """INSERT INTO sessions (id, name, owner, status, agent, metadata, created_at,
    updated_at) SELECT %s, '', %s::text, 'idle', NULL, '{{}}', %s::double precision,
    %s::double precision WHERE CASE {token}
    WHEN EXISTS (SELECT 1 FROM sessions WHERE id = %s) THEN FALSE
    WHEN EXISTS (SELECT 1 FROM deleted_sessions WHERE id = %s) THEN FALSE
    WHEN %s::bigint = 0 OR %s::text IS NULL THEN TRUE
    ELSE (SELECT COUNT(*) FROM sessions WHERE owner = %s::text) < %s::bigint END
    ON CONFLICT (id) DO NOTHING"""
SQL["session_ensure"] = _ENSURE.format(token="")
SQL["session_ensure@token"] = _ENSURE.format(token=f"WHEN NOT {_TOKEN_VALID} THEN FALSE")
SQL["session_owner"] = "SELECT owner FROM sessions WHERE id = %s"
SQL["session_deleted"] = "SELECT 1 FROM deleted_sessions WHERE id = %s"
SQL["session_remember_deleted"] = """INSERT INTO deleted_sessions (id, deleted_at) VALUES (%s, %s)
    ON CONFLICT (id) DO UPDATE SET deleted_at = excluded.deleted_at"""
_GUARDED: dict[str, str] = {
    "guard": "SELECT 1 WHERE {guard}",
    "session_insert": """INSERT INTO sessions (id, name, owner, status, agent, metadata,
        created_at, updated_at) SELECT %s, %s, %s, %s, %s, %s, %s::double precision,
        %s::double precision WHERE {guard}""",
    "record_put": """INSERT INTO records (scope, scope_id, key, value, expires_at)
        SELECT %s, %s, %s, %s, %s::double precision WHERE {guard}
        ON CONFLICT (scope, scope_id, key) DO UPDATE
        SET value = excluded.value, expires_at = excluded.expires_at""",
    "transcript_seq_next": """INSERT INTO transcript_seq (session_id, last_seq) SELECT %s, 1
        WHERE {guard} ON CONFLICT (session_id) DO UPDATE
        SET last_seq = transcript_seq.last_seq + 1 RETURNING last_seq""",
}
SQL.update(guarded(_GUARDED, GUARDS))
merge(SQL, checkpoint_tables.SQL, conversation_tables.SQL, adk_tables.SQL, archive_tables.SQL, repair_tables.SQL)

# What the append's editor will ask, in one statement run right after the lock
# (its own statement: a statement's snapshot predates a lock it waits for):
# the header; for the call ids the incoming rows name (a text[]), whether each is
# declared and its first answer; and, for an append with a user turn, the open
# calls with the end of each declaring turn's result run (the editor's
# ``run_end``) and the position of the row after that end (``next_pos``, where
# healing inserts). One variant per shape (``append_facts@ids``, ``@open``,
# ``@ids+open`` or just the header): a part not needed is not in the statement,
# so the server neither plans nor starts it (docs/decisions/0028).
#
# The statements run with generic plans, planned once per connection, often on
# tables with no statistics yet (a new database). Each part is written so that
# every plan the server may pick stays O(1) in the buffer's length
# (docs/decisions/0033): a lookup per id is a subquery in the select list (a
# subplan on the (buffer_id, call_id) key, never turned into a join that scans
# the buffer's calls), and the open calls are the header's list (``unanswered``,
# migration 26, decision 0153: no index of them), read only when it is not empty.
# No open call gives NULL, not '[]': no JSON to parse. The open
# calls come grouped by declaring turn (its ids in order, its position, its run's
# end, the row after it): a run's end is found once per turn, on the primary key,
# past that run's tool rows (decision 0068), not once per open call.
_FACT_IDS = """(SELECT json_agg(json_build_array(i.id,
        EXISTS (SELECT 1 FROM buffer_calls c WHERE c.buffer_id = b.id AND c.call_id = i.id),
        a.pos, a.healed,
        EXISTS (SELECT 1 FROM buffer_evicted v WHERE v.buffer_id = b.id AND v.call_id = i.id)))
    FROM unnest(%s::text[]) AS i(id) LEFT JOIN LATERAL (SELECT pos, healed FROM buffer_answers
        WHERE buffer_id = b.id AND call_id = i.id ORDER BY pos LIMIT 1) AS a ON TRUE)"""
_FACT_OPEN = """CASE WHEN b.unanswered <> '[]' THEN (SELECT json_agg(json_build_array(g.ids,
        g.declared_pos, g.run_end, (SELECT MIN(n.pos) FROM buffer_rows n
            WHERE n.buffer_id = b.id AND n.pos > g.run_end)) ORDER BY g.declared_pos)
        FROM (SELECT t.declared_pos, t.ids, COALESCE((SELECT MAX(r.pos)
            FROM buffer_rows r WHERE r.buffer_id = b.id AND r.pos > t.declared_pos
            AND r.pos < COALESCE((SELECT s.pos FROM buffer_rows s
            WHERE s.buffer_id = b.id AND s.pos > t.declared_pos AND s.role <> 'tool'
            ORDER BY s.pos LIMIT 1), 9223372036854775807)), t.declared_pos) AS run_end
        FROM (SELECT (o.e ->> 1)::bigint AS declared_pos,
                array_agg(o.e ->> 0 ORDER BY (o.e ->> 2)::integer) AS ids
            FROM json_array_elements(b.unanswered::json) AS o(e)
            GROUP BY (o.e ->> 1)::bigint) AS t) AS g) END"""
_FACTS = ("append_facts", "append_facts@ids", "append_facts@open", "append_facts@ids+open")
for _ids, _open, _suffix in (
    (False, False, ""),
    (True, False, "@ids"),
    (False, True, "@open"),
    (True, True, "@ids+open"),
):
    SQL[f"append_facts{_suffix}"] = (
        f"SELECT {_COUNTERS}, b.unanswered, "
        + (_FACT_IDS if _ids else "NULL")
        + ", "
        + (_FACT_OPEN if _open else "NULL")
        + f", {_TAIL_HEAD} FROM {_TAILED} WHERE {_ADDR}"
    )

# An append decided on known facts (flowmem.store.known, docs/decisions/0039), in
# one round trip. After the lock, ``append_known`` checks the facts the rules were
# given and records the verdict for the rest of the transaction: the header's id
# and version, and its count, last major and bytes (a flowmem from before migration
# 6, during a rolling upgrade, changes them without the version); each id assumed
# new neither declared nor answered (a subplan per id, as in the facts above). Each
# write's ``?`` variant runs only when the verdict is true; parameters keep their
# types in the SELECT forms by casts. ``buffer_known`` reads what the next append may
# assume: the header with its list of unanswered calls (a buffer with more than
# MAX_KNOWN_OPEN of them is not remembered). The plain path runs it after its writes;
# after a true verdict the store works the same out from the writes it sent
# (``store.postgres.after.known_after``, decision 0066), with no statement; after a
# false one nothing was written and the plain path appends (and reads it).
#
# Since decision 0165 the check is no statement of its own: it is the first part of
# the writes' first statement (``known_check…``: the check as a CTE ``known``, its
# verdict ``v`` and its guard's ``ok``, read back by the last part, ``known_verdict``),
# and every write's ``?`` variant reads ``known``. The check keeps its statement's
# snapshot, taken after the lock's statement (a statement's snapshot predates a lock
# it waits for), and the writes of that statement run on the same snapshot, so they
# read what the check read. The check also sets ``flowmem.known`` for the rest of the
# transaction: the writes the pipeline sends as a later statement (two writes of one
# table, ``pipeline.WRITES``) read it there (``known_again``: ``known`` from the setting).
_KNOWN = "(SELECT v FROM known)"
# (since decision 0195 the header's counters as derived with its tail, the version as stored —
# the check compares the stored header — and the tail's rows, bytes and tokens, and the room)
SQL["buffer_known"] = f"""SELECT b.id, b.version, {_D['count']}, {_D['last_major']}, {_D['bytes']},
    b.unanswered, t.n, t.size, t.tok, {ROOM.format(h='b')} FROM {_TAILED} WHERE {_ADDR}"""
# no id assumed new (a message without calls, a result of a listed call: most appends):
# the header's check alone, no subplan per id to start (decision 0158)
# (since decision 0199 also the room an append may grow in unwritten, when one was read: an
# owner's give-back in another process lowers a reservation without moving the version)
_KNOWN_HEAD = """EXISTS (SELECT 1 FROM buffers WHERE id = %s AND version = %s
        AND count = %s AND last_major = %s AND bytes = %s
        AND reserved - log_bytes >= %s::bigint)"""
_KNOWN_FRESH = """COALESCE((SELECT bool_and(
        NOT EXISTS (SELECT 1 FROM buffer_calls c WHERE c.buffer_id = %s AND c.call_id = i.id)
        AND NOT EXISTS (SELECT 1 FROM buffer_answers a WHERE a.buffer_id = %s AND a.call_id = i.id)
        AND NOT EXISTS (SELECT 1 FROM buffer_evicted v WHERE v.buffer_id = %s AND v.call_id = i.id))
    FROM unnest(%s::text[]) AS i(id)), TRUE)"""
# the check alone, as a statement (its parts' plans are tested on their own: the pages
# they touch, tests/store/test_postgres_facts_plans.py); a guarded one's ``ok`` is its guard
_VERDICT = (
    "SELECT set_config('flowmem.known', ({held})::text, true)::boolean AS v, {ok} AS ok{source}"
)
SQL["append_known"] = _VERDICT.format(
    held=f"{_KNOWN_HEAD} AND {_KNOWN_FRESH}", ok="TRUE", source=""
)
SQL["append_known_head"] = _VERDICT.format(held=_KNOWN_HEAD, ok="TRUE", source="")
SQL["row_insert?"] = f"{SQL['row_insert']} WHERE {_KNOWN}"
SQL["call_insert?"] = f"""INSERT INTO buffer_call_ids (buffer_id, call_id, declared_pos, ord, answered)
    SELECT %s::bigint, %s::text, %s::bigint, %s::integer,
        EXISTS (SELECT 1 FROM buffer_answers WHERE {_B} AND call_id = %s)
    WHERE {_KNOWN}"""
for _gone, _with in _GONE_WITH.items():
    SQL[_gone], SQL[f"{_gone}/with"] = f"WITH {_with} {_GONE[_gone]}", _with
    SQL[f"{_gone}/main"] = _GONE[_gone]
SQL["header_update?"] = f"{SQL['header_update']} AND {_KNOWN}"
SQL["header_listed?"] = f"{SQL['header_listed']} AND {_KNOWN}"

# A guarded append holds its guard with advisory locks, not row locks (decision 0127):
# a row lock (the token FOR SHARE, the session FOR KEY SHARE) writes a WAL record and
# dirties its page on every append (two records, 108 bytes; a token shared by
# concurrent appends becomes a MultiXact). The lock statement takes the token's and
# the session's keys in shared mode, in that order, then the buffer's (the order of
# docs/decisions/0014); a revocation, an erasure's token delete and a session delete
# take the same key exclusively (``token_revoke``, ``tokens_of_user_delete``,
# ``session_delete``), so each waits for the appends holding it, and an append that
# comes later waits for them. The guard is checked in the next statement, whose
# snapshot is taken once the locks are held: the facts (``append_facts…@kind``: its
# first column) or, on known facts, the verdict (``append_known@kind``: in the
# verdict, and its second column). The other guarded writes keep their row locks.
HELD: dict[str, str] = {
    "token": f"pg_advisory_xact_lock_shared({TOKEN_KEYS}, hashtext(%s::text))",
    "session": f"pg_advisory_xact_lock_shared({SESSION_KEYS}, hashtext(%s::text))",
}
HELD["both"] = f"{HELD['token']}, {HELD['session']}"  # evaluated in order: the token first
for _held, _holds in HELD.items():
    SQL[f"timed_lock_held@{_held}"] = f"""SELECT pg_advisory_xact_lock(%s)
        FROM (SELECT set_config('lock_timeout', %s, true),
            set_config('plan_cache_mode', 'force_generic_plan', true), {_holds}) AS bound"""
for _kind, _guard in GUARDS.items():
    _checked = _guard.replace(" FOR KEY SHARE", "").replace(" FOR SHARE", "")
    for _facts in _FACTS:
        SQL[f"{_facts}@{_kind}"] = f"""SELECT g.ok, f.* FROM (SELECT {_checked} AS ok) AS g
            LEFT JOIN LATERAL ({SQL[_facts]}) AS f ON TRUE"""
    # OFFSET 0: the subquery is not pulled up into the verdict, which reads g.ok twice (in v
    # and as ok): pulled up, each read was a copy of the check, tokens and sessions read twice
    # (decision 0174; tests/store/postgres/test_guard_once.py)
    _source = f" FROM (SELECT {_checked} AS ok OFFSET 0) AS g"
    SQL[f"append_known_head@{_kind}"] = _VERDICT.format(
        held=f"{_KNOWN_HEAD} AND g.ok", ok="g.ok", source=_source
    )
    SQL[f"append_known@{_kind}"] = _VERDICT.format(
        held=f"{_KNOWN_HEAD} AND {_KNOWN_FRESH} AND g.ok", ok="g.ok", source=_source
    )
# The check as the first part of the writes' statement (decision 0165, see above): its
# CTE ``known`` lifted to the statement's top by the pipeline (``/with``); its own part
# (``/main``) is read by no one (a CTE no part reads is not planned). ``known_verdict``:
# the statement's last part, its rows the verdict and the guard's. ``known_again``: the
# first part of the writes' later statements, the verdict as the check set it.
for _check in [name for name in SQL if name.startswith(("append_known@", "append_known_head"))] + [
    "append_known"
]:
    _part_name = "known_check" + _check.removeprefix("append_known")
    SQL[_part_name] = f"WITH known AS MATERIALIZED ({SQL[_check]}) SELECT v, ok FROM known"
    SQL[f"{_part_name}/with"] = f"known AS MATERIALIZED ({SQL[_check]})"
    SQL[f"{_part_name}/main"] = "SELECT v, ok FROM known"
SQL["known_verdict"] = "SELECT v, ok FROM known"
SQL["known_again/with"] = (
    "known AS MATERIALIZED (SELECT current_setting('flowmem.known')::boolean AS v, TRUE AS ok)"
)
SQL["known_again/main"] = "SELECT v, ok FROM known"
SQL["known_again"] = f"WITH {SQL['known_again/with']} {SQL['known_again/main']}"
