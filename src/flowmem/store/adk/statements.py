"""The ADK session statements, written once and spelled per backend (placeholder, row lock).

Both backends speak the same SQL here; only the placeholder differs, and PostgreSQL
locks the rows a write reads (``FOR UPDATE``) where SQLite's write transaction
already excludes every other writer. ``statements`` is called by ``adk.sqlite`` and
``adk.postgres``; nothing else reads it.
"""

from __future__ import annotations

_SESSION = "id, app_name, user_id, state, revision, last_event, created_at, updated_at, adk_id"
_KEY = "app_name = {p} AND user_id = {p} AND adk_id = {p}"
"""A session by its ADK key (app, user, ADK id: decision 0100)."""


def statements(
    p: str, lock: str, collate: str = "", stamp: str = "born", heads: str = "buffers"
) -> dict[str, str]:
    """The ADK statements with placeholder ``p`` (``?`` or ``%s``), row lock ``lock``.

    ``collate`` makes ids sort by code point, as in every backend (PostgreSQL: ``"C"``).
    ``stamp``: the ``buffers`` column no other buffer ever had (SQLite's ``born``,
    PostgreSQL's ``id``), which with ``version`` says the events buffer is unchanged.
    ``heads``: the headers as read (PostgreSQL's ``flowmem.store.headers.HEADS``, decision 0195).
    """
    order = f"ORDER BY updated_at, user_id{collate}, adk_id{collate}"
    key = _KEY.format(p=p)
    # whether adk_events holds every event of a session's buffer as it is now (decision 0133)
    whole = f"""SELECT CASE WHEN b.{stamp} = s.events_stamp AND b.version = s.events_version
            THEN 1 ELSE 0 END, b.count FROM adk_sessions AS s LEFT JOIN {heads} AS b
            ON b.scope = 'session' AND b.scope_id = s.id AND b.key = 'adk' WHERE s.id = {p}"""
    return {
        "adk_events_whole": whole,
        "adk_events_stamp": f"""SELECT {stamp}, version FROM {heads} AS b
            WHERE scope = 'session' AND scope_id = {p} AND key = 'adk'""",
        "adk_events_mark": f"""UPDATE adk_sessions SET events_stamp = {p}, events_version = {p}
            WHERE id = {p}""",
        "adk_events_clear": f"DELETE FROM adk_events WHERE session_id = {p}",
        "adk_event_put": f"""INSERT INTO adk_events (session_id, seq, ts, event)
            VALUES ({p}, {p}, {p}, {p})""",
        # the last events at or after a time, newest first (GetSessionConfig in SQL)
        "adk_events_read": f"""SELECT event FROM adk_events WHERE session_id = {p} AND ts >= {p}
            ORDER BY seq DESC LIMIT {p}""",
        "adk_session_insert": f"""INSERT INTO adk_sessions ({_SESSION})
            VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING""",
        "adk_session_taken": f"SELECT 1 FROM adk_sessions WHERE id = {p}",
        "adk_session_get": f"SELECT {_SESSION} FROM adk_sessions WHERE {key}",
        "adk_session_lock": f"SELECT {_SESSION} FROM adk_sessions WHERE {key}{lock}",
        "adk_session_update": f"""UPDATE adk_sessions SET state = {p}, revision = {p},
            last_event = {p}, updated_at = {p} WHERE id = {p}""",
        "adk_sessions_of_user": f"""SELECT {_SESSION} FROM adk_sessions
            WHERE app_name = {p} AND user_id = {p} {order}""",
        "adk_sessions_of_app": f"SELECT {_SESSION} FROM adk_sessions WHERE app_name = {p} {order}",
        "adk_session_drop": f"DELETE FROM adk_sessions WHERE id = {p}",
        "adk_app_get": f"SELECT state FROM adk_app_states WHERE app_name = {p}",
        "adk_app_ensure": f"""INSERT INTO adk_app_states (app_name, state) VALUES ({p}, '{{}}')
            ON CONFLICT (app_name) DO NOTHING""",
        "adk_app_lock": f"SELECT state FROM adk_app_states WHERE app_name = {p}{lock}",
        "adk_app_put": f"UPDATE adk_app_states SET state = {p} WHERE app_name = {p}",
        "adk_user_get": f"SELECT state FROM adk_user_states WHERE app_name = {p} AND user_id = {p}",
        "adk_user_ensure": f"""INSERT INTO adk_user_states (app_name, user_id, state)
            VALUES ({p}, {p}, '{{}}') ON CONFLICT (app_name, user_id) DO NOTHING""",
        "adk_user_lock": f"""SELECT state FROM adk_user_states
            WHERE app_name = {p} AND user_id = {p}{lock}""",
        "adk_user_put": f"UPDATE adk_user_states SET state = {p} WHERE app_name = {p} AND user_id = {p}",
        "adk_users_of_app": f"SELECT user_id, state FROM adk_user_states WHERE app_name = {p}",
        "adk_user_states_drop": f"DELETE FROM adk_user_states WHERE user_id = {p}",
    }
