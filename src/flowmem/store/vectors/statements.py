"""The vectors' statements, written once and spelled per backend (the placeholder, the key's collation).

``statements`` is called by ``vectors.sqlite`` and ``vectors.postgres``; nothing else
reads it. ``key`` is how a statement compares and orders record keys: ``v.key``, or
``v.key COLLATE "C"`` on a PostgreSQL database whose collation is not C (code-point
order, as ``flowmem.store.listing`` reads records).
"""

from __future__ import annotations

_RECORD = "r.scope = v.scope AND r.scope_id = v.scope_id AND r.key = v.key"
# On PostgreSQL a vector's record is read by a lateral subquery, not a join: a join's
# plan on a table PostgreSQL has not analyzed yet can match on the scope alone
# (measured: 600 ms for 1,000 vectors, against 10 ms); the subquery always looks the
# record up by its key. SQLite's CROSS JOIN reads the vectors first, the same way.


def statements(p: str, key: str = "v.key", lock: str = "", lateral: bool = False) -> dict[str, str]:
    """The vectors' statements with placeholder ``p``; ``lock``: the clause that locks space rows.

    ``lateral``: a scan reads each vector's record by a lateral subquery (PostgreSQL,
    see above), else by a join SQLite drives from the vectors (``CROSS JOIN``).
    """
    if lateral:  # LIMIT 1: the subquery is not pulled up into a join
        record = f"CROSS JOIN LATERAL (SELECT r.value, r.expires_at FROM records r WHERE {_RECORD} LIMIT 1) r"
    else:
        record = f"CROSS JOIN records r ON {_RECORD}"
    # one read of the record per vector, in key order alone (a record's rows together:
    # the primary key's order, which no sort has to restore)
    scan = f"""SELECT v.key, CASE WHEN {p} THEN r.value ELSE '' END, v.vec
        FROM record_vectors v {record}
        WHERE v.scope = {p} AND v.scope_id = {p} AND {key} >= {p} {{end}} AND v.space = {p}
        AND (r.expires_at IS NULL OR r.expires_at > {p}) ORDER BY {key} LIMIT {p}"""
    # what a cached scan keeps (cache.py): every vector with its record's value and expiry
    load = f"""SELECT v.key, r.value, r.expires_at, v.vec FROM record_vectors v {record}
        WHERE v.scope = {p} AND v.scope_id = {p} AND {key} >= {p} {{end}} AND v.space = {p}
        ORDER BY {key} LIMIT {p}"""
    insert = f"""INSERT INTO record_vectors (scope, scope_id, key, space, field, ord, owner, vec)
        SELECT scope, scope_id, key, {p}, {p}, {p}, owner, {p} FROM records
        WHERE scope = {p} AND scope_id = {p} AND key = {p}"""
    return {
        "vectors_spaces": f"SELECT id, state, name, dims FROM vector_spaces WHERE collection = {p} {lock}",
        "vectors_space_add": f"""INSERT INTO vector_spaces (collection, state, name, dims)
            VALUES ({p}, {p}, {p}, {p}) ON CONFLICT (collection, state) DO NOTHING""",
        "vectors_space_drop": f"DELETE FROM vector_spaces WHERE id = {p}",
        "vectors_space_promote": f"UPDATE vector_spaces SET state = 'active' WHERE id = {p}",
        "vectors_clear": f"DELETE FROM record_vectors WHERE scope = {p} AND scope_id = {p} AND key = {p}",
        "vectors_clear_space": f"""DELETE FROM record_vectors
            WHERE scope = {p} AND scope_id = {p} AND key = {p} AND space = {p}""",
        "vectors_drop_space": f"DELETE FROM record_vectors WHERE space = {p}",
        "vectors_insert": insert,
        "vectors_fill": f"{insert} AND value = {p}",
        "vectors_scan": scan.format(end=f"AND {key} < {p}"),
        "vectors_scan_open": scan.format(end=""),
        "vectors_load": load.format(end=f"AND {key} < {p}"),
        "vectors_load_open": load.format(end=""),
        "vectors_generation": f"SELECT n FROM vector_generations WHERE collection = {p}",
        "vectors_pending": f"""SELECT s.scope, s.scope_id, s.key, s.field, s.ord, s.value FROM (
            SELECT v.scope AS scope, v.scope_id AS scope_id, v.key AS key, v.field AS field,
                v.ord AS ord, (SELECT r.value FROM records r WHERE {_RECORD}) AS value
            FROM record_vectors v
            WHERE v.space = {p} AND (v.scope, v.scope_id, v.key) > ({p}, {p}, {p})
            AND NOT EXISTS (SELECT 1 FROM record_vectors n WHERE n.scope = v.scope
                AND n.scope_id = v.scope_id AND n.key = v.key AND n.space = {p})) s
            WHERE s.value IS NOT NULL ORDER BY s.scope, s.scope_id, s.key, s.field, s.ord LIMIT {p}""",
        "vectors_pending_count": f"""SELECT COUNT(*) FROM record_vectors v WHERE v.space = {p}
            AND NOT EXISTS (SELECT 1 FROM record_vectors n WHERE n.scope = v.scope
                AND n.scope_id = v.scope_id AND n.key = v.key AND n.space = {p})""",
    }
