"""The checkpoint statements, written once and spelled per backend (placeholder, blob type).

Both backends speak the same SQL here (``ON CONFLICT``, row values, ``LIMIT``); only
the placeholder differs (the tables' blob column type is in each backend's migration). ``statements`` is called by ``checkpoints.sqlite`` and
``checkpoints.postgres``; nothing else reads it.
"""

from __future__ import annotations

_CP_COLUMNS = (
    "thread_id, ns, checkpoint_id, parent_id, type, checkpoint, metadata_type, metadata, "
    "run_id, versions"
)
_BUFFER = "(SELECT id FROM buffers WHERE scope = 'session' AND scope_id = {p} AND key = {p})"


def statements(p: str, heads: str = "buffers") -> dict[str, str]:
    """The checkpoint statements with placeholder ``p`` (``?`` or ``%s``).

    ``heads``: the headers as read (PostgreSQL's ``flowmem.store.headers.HEADS``, decision 0195).
    """
    values = ", ".join([p] * 10)
    text = f"CAST({p} AS TEXT)"
    return {
        "cp_insert": f"""INSERT INTO lg_checkpoints ({_CP_COLUMNS}) VALUES ({values})
            ON CONFLICT (thread_id, ns, checkpoint_id) DO UPDATE SET parent_id = excluded.parent_id,
            type = excluded.type, checkpoint = excluded.checkpoint,
            metadata_type = excluded.metadata_type, metadata = excluded.metadata,
            run_id = excluded.run_id, versions = excluded.versions""",
        "cp_latest_id": f"""SELECT checkpoint_id FROM lg_checkpoints
            WHERE thread_id = {p} AND ns = {p} ORDER BY checkpoint_id DESC LIMIT 1""",
        "cp_get": f"""SELECT {_CP_COLUMNS} FROM lg_checkpoints
            WHERE thread_id = {p} AND ns = {p} AND checkpoint_id = {p}""",
        "cp_get_latest": f"""SELECT {_CP_COLUMNS} FROM lg_checkpoints
            WHERE thread_id = {p} AND ns = {p} ORDER BY checkpoint_id DESC LIMIT 1""",
        # a page of checkpoints newest first, after the last one of the previous page;
        # each optional filter is NULL when absent
        "cp_page": f"""SELECT {_CP_COLUMNS} FROM lg_checkpoints
            WHERE ({text} IS NULL OR thread_id = {p}) AND ({text} IS NULL OR ns = {p})
            AND ({text} IS NULL OR checkpoint_id = {p}) AND ({text} IS NULL OR checkpoint_id < {p})
            AND (checkpoint_id, thread_id, ns) < ({p}, {p}, {p})
            ORDER BY checkpoint_id DESC, thread_id DESC, ns DESC LIMIT {p}""",
        "cp_thread_rows": f"""SELECT ns, checkpoint_id, versions FROM lg_checkpoints
            WHERE thread_id = {p}""",
        "cp_delete_one": f"""DELETE FROM lg_checkpoints
            WHERE thread_id = {p} AND ns = {p} AND checkpoint_id = {p}""",
        "cp_of_run": f"SELECT thread_id, ns, checkpoint_id FROM lg_checkpoints WHERE run_id = {p}",
        "cp_copy": f"""INSERT INTO lg_checkpoints ({_CP_COLUMNS})
            SELECT {p}, ns, checkpoint_id, parent_id, type, checkpoint, metadata_type, metadata,
            run_id, versions FROM lg_checkpoints WHERE thread_id = {p}
            ON CONFLICT (thread_id, ns, checkpoint_id) DO NOTHING""",
        "cp_drop_thread": f"DELETE FROM lg_checkpoints WHERE thread_id = {p}",
        "blob_insert": f"""INSERT INTO lg_blobs (thread_id, ns, channel, version, type, blob)
            VALUES ({p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING""",
        "blob_get": f"""SELECT type, blob FROM lg_blobs
            WHERE thread_id = {p} AND ns = {p} AND channel = {p} AND version = {p}""",
        "blob_keys": f"SELECT ns, channel, version, type, blob FROM lg_blobs WHERE thread_id = {p}",
        "blob_delete": f"""DELETE FROM lg_blobs
            WHERE thread_id = {p} AND ns = {p} AND channel = {p} AND version = {p}""",
        "blob_copy": f"""INSERT INTO lg_blobs (thread_id, ns, channel, version, type, blob)
            SELECT {p}, ns, channel, version, type, blob FROM lg_blobs WHERE thread_id = {p}
            ON CONFLICT DO NOTHING""",
        "blob_drop_thread": f"DELETE FROM lg_blobs WHERE thread_id = {p}",
        "write_insert": f"""INSERT INTO lg_writes
            (thread_id, ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
            VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING""",
        "write_upsert": f"""INSERT INTO lg_writes
            (thread_id, ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
            VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})
            ON CONFLICT (thread_id, ns, checkpoint_id, task_id, idx) DO UPDATE SET
            channel = excluded.channel, type = excluded.type, blob = excluded.blob,
            task_path = excluded.task_path""",
        "writes_get": f"""SELECT task_id, idx, channel, type, blob, task_path FROM lg_writes
            WHERE thread_id = {p} AND ns = {p} AND checkpoint_id = {p} ORDER BY task_id, idx""",
        "writes_delete_one": f"""DELETE FROM lg_writes
            WHERE thread_id = {p} AND ns = {p} AND checkpoint_id = {p}""",
        "writes_orphans_delete": f"""DELETE FROM lg_writes WHERE thread_id = {p} AND NOT EXISTS
            (SELECT 1 FROM lg_checkpoints AS c WHERE c.thread_id = lg_writes.thread_id
            AND c.ns = lg_writes.ns AND c.checkpoint_id = lg_writes.checkpoint_id)""",
        "writes_copy": f"""INSERT INTO lg_writes
            (thread_id, ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
            SELECT {p}, ns, checkpoint_id, task_id, idx, channel, type, blob, task_path
            FROM lg_writes WHERE thread_id = {p} ON CONFLICT DO NOTHING""",
        "writes_drop_thread": f"DELETE FROM lg_writes WHERE thread_id = {p}",
        "line_head": f"""SELECT id, count FROM {heads} AS b
            WHERE scope = 'session' AND scope_id = {p} AND key = {p}""",
        "line_rows": f"""SELECT body FROM buffer_rows WHERE buffer_id = {_BUFFER.format(p=p)}
            ORDER BY pos LIMIT {p}""",
        "line_all": f"""SELECT body FROM buffer_rows WHERE buffer_id = {p} ORDER BY pos""",
        "line_buffers": f"""SELECT id, key FROM buffers WHERE scope = 'session' AND scope_id = {p}
            AND key >= {p} AND key < {p} ORDER BY key""",
        # the rows answering a call id in a thread's lines (what a write's repairs compare with)
        "line_answers": f"""SELECT b.key, r.body FROM buffers b
            JOIN buffer_answers a ON a.buffer_id = b.id
            JOIN buffer_rows r ON r.buffer_id = a.buffer_id AND r.pos = a.pos
            WHERE b.scope = 'session' AND b.scope_id = {p} AND b.key >= {p} AND b.key < {p}
            AND a.call_id = {p}""",
    }
