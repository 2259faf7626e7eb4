"""PostgreSQL's pipelined checkpoint writes (decision 0126).

When the server forgot their statements: the pipeline prepares its statements once per
connection under its own names. The server forgets them on ``DISCARD ALL`` or
``DEALLOCATE ALL``, and psycopg sends ``DEALLOCATE ALL`` by itself when a connection that
auto-prepared its own queries rolls back or drops something. The append prepared anew and
tried again; a LangGraph step's writes raised ``InvalidSqlStatementName`` to the graph
instead.

The verdict of a write on remembered facts reads no row of the line (decision 0201) but its
last, in every plan and at any length, statistics taken or not (decision 0213).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.postgres.checkpoints import STATEMENTS, header_params  # noqa: E402

CONFIG = {"configurable": {"thread_id": "t-forgot"}}


def _graph(saver: FlowmemSaver) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("a reply", id=f"ai-{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


def _texts(graph: Any) -> list[str]:
    return [m.content for m in graph.get_state(CONFIG).values["messages"]]


def _turn(graph: Any, n: int) -> None:
    graph.invoke({"messages": [HumanMessage(f"turn {n}", id=f"h-{n}")]}, CONFIG)


def test_a_graph_step_prepares_again_after_the_server_forgets_the_statements(
    one_conn: PostgresStore,
) -> None:
    graph = _graph(FlowmemSaver(MemoryService(one_conn)))
    _turn(graph, 1)
    _turn(graph, 2)  # the step's writes run on remembered facts: every statement prepared
    with one_conn.connection() as conn:
        conn.execute("DEALLOCATE ALL")
    _turn(graph, 3)
    _turn(graph, 4)
    assert _texts(graph) == [t for n in (1, 2, 3, 4) for t in (f"turn {n}", "a reply")]


def test_a_graph_step_survives_psycopgs_own_deallocate_after_a_rollback(
    one_conn: PostgresStore,
) -> None:
    graph = _graph(FlowmemSaver(MemoryService(one_conn)))
    _turn(graph, 1)
    _turn(graph, 2)
    with one_conn.connection() as conn:
        for _ in range(6):  # past psycopg's prepare_threshold: it prepares this query
            conn.execute("SELECT 1 WHERE %s", (True,))
        conn.execute("BEGIN")
        conn.execute("ROLLBACK")  # psycopg clears its cache: DEALLOCATE ALL on the server
        left = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert left == (0,)  # the server forgot flowmem's statements too
    _turn(graph, 3)
    assert _texts(graph) == [t for n in (1, 2, 3) for t in (f"turn {n}", "a reply")]


def _rows_read(plan: dict[str, Any], table: str) -> int:
    """Rows a plan's nodes on ``table`` returned or removed by a filter (EXPLAIN ANALYZE's JSON)."""
    own = 0
    if plan.get("Relation Name") == table:
        own = int(plan["Actual Rows"]) + sum(
            int(plan.get(key, 0))
            for key in ("Rows Removed by Filter", "Rows Removed by Index Recheck")
        )
    removed = int(plan.get("Rows Removed by Join Filter", 0))  # a join's filter on its rows
    return own + removed + sum(_rows_read(child, table) for child in plan.get("Plans", ()))


@pytest.mark.parametrize("plans", ["custom", "generic"])
def test_the_verdict_on_remembered_facts_reads_no_row_of_the_line(
    one_conn: PostgresStore, plans: str
) -> None:
    """The line's tail is checked on the rows' key from the remembered last major: no row read
    but the line's last (decision 0213: read backwards on the key, the row the bound is held to).

    Decision 0201: with the bound read from the header's own column the server planned an
    anti-join reading every row of the line at each step (30 at 30 messages here). With the
    tables' statistics (an autoanalyze of the pooled schema may take them at any moment) the
    server rightly reads a 30-row table whole (one page, a sequential scan: no index pays),
    and the test failed (decision 0210); what is held is the statement's shape, so sequential
    scans are off while it is planned: with an ``ANALYZE`` first it passes, and the 0195 form
    still fails it without one (decision 0212). No ``ANALYZE`` here: the schema is pooled.
    """
    saver = FlowmemSaver(MemoryService(one_conn))
    graph = _graph(saver)
    for n in range(15):
        _turn(graph, n)
    found = saver.tables.remembered.get("t-forgot", "")  # type: ignore[attr-defined]
    assert found is not None
    (header,) = found[0].values()
    assert header[1] == 30
    text = STATEMENTS["cp_known+line"]
    with one_conn.connection() as conn, conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        if plans == "generic":
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        explained = "EXPLAIN (ANALYZE, FORMAT JSON) " + text
        (plan,) = conn.execute(
            explained, header_params(header), prepare=plans == "generic"
        ).fetchone()
        verdict = conn.execute(
            text.replace("SELECT set_config", "SELECT 1, set_config", 1), header_params(header)
        ).fetchone()
    assert verdict is not None and verdict[1] == "true"  # the facts held: the check ran whole
    # the buffer's last row, read backwards on its key (decision 0213), and no other
    assert _rows_read(plan[0]["Plan"], "buffer_rows") <= 1, plan


def _shared_hits(plan: dict[str, Any]) -> int:
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def _looping_graph(saver: FlowmemSaver, steps: int) -> Any:
    """One AI message a step, ``steps`` steps an invoke (the bench's graph, shorter)."""

    def agent(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply {n} " + "words " * 30, id=f"ai-{n}")]}

    def route(state: MessagesState) -> str:
        return "agent" if len(state["messages"]) % steps else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["agent", END])
    return builder.compile(checkpointer=saver)


def test_the_verdict_reads_as_many_buffers_at_600_messages_as_at_60_on_analyzed_tables(
    postgres_db_url: str,
) -> None:
    """The verdict on remembered facts does not grow with the line, statistics taken or not.

    Decision 0213: as ``NOT EXISTS (SELECT 1 FROM buffer_rows WHERE buffer_id = … AND pos >=
    …)`` the server's plans on ``ANALYZE``d tables (autovacuum takes them within a minute of
    a thread's growth) read the rows table whole at each step: all 60 rows at 60 messages
    here, custom and generic (fails before), ~57 buffers a step at 1,000 in the bench. The
    last row read backwards on the key is one leaf page in every plan. A fresh schema:
    ``ANALYZE`` here touches no other test's tables.
    """
    store = PostgresStore(f"{postgres_db_url}&pool_min=1&pool_max=1")
    try:
        saver = FlowmemSaver(MemoryService(store))
        graph = _looping_graph(saver, 60)
        config = {"configurable": {"thread_id": "t-grows"}, "recursion_limit": 100}
        found: dict[int, list[tuple[int, int]]] = {}
        for turn in range(10):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h-{turn}")]}, config)
            length = (turn + 1) * 60
            if length not in (60, 600):
                continue
            remembered = saver.tables.remembered.get("t-grows", "")  # type: ignore[attr-defined]
            assert remembered is not None
            (header,) = remembered[0].values()
            assert header[1] == length
            text = STATEMENTS["cp_known+line+head"]
            with store.connection() as conn:
                conn.execute("ANALYZE")
                latest = conn.execute(
                    "SELECT checkpoint_id FROM lg_checkpoints WHERE thread_id = 't-grows'"
                    " ORDER BY checkpoint_id DESC LIMIT 1"
                ).fetchone()
                assert latest is not None
                params = [*header_params(header), "t-grows", "", latest[0]]
                for plans in ("custom", "generic"):
                    with conn.transaction():
                        conn.execute(f"SET LOCAL plan_cache_mode = force_{plans}_plan")
                        explained = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + text
                        (plan,) = conn.execute(
                            explained, params, prepare=plans == "generic"
                        ).fetchone()
                        verdict = conn.execute(
                            text.replace("SELECT set_config", "SELECT 1, set_config", 1), params
                        ).fetchone()
                    assert verdict is not None and verdict[1] == "true"  # the check ran whole
                    rows = _rows_read(plan[0]["Plan"], "buffer_rows")
                    found.setdefault(length, []).append((rows, _shared_hits(plan[0]["Plan"])))
        for length, seen in found.items():
            assert all(rows <= 1 for rows, _ in seen), (length, seen)
        # one B-tree level more at most between the two lengths, not the rows' pages
        assert max(hits for _, hits in found[600]) <= max(hits for _, hits in found[60]) + 2, found
    finally:
        store.close()
