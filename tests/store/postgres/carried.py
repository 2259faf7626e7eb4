"""The oracle of PostgreSQL's call-id layout since its migration 34 (decision 0190), from the stored rows alone.

Every declaration is in exactly one place: the header's list (its call unanswered), or a
row of ``buffer_call_ids`` with its ``ord`` set (its call answered: the answer's own row,
which carries it, or a row of its own); every answer a row with its ``answer_pos`` set;
no row holds neither. ``layout_faults`` recomputes that from the buffer's rows.
"""

from __future__ import annotations

import json
from typing import Any

from flowmem.core import call_ids, is_healed, result_id


def layout_faults(conn: Any) -> list[str]:
    """What differs between each buffer's stored call ids and what its rows declare and answer."""
    faults: list[str] = []
    for bid, unanswered in conn.execute(
        "SELECT id, unanswered FROM buffers ORDER BY id"
    ).fetchall():
        rows = [
            (int(pos), json.loads(body))
            for pos, body in conn.execute(
                "SELECT pos, body FROM buffer_rows WHERE buffer_id = %s ORDER BY pos", (bid,)
            ).fetchall()
        ]
        declared = sorted(
            (cid, pos, order) for pos, row in rows for order, cid in enumerate(call_ids(row))
        )
        answers = sorted(
            (rid, pos, is_healed(row)) for pos, row in rows if (rid := result_id(row)) is not None
        )
        answered = {rid for rid, _, _ in answers}
        listed = sorted((str(c), int(p), int(o)) for c, p, o in json.loads(unanswered))
        entries = conn.execute(
            """SELECT call_id, declared_pos, ord FROM buffer_call_ids
            WHERE buffer_id = %s AND ord IS NOT NULL""",
            (bid,),
        ).fetchall()
        stored = conn.execute(
            """SELECT call_id, answer_pos, healed FROM buffer_call_ids
            WHERE buffer_id = %s AND answer_pos IS NOT NULL""",
            (bid,),
        ).fetchall()
        empty = conn.execute(
            """SELECT COUNT(*) FROM buffer_call_ids
            WHERE buffer_id = %s AND ord IS NULL AND answer_pos IS NULL""",
            (bid,),
        ).fetchone()
        if listed != [d for d in declared if d[0] not in answered]:
            faults.append(
                f"buffer {bid}: listed {listed}, declared {declared}, answered {answered}"
            )
        if sorted(entries) != [d for d in declared if d[0] in answered]:
            faults.append(
                f"buffer {bid}: rows declare {sorted(entries)}, rows of the buffer {declared}"
            )
        if sorted((str(c), int(p), bool(h)) for c, p, h in stored) != answers:
            faults.append(f"buffer {bid}: answers {sorted(stored)}, rows answer {answers}")
        if empty[0]:
            faults.append(f"buffer {bid}: {empty[0]} rows hold neither a declaration nor an answer")
    return faults
