"""What ordering an adapter's calls costs (decision 0156): ``InOrder`` against ``asyncio.to_thread``.

Run with ``python bench/in_order.py`` (``--quick`` for a smoke run). Three adapters on
a SQLite file each, measured side by side in one process, rounds interleaved and
their order rotated:

- LangGraph ``FlowmemStore``: ``aput`` then ``aget`` of one item, one after the other
  (``sequential``), and four ``aget`` beside one ``aput`` (``five at once``);
- LangGraph ``FlowmemSaver``: one ``ainvoke`` of a one-node graph (a read, three
  checkpoints, two tasks' writes), alone and four threads' at once, per run;
- Google ADK ``FlowmemSessionService``: ``append_event`` then ``get_session``;
- pydantic-ai ``FlowmemConversationStore``: ``load`` then ``save`` of one turn.

``before`` is each adapter with its queue replaced by ``asyncio.to_thread`` (what they
did before decision 0156), ``after`` as it is. Reported per call: minimum and median
microseconds over ``--rounds`` rounds, the ratio after / before of the minimums, and
a count that does not depend on the machine's load: the thread hops (executor
submissions) per call. JSON to ``bench/results/in_order.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # bench/http.py would shadow the standard library's http
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import report_json
from google.adk.events import Event
from google.genai import types
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.integrations.langgraph.store import FlowmemStore
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.service import MemoryService
from flowmem.store import open_store

BENCH = "in_order"
APP = "shop"


class ToThread:
    """The calls as before decision 0156: each in a worker thread of its own, unordered."""

    busy = False

    async def run(self, func: Callable[..., Any], /, *args: Any) -> Any:
        """``asyncio.to_thread``."""
        return await asyncio.to_thread(func, *args)

    async def write(self, what: str, func: Callable[..., Any], /, *args: Any) -> Any:
        """``asyncio.to_thread``."""
        return await asyncio.to_thread(func, *args)

    def queued(
        self, what: str, func: Callable[..., Any], /, *args: Any
    ) -> Coroutine[Any, Any, Any]:
        """``asyncio.to_thread`` started now; the coroutine returned awaits its answer (``InOrder.queued``)."""
        started = asyncio.ensure_future(asyncio.to_thread(func, *args))

        async def answer() -> Any:
            return await started

        return answer()

    def run_here(self, func: Callable[..., Any], /, *args: Any) -> Any:
        """At once, in this thread."""
        return func(*args)


class ToThreadQueues:
    """``Queues`` as before decision 0156: ``ToThread`` for every key, never busy."""

    def of(self, key: object) -> ToThread:
        """A ``ToThread``."""
        return ToThread()

    def busy(self, key: object) -> bool:
        """False: nothing waits."""
        return False


class Case:
    """One adapter, before and after: ``step(variant, i)`` makes ``calls`` calls."""

    def __init__(self, name: str, calls: int, step: Callable[[str, int], Awaitable[None]]) -> None:
        self.name, self.calls, self.step = name, calls, step


def langgraph(tmp: str) -> list[Case]:
    """The LangGraph store: sequential put/get, and five at once."""
    stores = {}
    for variant in ("before", "after"):
        store = FlowmemStore(MemoryService(open_store(f"sqlite:///{tmp}/lg-{variant}.db")))
        if variant == "before":
            store._calls = ToThread()  # type: ignore[assignment]
        stores[variant] = store

    async def sequential(variant: str, i: int) -> None:
        await stores[variant].aput(("docs",), f"k{i % 50}", {"n": i})
        await stores[variant].aget(("docs",), f"k{i % 50}")

    async def five(variant: str, i: int) -> None:
        store = stores[variant]
        reads = (store.aget(("docs",), f"k{j}") for j in range(4))
        await asyncio.gather(*reads, store.aput(("docs",), "p", {"i": i}))

    return [
        Case("langgraph store, sequential", 2, sequential),
        Case("langgraph store, five at once", 5, five),
    ]


def saver(tmp: str) -> list[Case]:
    """The LangGraph saver: one ``ainvoke`` of a one-node graph, alone and four threads at once."""
    graphs = {}
    for variant in ("before", "after"):
        checkpointer = FlowmemSaver(
            MemoryService(open_store(f"sqlite:///{tmp}/saver-{variant}.db"))
        )
        if variant == "before":
            checkpointer._threads = ToThreadQueues()  # type: ignore[assignment]
        graph = StateGraph(MessagesState)
        graph.add_node("answer", lambda state: {"messages": [AIMessage("noted")]})
        graph.add_edge(START, "answer")
        graph.add_edge("answer", END)
        graphs[variant] = graph.compile(checkpointer=checkpointer)

    def ask(variant: str, thread: str, i: int) -> Awaitable[Any]:
        config: Any = {"configurable": {"thread_id": thread}}
        return graphs[variant].ainvoke({"messages": [HumanMessage(f"message {i}")]}, config)

    async def alone(variant: str, i: int) -> None:
        await ask(variant, f"t{i % 20}", i)  # 20 threads: each stays short

    async def four(variant: str, i: int) -> None:
        await asyncio.gather(*(ask(variant, f"p{i % 5}-{j}", i) for j in range(4)))

    return [
        Case("langgraph saver, a run (per run)", 1, alone),
        Case("langgraph saver, 4 runs at once", 4, four),
    ]


def adk(tmp: str) -> list[Case]:
    """The ADK session service: append an event, read the session."""
    services = {}
    for variant in ("before", "after"):
        service = FlowmemSessionService(f"sqlite:///{tmp}/adk-{variant}.db")
        if variant == "before":
            service._queues = ToThreadQueues()  # type: ignore[assignment]
        services[variant] = service
    sessions: dict[tuple[str, str], Any] = {}

    async def step(variant: str, i: int) -> None:
        service, sid = services[variant], f"s{i % 20}"  # 20 sessions: each stays short
        if (variant, sid) not in sessions:
            sessions[variant, sid] = await service.create_session(
                app_name=APP, user_id="ana", session_id=sid
            )
        content = types.Content(role="user", parts=[types.Part(text=f"message {i}")])
        event = Event(author="user", invocation_id=f"i{i}", content=content)
        await service.append_event(sessions[variant, sid], event)
        sessions[variant, sid] = await service.get_session(
            app_name=APP, user_id="ana", session_id=sid
        )

    return [Case("adk append_event + get_session", 2, step)]


def pydantic_ai(tmp: str) -> list[Case]:
    """The pydantic-ai store: load a conversation, save one more turn."""
    stores = {}
    for variant in ("before", "after"):
        store = FlowmemConversationStore.from_url(f"sqlite:///{tmp}/pa-{variant}.db")
        if variant == "before":
            store._queues = ToThreadQueues()  # type: ignore[assignment]
        stores[variant] = store

    async def step(variant: str, i: int) -> None:
        store = stores[variant]
        conversation = await store.load(f"c{i % 20}") or Conversation(conversation_id=f"c{i % 20}")
        conversation.messages.extend(
            [
                ModelRequest(parts=[UserPromptPart(f"question {i}")]),
                ModelResponse(parts=[TextPart(f"answer {i}")], model_name="m"),
            ]
        )
        await store.save(conversation)

    return [Case("pydantic-ai load + save", 2, step)]


async def measure(case: Case, variant: str, steps: int, start: int) -> tuple[float, float]:
    """Microseconds per call over ``steps`` steps, and thread hops per call."""
    loop = asyncio.get_running_loop()
    hops = 0
    submit = loop.run_in_executor

    def counted(executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        nonlocal hops
        hops += 1
        return submit(executor, func, *args)

    loop.run_in_executor = counted  # type: ignore[method-assign]
    began = time.perf_counter()
    for i in range(start, start + steps):
        await case.step(variant, i)
    seconds = time.perf_counter() - began
    calls = steps * case.calls
    return seconds / calls * 1e6, hops / calls


def main(argv: list[str]) -> int:
    """Run the cases and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40, help="steps per round and variant")
    report_json.add_arguments(parser, BENCH, "2 rounds (each order once) of 5 steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps = 2, 5  # both orders once: 3 rounds of 10 before decision 0218
    meta = report_json.environment(["langgraph", "google-adk", "pydantic-ai-slim"])
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            *langgraph(tmp),
            *saver(tmp),
            *adk(tmp),
            *pydantic_ai(tmp),
        ]  # each database opened by flowmem
        durability = {
            "flowmem/sqlite": report_json.flowmem_sqlite_durability(f"{tmp}/lg-after.db", "FULL")
        }
        report_json.describe(meta, durability)
        timings: dict[str, dict[str, list[float]]] = {
            c.name: {"before": [], "after": []} for c in cases
        }
        hops: dict[str, dict[str, float]] = {c.name: {} for c in cases}
        for round_ in range(args.rounds):
            for case in cases:
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for variant in order:
                    micros, hop = asyncio.run(
                        measure(case, variant, args.steps, round_ * args.steps)
                    )
                    timings[case.name][variant].append(micros)
                    hops[case.name][variant] = hop
    results: dict[str, Any] = {"rounds": args.rounds, "steps": args.steps, "cases": {}}
    print(
        f"\n{'case':34} {'before min/med µs':>18} {'after min/med µs':>18} {'ratio':>6} {'hops b/a':>9}"
    )
    for name, by in timings.items():
        row = {
            v: {
                "min_us": round(min(t), 1),
                "median_us": round(statistics.median(t), 1),
                "hops_per_call": hops[name][v],
            }
            for v, t in by.items()
        }
        row["ratio_of_minimums"] = round(row["after"]["min_us"] / row["before"]["min_us"], 3)
        results["cases"][name] = row
        print(
            f"{name:34} {row['before']['min_us']:8.0f}/{row['before']['median_us']:<9.0f}"
            f" {row['after']['min_us']:8.0f}/{row['after']['median_us']:<9.0f} {row['ratio_of_minimums']:6.2f}"
            f" {hops[name]['before']:4.1f}/{hops[name]['after']:<4.1f}"
        )
    report_json.write(args.json, BENCH, argv, meta, durability, [], results, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
