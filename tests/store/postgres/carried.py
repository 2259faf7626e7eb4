"""The oracle of PostgreSQL's call-id layout since its migration 35 (decision 0194), from the stored rows alone.

Every declaration is in exactly one place: the header's list (its call unanswered), or,
its call answered, the row of an answer to it (``buffer_rows.declared_pos`` and
``declared_ord``, set on a tool row answering that call) or a row
of its own in ``buffer_call_ids``. Every answer is its tool row: ``buffer_answers`` (the
rows' key, ``flowmem_result_id``) gives exactly what ``result_id`` and ``is_healed`` read
of the rows. ``layout_faults`` recomputes that from the buffer's rows.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from flowmem.core import append, call_ids, is_healed, prepare, result_id


def layout_faults(conn: Any) -> list[str]:
    """What differs between each buffer's stored call ids and what its rows declare and answer."""
    faults: list[str] = []
    for bid, unanswered in conn.execute(
        "SELECT id, unanswered FROM buffers ORDER BY id"
    ).fetchall():
        rows = []
        for pos, body, dp, do, cid in conn.execute(
            """SELECT pos, body, declared_pos, declared_ord, call_id FROM buffer_rows
            WHERE buffer_id = %s ORDER BY pos""",
            (bid,),
        ).fetchall():
            row = json.loads(body)
            if cid != result_id(row):
                faults.append(f"buffer {bid}: the row at {pos} keyed {cid!r}, answers {body}")
            rows.append((int(pos), row, dp, do))
        declared = sorted(
            (cid, pos, order) for pos, row, _, _ in rows for order, cid in enumerate(call_ids(row))
        )
        answers = sorted(
            (rid, pos, is_healed(row))
            for pos, row, _, _ in rows
            if (rid := result_id(row)) is not None
        )
        answered = {rid for rid, _, _ in answers}
        listed = sorted((str(c), int(p), int(o)) for c, p, o in json.loads(unanswered))
        own = conn.execute(
            "SELECT call_id, declared_pos, ord FROM buffer_call_ids WHERE buffer_id = %s",
            (bid,),
        ).fetchall()
        carried = []
        for pos, row, dp, do in rows:
            if dp is None and do is None:
                continue
            rid = result_id(row)
            if rid is None or dp is None or do is None:
                faults.append(
                    f"buffer {bid}: the row at {pos} carries ({dp}, {do}) but answers {rid}"
                )
                continue
            carried.append((rid, int(dp), int(do)))
        stored = conn.execute(
            "SELECT call_id, pos, healed FROM buffer_answers WHERE buffer_id = %s", (bid,)
        ).fetchall()
        if listed != [d for d in declared if d[0] not in answered]:
            faults.append(
                f"buffer {bid}: listed {listed}, declared {declared}, answered {answered}"
            )
        entries = sorted([*((str(c), int(p), int(o)) for c, p, o in own), *carried])
        if entries != [d for d in declared if d[0] in answered]:
            faults.append(
                f"buffer {bid}: own rows {sorted(own)} and carried {sorted(carried)},"
                f" rows of the buffer {declared}"
            )
        if sorted((str(c), int(p), bool(h)) for c, p, h in stored) != answers:
            faults.append(f"buffer {bid}: answers {sorted(stored)}, rows answer {answers}")
    return faults


def append_as_the_rules(
    store: Any, address: Any, pure: list[Any], batches: list[list[Any]], url: str
) -> list[Any]:
    """Each batch appended to ``store`` and by the pure rules: the same counts and messages, a sound layout after each."""
    for batch in batches:
        expected = append(pure, batch, now=1)
        got = store.append(address, prepare(batch, 1))
        pure = expected.messages
        assert (got.appended, got.count) == (expected.appended, expected.count)
        assert store.load(address) == pure
        with psycopg.connect(url, autocommit=True) as conn:
            assert layout_faults(conn) == []
    return pure
