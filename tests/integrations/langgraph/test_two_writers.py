"""Issue 23, "One thread, one line of history": two writers of one thread never fork it.

Two processes (``tests.integrations.langgraph.writers``) invoke the same thread of a
one-node ``StateGraph`` at the same moment, round after round. With ``FlowmemSaver``
exactly one run of a round succeeds and the other raises ``ThreadForkedError``; every
committed checkpoint stays reachable from the latest by parent links, and the latest
state holds the winners' turns, in order (and a loser's question, when its run's first
checkpoint landed on the head before the winner read the thread). LangGraph's own ``SqliteSaver`` lets both
runs succeed and forks the thread silently: the loser's checkpoints are committed but
no longer on the line its latest checkpoint reads back (the documented contrast).

Time travel is not a fork that is refused: a run from an older checkpoint still
branches, and the line it branched from reads back unchanged.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from flowmem.errors import ThreadForkedError
from flowmem.integrations.langgraph.saver import FlowmemSaver
from tests.integrations import forkserver
from tests.integrations.langgraph.writers import (
    answer_id,
    ask,
    build,
    checkpointer,
    human_id,
    writer,
)

pytest.importorskip("langgraph.checkpoint.sqlite")

# Writers are forked from a clean interpreter that imported LangGraph and flowmem once
# (multiprocessing's forkserver: nothing of pytest's process, no open connection, is
# inherited), so starting one costs milliseconds, not LangGraph's import.
PROCESSES = get_context("forkserver")
PRELOAD = [
    "tests.integrations.langgraph.writers",
    "flowmem.integrations.langgraph.saver",
    "flowmem.store.sqlite",
    "flowmem.store.postgres",
    "langgraph.checkpoint.sqlite",
]
ROUNDS = 5
DEADLINE = 60.0  # seconds for one race of ROUNDS rounds (about 2 s on an idle machine)
WRITERS = ("left", "right")
THREAD = "chat-1"
CONFIG: Any = {"configurable": {"thread_id": THREAD}}


@pytest.fixture(scope="module", autouse=True)
def _forkserver() -> Iterator[None]:
    forkserver.context(PRELOAD)  # kept for the process's next tests that fork (decision 0185)
    yield


def race(kind: str, url: str, rounds: int) -> dict[int, dict[str, tuple[str, str]]]:
    """Run both writers for ``rounds`` rounds; each round's ``{name: (outcome, text)}``."""
    forkserver.context(PRELOAD)  # the module's server (a kill test may have started its own since)
    barrier = PROCESSES.Barrier(len(WRITERS))
    results = PROCESSES.Queue()
    processes = [
        PROCESSES.Process(
            target=writer, args=(kind, url, THREAD, name, rounds, barrier, results), daemon=True
        )
        for name in WRITERS
    ]
    for process in processes:
        process.start()
    deadline = time.monotonic() + DEADLINE
    outcomes: dict[int, dict[str, tuple[str, str]]] = {}
    try:
        for _ in range(rounds * len(WRITERS)):
            try:
                round_, name, outcome, text = results.get(
                    timeout=max(deadline - time.monotonic(), 0.1)
                )
            except queue.Empty:
                pytest.fail(
                    f"the writers did not finish {rounds} rounds in {DEADLINE} s: {outcomes}"
                )
            assert round_ >= 0, f"writer {name} failed outside a run: {outcome}: {text}"
            outcomes.setdefault(round_, {})[name] = (outcome, text)
    finally:
        for process in processes:
            process.join(max(deadline - time.monotonic(), 1.0))
            if process.is_alive():
                process.kill()
                process.join(5)
    assert [p.exitcode for p in processes] == [0, 0]
    return outcomes


def line_of_latest(saver: Any) -> list[str]:
    """The thread's latest checkpoint and its ancestors by parent links, newest first."""
    line = []
    found = saver.get_tuple(CONFIG)
    while found is not None:
        line.append(found.config["configurable"]["checkpoint_id"])
        found = None if found.parent_config is None else saver.get_tuple(found.parent_config)
    return line


