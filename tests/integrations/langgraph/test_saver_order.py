"""``FlowmemSaver``'s async calls run one thread's at a time, in the order made (decision 0156).

A worker thread cannot be stopped. A run cancelled while its last checkpoint is being
stored (a timeout around ``ainvoke``, a client gone: LangGraph's loop is then waiting for
that write on its way out, and the cancellation stops the wait, not the write) leaves
the write going. The thread's next run, reading in a thread of its own, found the
checkpoint before it as the latest: the late write then either refused the next run
(``ThreadForkedError``, its parent no longer the latest) or was refused itself, the
cancelled run's answer lost with no one told. LangGraph's own savers order a saver's
calls (``AsyncPostgresSaver`` and ``AsyncSqliteSaver`` behind one lock, ``InMemorySaver``
on the event loop); ``FlowmemSaver`` orders each thread's (``InOrder``). ``TablesGate``
is the seam: the saver's checkpoint tables with one write held until the test lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.graph import END, START, MessagesState, StateGraph

from flowmem.errors import ConflictError
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService
from flowmem.store import open_store
from flowmem.store.checkpoints import CheckpointPut, PendingWrites
from tests.integrations.test_in_order import OVERTAKE_SECONDS

THREAD = "t1"


class TablesGate:
    """A saver's checkpoint tables whose write ``held`` picks waits for ``release``; writes logged.

    ``held(kind, name)``: kind ``"checkpoint"`` (its id and metadata step) or
    ``"writes"`` (the task id). With ``others_wait``, a write that starts while the held
    one waits lets it go and lands after it. With ``refuse``, the held write raises
    ``ConflictError`` once released (a store's refusal).
    """

    def __init__(self, saver: FlowmemSaver, held: Callable[[str, Any], bool]) -> None:
        self.inner, self.saver, self.held = saver.tables, saver, held
        self.events: list[tuple[str, str]] = []
        self.entered, self.release, self.ended = threading.Event(), threading.Event(), threading.Event()
        self.other_started = threading.Event()
        self.others_wait = self.refuse = False
        saver.tables = self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put_checkpoint(self, put: CheckpointPut) -> None:
        """Store a checkpoint, held when ``held`` says so."""
        step = self.saver.serde.loads_typed(put.checkpoint.metadata).get("step")
        with self._turn("checkpoint", (put.checkpoint.checkpoint_id, step)):
            self.inner.put_checkpoint(put)

    def put_writes(self, pending: PendingWrites) -> None:
        """Store pending writes, held when ``held`` says so."""
        with self._turn("writes", pending.writes[0].task_id if pending.writes else ""):
            self.inner.put_writes(pending)

    @contextlib.contextmanager
    def _turn(self, kind: str, name: Any) -> Iterator[None]:
        label = f"{kind} {name}"
        self.events.append(("start", label))
        holding = not self.entered.is_set() and self.held(kind, name)
        try:
            if holding:
                self.entered.set()
                self.release.wait(30)
                if self.refuse:
                    raise ConflictError("refused by the test")
            else:
                self.other_started.set()
                if self.others_wait and self.entered.is_set() and not self.ended.is_set():
                    self.release.set()  # the held write lands first, then this one
                    self.ended.wait(30)
            yield
        finally:
            self.events.append(("end", label))
            if holding:
                self.ended.set()


def _saver() -> FlowmemSaver:
    return FlowmemSaver(MemoryService(open_store("memory://")))


async def _cancel_once_held(run: asyncio.Task[Any], gate: TablesGate) -> None:
    """Cancel ``run`` once the gate holds its write, again until it ends (as anyio's cancel scopes do)."""
    await asyncio.to_thread(gate.entered.wait, 30)
    while not run.done():
        run.cancel()
        await asyncio.wait({run}, timeout=0.05)
    with contextlib.suppress(asyncio.CancelledError):
        await run
    assert not gate.release.is_set()  # the caller left while its write was held


# --- a graph's runs -----------------------------------------------------------------------
HELD_STEP = 4  # the second run's last checkpoint: the answer to "q1"
CONFIG: Any = {"configurable": {"thread_id": THREAD}}


def _graph(saver: FlowmemSaver) -> Any:
    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer to {state['messages'][-1].content}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=saver)


def _ask(graph: Any, question: str) -> Any:
    return graph.ainvoke({"messages": [HumanMessage(question)]}, CONFIG)


def _latest_line(graph: Any) -> list[str]:
    return [m.content for m in graph.get_state(CONFIG).values["messages"]]


def _cancelled_answer_then_next_run(others_wait: bool) -> tuple[Any, list[str], TablesGate]:
    """q0 answered; q1's run cancelled while its answer's checkpoint is held; then q2's run."""
    saver = _saver()
    gate = TablesGate(saver, lambda kind, name: kind == "checkpoint" and name[1] == HELD_STEP)
    gate.others_wait = others_wait
    graph = _graph(saver)

    async def scenario() -> Any:
        await _ask(graph, "q0")
        await _cancel_once_held(asyncio.create_task(_ask(graph, "q1")), gate)
        following = asyncio.create_task(_ask(graph, "q2"))
        await asyncio.wait({following}, timeout=OVERTAKE_SECONDS)  # before: it ran and ended here
        gate.release.set()
        try:
            return await following
        except Exception as exc:
            return exc

    outcome = asyncio.run(scenario())
    return outcome, _latest_line(graph), gate


def test_the_next_run_continues_from_the_answer_of_a_run_cancelled_while_it_was_stored() -> None:
    outcome, line, _ = _cancelled_answer_then_next_run(others_wait=False)
    assert not isinstance(outcome, BaseException), outcome
    # before: the next run read the thread without q1's answer, and that answer, landing
    # later on a parent no longer the latest, was refused unseen: q1 unanswered
    assert line == ["q0", "answer to q0", "q1", "answer to q1", "q2", "answer to q2"]


def test_the_next_run_is_not_refused_by_a_cancelled_runs_checkpoint_landing_after_its_read() -> None:
    outcome, line, gate = _cancelled_answer_then_next_run(others_wait=True)
    # before: the next run read the thread, then the late checkpoint landed: ThreadForkedError
    assert not isinstance(outcome, BaseException), outcome
    assert line == ["q0", "answer to q0", "q1", "answer to q1", "q2", "answer to q2"]
    held_at = next(i for i, (what, name) in enumerate(gate.events) if what == "start" and name.endswith(f", {HELD_STEP})"))
    assert gate.events[held_at + 1] == ("end", gate.events[held_at][1])  # nothing started while held


# --- the saver's calls --------------------------------------------------------------------
def _checkpoint(checkpoint_id: str) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = checkpoint_id
    return checkpoint


def _config(thread: str, parent: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    return {"configurable": configurable}


def _put(saver: FlowmemSaver, checkpoint_id: str, parent: str | None, thread: str = THREAD, run: str = "r1") -> Any:
    metadata: Any = {"source": "loop", "step": int(checkpoint_id[1:]), "run_id": run}
    return saver.aput(_config(thread, parent), _checkpoint(checkpoint_id), metadata, {})


def _latest(saver: FlowmemSaver, thread: str = THREAD) -> str | None:
    found = saver.get_tuple(_config(thread))
    return None if found is None else found.checkpoint["id"]


def _holding(checkpoint_id: str) -> Callable[[str, Any], bool]:
    return lambda kind, name: kind == "checkpoint" and name[0] == checkpoint_id


def test_a_read_after_a_put_whose_caller_was_cancelled_sees_it_as_the_latest() -> None:
    saver = _saver()
    gate = TablesGate(saver, _holding("c2"))

    async def scenario() -> Any:
        await _put(saver, "c1", None)
        await _cancel_once_held(asyncio.create_task(_put(saver, "c2", "c1")), gate)
        reading = asyncio.create_task(saver.aget_tuple(_config(THREAD)))
        await asyncio.wait({reading}, timeout=OVERTAKE_SECONDS)  # before: it read c1 here
        gate.release.set()
        return await reading

    found = asyncio.run(scenario())
    assert found is not None and found.checkpoint["id"] == "c2"


def test_pending_writes_whose_caller_was_cancelled_are_read_with_their_checkpoint() -> None:
    """Before, the next run read the checkpoint without them and ran their task again (a tool twice)."""
    saver = _saver()
    gate = TablesGate(saver, lambda kind, name: kind == "writes" and name == "tool-task")

    async def scenario() -> Any:
        await _put(saver, "c1", None)
        writing = saver.aput_writes(_config(THREAD, "c1"), [("messages", "the tool's answer")], "tool-task")
        await _cancel_once_held(asyncio.create_task(writing), gate)
        reading = asyncio.create_task(saver.aget_tuple(_config(THREAD)))
        await asyncio.wait({reading}, timeout=OVERTAKE_SECONDS)
        gate.release.set()
        return await reading

    found = asyncio.run(scenario())
    assert found is not None and found.pending_writes == [("tool-task", "messages", "the tool's answer")]


def test_a_put_cancelled_before_its_turn_is_never_made_and_the_next_one_is() -> None:
    saver = _saver()
    gate = TablesGate(saver, _holding("c2"))

    async def scenario() -> None:
        await _put(saver, "c1", None)
        await _cancel_once_held(asyncio.create_task(_put(saver, "c2", "c1")), gate)
        waiting = asyncio.create_task(_put(saver, "c3", "c2"))
        await asyncio.sleep(OVERTAKE_SECONDS)  # queued behind the held put
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        following = asyncio.create_task(_put(saver, "c4", "c2"))
        await asyncio.wait({following}, timeout=OVERTAKE_SECONDS)
        gate.release.set()
        await following

    asyncio.run(scenario())
    assert [e for e in gate.events if e[1].startswith("checkpoint")][2:] == [
        ("start", "checkpoint ('c2', 2)"),
        ("end", "checkpoint ('c2', 2)"),
        ("start", "checkpoint ('c4', 4)"),
        ("end", "checkpoint ('c4', 4)"),
    ]
    assert saver.get_tuple(_config(THREAD, "c3")) is None
    assert _latest(saver) == "c4"


def test_another_threads_calls_are_not_held_up_by_a_held_write() -> None:
    saver = _saver()
    gate = TablesGate(saver, _holding("c2"))

    async def scenario() -> Any:
        await _put(saver, "c1", None)
        await _cancel_once_held(asyncio.create_task(_put(saver, "c2", "c1")), gate)
        await _put(saver, "c1", None, thread="t2")
        elsewhere = await saver.aget_tuple(_config("t2"))
        assert not gate.release.is_set()  # both ran while t1's write was held
        gate.release.set()
        return elsewhere

    elsewhere = asyncio.run(scenario())
    assert elsewhere is not None and elsewhere.checkpoint["id"] == "c1"


def test_delete_for_runs_deletes_the_checkpoint_a_cancelled_run_was_storing() -> None:
    """LangGraph's rollback of a cancelled run: its late checkpoint must not land after the delete."""
    saver = _saver()
    gate = TablesGate(saver, _holding("c2"))

    async def scenario() -> None:
        await _put(saver, "c1", None, run="r0")
        await _cancel_once_held(asyncio.create_task(_put(saver, "c2", "c1", run="r1")), gate)
        await _put(saver, "c1", None, thread="t2", run="r1")  # the run's threads are found first
        deleting = asyncio.create_task(saver.adelete_for_runs(["r1"]))
        await asyncio.wait({deleting}, timeout=OVERTAKE_SECONDS)  # before: it deleted here
        gate.release.set()
        await deleting
        await saver.aget_tuple(_config(THREAD))  # every call of the thread has ended

    asyncio.run(scenario())
    assert _latest(saver) == "c1" and _latest(saver, "t2") is None


def test_copy_thread_copies_a_checkpoint_whose_caller_was_cancelled() -> None:
    saver = _saver()
    gate = TablesGate(saver, _holding("c2"))

    async def scenario() -> None:
        await _put(saver, "c1", None)
        await _cancel_once_held(asyncio.create_task(_put(saver, "c2", "c1")), gate)
        copying = asyncio.create_task(saver.acopy_thread(THREAD, "t2"))
        await asyncio.wait({copying}, timeout=OVERTAKE_SECONDS)
        gate.release.set()
        await copying

    asyncio.run(scenario())
    assert _latest(saver, "t2") == "c2"


def test_a_checkpoint_refused_after_its_caller_was_cancelled_is_logged_with_what_was_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    saver = _saver()
    gate = TablesGate(saver, _holding("c2"))
    gate.refuse = True

    async def scenario() -> None:
        await _put(saver, "c1", None)
        await _cancel_once_held(asyncio.create_task(_put(saver, "c2", "c1")), gate)
        gate.release.set()
        await saver.aget_tuple(_config(THREAD))  # queued behind it: the put has ended

    with caplog.at_level(logging.ERROR, logger="flowmem"):
        asyncio.run(scenario())
    lost = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lost) == 1, caplog.text
    message = lost[0].getMessage()
    assert "LangGraph checkpoint 'c2' of thread 't1'" in message and "ConflictError" in message
    assert _latest(saver) == "c1"
