"""The append's facts query costs the same on a long buffer as on a short one.

The append's statements run with generic plans (docs/decisions/0024, 0028),
planned once per connection, often while the tables have no statistics yet (a
new database, a bench right after its fill). ``append_facts*`` must stay O(1) in
the buffer's length under such a plan (docs/decisions/0033): the server's own
count of the pages an execution touched (``EXPLAIN (ANALYZE, BUFFERS)``) must not
grow with the number of calls the buffer holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.store import Address

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from psycopg import sql  # noqa: E402

from flowmem.store.postgres import SQL, PostgresStore  # noqa: E402

SHORT, LONG = 40, 4_000


def turn(i: int) -> dict[str, Any]:
    """The i-th message of a conversation: user, assistant calling a tool, result, answer."""
    cid = f"call_{i // 4}"
    kind = i % 4
    if kind == 0:
        return {"role": "user", "content": f"question {i}"}
    if kind == 1:
        call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if kind == 2:
        return {"role": "tool", "content": f"result {i}", "tool_call_id": cid}
    return {"role": "assistant", "content": f"answer {i}"}


def params_of(conn: Any, name: str, address: Address, ids: list[str]) -> list[Any]:
    """The parameters of a facts statement for ``address`` and the call ids ``ids``."""
    if name == "append_known_head":  # the header's id and version alone (no id assumed new)
        head = conn.execute(
            "SELECT id, version, count, last_major, bytes, reserved - log_bytes FROM buffers"
            " WHERE scope = %s AND scope_id = %s AND key = %s",
            tuple(address),
        ).fetchone()
        return list(head)
    if name == "append_known":  # the header's id and version, and the ids assumed new
        # (the id once per index they must be absent from: calls, answers, evicted ids)
        head = conn.execute(
            "SELECT id, version, count, last_major, bytes, reserved - log_bytes FROM buffers"
            " WHERE scope = %s AND scope_id = %s AND key = %s",
            tuple(address),
        ).fetchone()
        return [*head, head[0], head[0], head[0], ids]
    return [ids, *address] if name.startswith("append_facts@ids") else list(address)


def pages(conn: Any, name: str, address: Address, ids: list[str]) -> int:
    """Pages one generic-plan execution of a facts statement touched (hit or read)."""
    text = SQL[name]
    parts = text.split("%s")
    numbered = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
    statement = f"facts_{abs(hash((name, tuple(address)))) % 10**8}"
    conn.execute(f"PREPARE {statement} AS {numbered}")
    params = params_of(conn, name, address, ids)
    values = sql.SQL(", ").join(sql.Literal(value) for value in params)
    run = sql.SQL("EXECUTE {} ({})").format(sql.Identifier(statement), values)
    for _ in range(6):  # past the point where a custom plan could still be chosen
        conn.execute(run)
    found = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + run).fetchone()[0]
    plan = (json.loads(found) if isinstance(found, str) else found)[0]["Plan"]
    conn.execute(f"DEALLOCATE {statement}")
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


@pytest.mark.parametrize(
    "variant",
    [
        "append_facts",
        "append_facts@ids",
        "append_facts@open",
        "append_facts@ids+open",
        # an append on known facts: its check, and the facts for the next (decision 0039)
        "append_known",
        "append_known_head",
        "buffer_known",
    ],
)
def test_append_facts_touch_as_many_pages_on_a_long_buffer_as_on_a_short_one(
    postgres_store_url: str, variant: str
) -> None:
    """No statistics, generic plans, every call answered: pages touched do not grow."""
    store = PostgresStore(postgres_store_url)
    try:
        rows = [prepare(turn(i), 1_755_000_000 + i)[0] for i in range(LONG)]
        short, long = Address("user", "u", "short"), Address("user", "u", "long")
        store.append(short, rows[:SHORT])
        for start in range(0, LONG, 500):
            store.append(long, rows[start : start + 500])
    finally:
        store.close()
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        few = pages(conn, variant, short, ["call_3"])
        many = pages(conn, variant, long, ["call_3"])
    # a deeper index may cost a page or two more; a scan of the buffer's calls
    # (1,000 of them, every answered call's old row version included) costs tens
    assert many <= few + 4, (variant, few, many)