def committed(saver: Any) -> list[str]:
    """Every committed checkpoint of the thread, newest first."""
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(CONFIG)]


def message_ids(graph: Any, config: Any = CONFIG) -> list[str]:
    """The ids of the messages of a checkpoint's state (the latest when ``config`` names none)."""
    return [m.id for m in graph.get_state(config).values["messages"]]


def seed(kind: str, url: str) -> list[str]:
    """Start the thread with one turn; the ids of its messages."""
    with checkpointer(kind, url) as saver:
        graph = build(saver)
        ask(graph, CONFIG, "seed", 0)
        return message_ids(graph)


@pytest.mark.slow
def test_two_processes_writing_one_thread_at_once_one_wins_the_other_gets_thread_forked_error(
    flowmem_url: str,
) -> None:
    history = seed("flowmem", flowmem_url)
    assert history == [human_id("seed", 0), answer_id("seed", 0)]

    outcomes = race("flowmem", flowmem_url, ROUNDS)

    rounds: list[tuple[str, str]] = []
    for round_ in range(ROUNDS):
        kinds = sorted(outcome for outcome, _ in outcomes[round_].values())
        assert kinds == ["ThreadForkedError", "ok"], (round_, outcomes[round_])
        (winner,) = [n for n, (outcome, _) in outcomes[round_].items() if outcome == "ok"]
        (loser,) = [n for n, (outcome, _) in outcomes[round_].items() if outcome != "ok"]
        (text,) = [t for outcome, t in outcomes[round_].values() if outcome != "ok"]
        assert "nothing was stored" in text
        rounds.append((winner, loser))
    with FlowmemSaver.from_conn_string(flowmem_url) as saver:
        every = committed(saver)
        line = line_of_latest(saver)
        assert len(every) == len(set(every))
        assert set(every) - set(line) == set(), "committed checkpoints off the thread's line"
        assert line == every  # one line: newest first, each the parent of the one before
        assert winners_turns(message_ids(build(saver)), history, rounds)


def winners_turns(found: list[str], seeded: list[str], rounds: list[tuple[str, str]]) -> bool:
    """True when ``found`` is the seed, then each round's winner's question and answer, in order.

    A round's loser may have its question just before the winner's: its run's first
    checkpoint (the input) landed on the head before the winner read the thread, and
    only its next one was refused; the winner's run then went on from it. Nothing else
    of a loser's (no answer) may be on the line.
    """
    expected = list(seeded)
    at = len(seeded)
    for round_, (winner, loser) in enumerate(rounds):
        if found[at : at + 1] == [human_id(loser, round_)]:
            expected.append(human_id(loser, round_))
            at += 1
        expected += [human_id(winner, round_), answer_id(winner, round_)]
        at += 2
    assert found == expected, (found, expected)
    return True


@pytest.mark.slow
def test_langgraph_sqlite_saver_lets_both_writers_succeed_and_forks_the_thread_silently(
    tmp_path: Path,
) -> None:
    """The contrast: LangGraph's own ``SqliteSaver`` under the same race as above."""
    url = str(tmp_path / "langgraph.db")
    seed("langgraph-sqlite", url)
    rounds = 3

    outcomes = race("langgraph-sqlite", url, rounds)

    for round_ in range(rounds):
        assert {name: outcome for name, (outcome, _) in outcomes[round_].items()} == {
            "left": "ok",
            "right": "ok",
        }, outcomes[round_]
    with checkpointer("langgraph-sqlite", url) as saver:
        lost = set(committed(saver)) - set(line_of_latest(saver))
        answers = set(message_ids(build(saver)))
    # Both runs of a round committed their turn; where they overlapped (every round, unless
    # a writer was held up for the whole of the other's run) the latest line holds one.
    assert lost, "SqliteSaver kept one line: no round overlapped"
    both = {answer_id(n, r) for n in WRITERS for r in range(rounds)}
    assert both - answers, "every answer is on the latest line: no round overlapped"


