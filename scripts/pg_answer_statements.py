"""An answer's write and deletion through the view's trigger against the plain statements (not a test).

Decision 0164. One throwaway non-durable server, one connection: BLOCKS blocks of 50
answers set on declared rows of ``buffer_call_ids``, alternately by the old statement
(``INSERT INTO buffer_answers``: the ``INSTEAD OF`` trigger of migration 28) and by
``SQL["answer_insert"]`` (the order turned each round), then the same answers cleared
(``DELETE FROM buffer_answers`` against ``SQL["answer_delete"]``); each block one
transaction of prepared statements. The backend's CPU per statement
(``/proc/<pid>/schedstat``): the two interleaved finely, so the machine's load weighs
on both alike; prints min and median per statement (JSON).

    .venv/bin/python scripts/pg_answer_statements.py [BLOCKS]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))
import pgserver

OLD = {
    "answer_insert": "INSERT INTO buffer_answers (buffer_id, call_id, pos, healed) VALUES (%s, %s, %s, %s)",
    "answer_delete": "DELETE FROM buffer_answers WHERE buffer_id = %s AND call_id = %s AND pos = %s",
}
BLOCK = 50


def _named(params: tuple[object, ...]) -> dict[str, object]:
    """Positional parameters as psycopg's named ones (``p1``…)."""
    return {f"p{n}": value for n, value in enumerate(params, 1)}


def cpu_ns(pid: int) -> int:
    """The process's time on a CPU so far (ns)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def main() -> None:
    """Time both forms in turns; print µs per statement."""
    import psycopg

    from flowmem.store.postgres import PostgresStore
    from flowmem.store.postgres.pipeline import _merged
    from flowmem.store.postgres.queries import SQL

    blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    # the pipeline's text ($1…), in psycopg's named form
    new = {name: re.sub(r"\$([0-9]+)", r"%(p\1)s", _merged(name, SQL)) for name in OLD}
    old = {name: re.sub(r"%s", "%(p{})s", text) for name, text in OLD.items()}
    old = {name: text.format(*range(1, text.count("{}") + 1)) for name, text in old.items()}
    times: dict[str, list[float]] = {
        f"{name} {form}": [] for name in OLD for form in ("trigger", "plain")
    }
    with pgserver.throwaway_postgres(False) as (url, _):
        PostgresStore(url).close()  # the schema
        with psycopg.connect(url, autocommit=True) as conn:
            pid = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
            conn.execute(
                """INSERT INTO buffer_call_ids (buffer_id, call_id, declared_pos, ord, answered)
                SELECT 1, 'c' || n, n, 0, false FROM generate_series(0, %s) AS n""",
                (blocks * 2 * BLOCK,),
            )
            conn.execute("VACUUM ANALYZE buffer_call_ids")
            for name in OLD:  # warm: each form prepared, its generic plan chosen
                for form in (old, new):
                    for k in range(8):
                        params = (1, f"w{k}", 10**9 + k, False)
                        conn.execute(form[name], _named(params), prepare=True)
            for name in OLD:
                for block in range(blocks * 2):
                    plain = (block + block // 2) % 2 == 1  # old, new, new, old, ...
                    ids = range(block * BLOCK, (block + 1) * BLOCK)
                    with conn.transaction():
                        started = cpu_ns(pid)
                        for n in ids:
                            params = (1, f"c{n}", 10**6 + n, False)
                            conn.execute(
                                (new if plain else old)[name], _named(params), prepare=True
                            )
                        took = cpu_ns(pid) - started
                    times[f"{name} {'plain' if plain else 'trigger'}"].append(took / 1e3 / BLOCK)
                    time.sleep(0)
            left = conn.execute(
                "SELECT count(*) FROM buffer_call_ids WHERE answer_pos IS NOT NULL"
            ).fetchone()
    found = {
        key: {"min_us": min(v), "median_us": statistics.median(v), "blocks": len(v)}
        for key, v in times.items()
    }
    found["answers_left"] = {"rows": int(left[0]) if left else -1}  # type: ignore[dict-item]
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