def test_time_travel_from_an_older_checkpoint_still_branches_and_keeps_the_original_line(
    flowmem_url: str,
) -> None:
    with FlowmemSaver.from_conn_string(flowmem_url) as saver:
        graph = build(saver)
        ask(graph, CONFIG, "me", 1)
        ask(graph, CONFIG, "me", 2)
        original = {
            t.config["configurable"]["checkpoint_id"]: [
                m.id for m in t.checkpoint["channel_values"].get("messages", [])
            ]
            for t in saver.list(CONFIG)
        }
        first_turn = [human_id("me", 1), answer_id("me", 1)]
        older = next(
            s
            for s in graph.get_state_history(CONFIG)
            if [m.id for m in s.values.get("messages", [])] == first_turn and not s.next
        )

        branched = graph.invoke(
            {"messages": [HumanMessage(content="me again", id=human_id("me", 3))]}, older.config
        )

        assert [m.id for m in branched["messages"]] == [
            *first_turn,
            human_id("me", 3),
            answer_id("me", 3),
        ]
        assert message_ids(graph) == [*first_turn, human_id("me", 3), answer_id("me", 3)]
        branch = line_of_latest(saver)
        older_id = older.config["configurable"]["checkpoint_id"]
        assert older_id in branch  # the new branch grows from the older checkpoint
        new = branch[: branch.index(older_id)]
        assert new and not set(new) & set(original)
        # The original line, its head included, reads back as it was, from a fresh saver too.
        with FlowmemSaver.from_conn_string(flowmem_url) as fresh:
            for reader in (saver, fresh):
                for checkpoint_id, ids in original.items():
                    config = {
                        "configurable": {**CONFIG["configurable"], "checkpoint_id": checkpoint_id}
                    }
                    found = reader.get_tuple(config)
                    assert found is not None
                    assert [
                        m.id for m in found.checkpoint["channel_values"].get("messages", [])
                    ] == ids
        head = max(original)
        assert original[head] == [*first_turn, human_id("me", 2), answer_id("me", 2)]

        # The thread goes on from the branch's head, protected again.
        ask(graph, CONFIG, "me", 4)
        assert message_ids(graph) == [
            *first_turn,
            human_id("me", 3),
            answer_id("me", 3),
            human_id("me", 4),
            answer_id("me", 4),
        ]
        assert set(committed(saver)) - set(line_of_latest(saver)) == set(original) - set(branch)


ORPHAN_WRITES = """SELECT COUNT(*) FROM lg_writes AS w WHERE NOT EXISTS (SELECT 1 FROM lg_checkpoints
    AS c WHERE c.thread_id = w.thread_id AND c.ns = w.ns AND c.checkpoint_id = w.checkpoint_id)"""


def test_a_run_refused_with_thread_forked_error_leaves_no_pending_writes_behind(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flowmem.db"
    seed("flowmem", f"sqlite:///{path}")
    start = threading.Barrier(len(WRITERS))
    outcomes: dict[str, str] = {}

    def run(name: str, saver: FlowmemSaver) -> None:
        graph = build(saver)
        start.wait(10)
        try:
            ask(graph, CONFIG, name, 0)
            outcomes[name] = "ok"
        except ThreadForkedError:
            outcomes[name] = "forked"

    with (
        FlowmemSaver.from_conn_string(str(path)) as one,
        FlowmemSaver.from_conn_string(str(path)) as two,
    ):
        threads = [
            threading.Thread(target=run, args=a) for a in zip(WRITERS, (one, two), strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert sorted(outcomes.values()) == ["forked", "ok"]
    with sqlite3.connect(path) as conn:
        assert conn.execute(ORPHAN_WRITES).fetchone() == (0,)
