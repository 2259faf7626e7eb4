"""Message lines' speed seams equal their plain forms (issue 42 §4, decision 0155).

``message_lists`` does not scan again the channels a ``put`` just stored as lines, and
``LineHead.extended_by`` compares identities without copying a slice of the list: both
must answer exactly what the plain code answers.
"""

from __future__ import annotations

import operator
import struct
import sys
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from flowmem.integrations.langgraph import saver as saver_module
from flowmem.integrations.langgraph.durable import open_after, open_calls
from flowmem.integrations.langgraph.lines import (
    ADDRESSES,
    LineHead,
    addresses,
    is_message_list,
    message_channels,
    message_lists,
    open_calls_of,
)
from flowmem.integrations.langgraph.saver import FlowmemSaver


def _plain(values: Mapping[str, Any]) -> list[Any]:
    return [v for v in values.values() if is_message_list(v)]


class State(TypedDict):
    """Two message channels (one written every other step), a list of strings, a counter."""

    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[AnyMessage], add_messages]
    tags: Annotated[list[str], operator.add]
    n: int


def _agent(state: State) -> dict[str, Any]:
    n = state.get("n", 0) + 1
    out: dict[str, Any] = {"n": n, "tags": [f"t{n}"]}
    if n % 3 == 1:
        out["messages"] = [
            AIMessage("", id=f"ai-{n}", tool_calls=[{"name": "f", "args": {}, "id": f"c{n}"}])
        ]
    elif n % 3 == 2:
        out["messages"] = [ToolMessage("done", tool_call_id=f"c{n - 1}", id=f"tool-{n}")]
    else:
        out["messages"] = [AIMessage(f"answer {n}", id=f"ai-{n}")]
    if n % 2 == 0:
        out["notes"] = [HumanMessage(f"note {n}", id=f"note-{n}")]
    return out


def _route(state: State) -> str:
    return "agent" if state["n"] % 7 else END


@pytest.mark.filterwarnings(
    "ignore:FlowmemSaver.*without waiting:RuntimeWarning"
)  # async durability
def test_message_lists_is_the_plain_scan_on_every_put_of_a_graph(
    saver: FlowmemSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each put's message lists (the open calls' input) are the plain scan's, object by object."""
    compared: list[int] = []
    by_head: list[str] = []  # list channels outside ``lines`` a remembered head answered

    def checked(values: Mapping[str, Any], lines: Any, head_of: Any = None) -> list[Any]:
        got = message_lists(values, lines, head_of)
        plain = _plain(values)
        assert len(got) == len(plain) and all(map(operator.is_, got, plain))
        compared.append(len(lines))
        for channel, value in values.items():
            head = None if head_of is None or channel in lines else head_of(channel)
            if head is not None and isinstance(value, list) and head.extended_by(value):
                by_head.append(channel)
        return got

    opened: list[int] = []  # lists whose open calls a head answered for, read past it only

    def open_checked(messages: list[Any], head: LineHead | None) -> frozenset[str]:
        got = open_calls_of(messages, head)
        assert got == open_calls(messages)
        opened.append(head is not None)
        return got

    monkeypatch.setattr(saver_module, "message_channels", checked_channels(checked))
    monkeypatch.setattr(saver_module, "open_calls_of", open_checked)
    builder = StateGraph(State)
    builder.add_node("agent", _agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["agent", END])
    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "lines-seam"}}
    for turn in range(3):
        start = cast(State, {"messages": [HumanMessage(f"q{turn}", id=f"q-{turn}")], "n": 0})
        graph.invoke(start, config)
    graph.update_state(config, {"tags": ["edited"]})  # a put whose message lists were not written
    assert len(compared) > 20 and 0 in compared and 2 in compared
    # each invoke's input checkpoint and the edit hold lists read back, not written: heads answer
    assert by_head.count("messages") >= 3 and "notes" in by_head
    assert sum(opened) > 20  # a head answered: the put's own, or the one a read remembered


def checked_channels(checked: Any) -> Any:
    """``message_channels`` whose lists go through ``checked`` (the plain scan's comparison)."""

    def channels(values: Mapping[str, Any], lines: Any, head_of: Any = None) -> Any:
        found = message_channels(values, lines, head_of)
        assert [v for v, _ in found] == checked(values, lines, head_of)
        return found

    return channels


def test_message_lists_counts_a_line_channel_without_scanning_it() -> None:
    """A channel named in ``lines`` is not scanned (its put proved it); the others are."""
    msgs = [HumanMessage("a", id="a")]
    values = {
        "messages": msgs,
        "tags": ["x"],
        "empty": [],
        "n": 3,
        "other": [AIMessage("b", id="b")],
    }
    assert message_lists(values, {"messages"}) == _plain(values) == [msgs, values["other"]]
    assert message_lists(values, ()) == _plain(values)


def _extended_by_plain(head: LineHead, messages: list[Any]) -> bool:
    if len(messages) < head.count:
        return False
    return all(map(operator.is_, messages[: head.count], head.messages))


def test_line_head_extended_by_answers_as_the_sliced_comparison() -> None:
    """Identity of the stored prefix, checked without a slice: the same answer in every case."""
    base: list[BaseMessage] = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(5)]
    head = LineHead("k", 5, tuple(base))
    cases: list[list[BaseMessage]] = [
        base,
        [*base, AIMessage("new", id="new")],
        base[:4],
        [],
        [*base[:2], HumanMessage("m2", id="m2"), *base[3:]],  # equal, not the same object
        [base[1], base[0], *base[2:]],
        list(reversed(base)),
    ]
    for messages in cases:
        assert head.extended_by(messages) == _extended_by_plain(head, messages)
    assert head.extended_by(cases[1]) and not head.extended_by(cases[4])


# --- the stored prefix's identities compared as addresses (decision 0177) -----------------
_POOL = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(6)]


def _edited(base: list[BaseMessage], edits: list[tuple[str, int]]) -> list[Any]:
    """``base`` after ``edits``: what a reducer, a fork or a rewrite may hand the next put."""
    out: list[Any] = list(base)
    for kind, at in edits:
        i = at % (len(out) + 1)
        if kind == "append":
            out.append(AIMessage(f"new {at}", id=f"new-{at}"))
        elif kind == "copy" and out and isinstance(out[i % len(out)], BaseMessage):
            out[i % len(out)] = out[i % len(out)].model_copy()  # equal, not the stored object
        elif kind == "same" and out:  # a pool message put back, maybe elsewhere
            out[i % len(out)] = _POOL[at % len(_POOL)]
        elif kind == "remove" and out:
            del out[i % len(out)]
        elif kind == "swap" and len(out) > 1:
            j = i % len(out)
            out[j - 1], out[j] = out[j], out[j - 1]
        elif kind == "truncate":
            del out[i:]
        elif kind == "other":  # not a message at all
            out.insert(i, "text")
    return out


_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["append", "copy", "same", "remove", "swap", "truncate", "other"]),
        st.integers(0, 40),
    ),
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_POOL), max_size=8),
    _EDITS,
)
def test_extended_by_is_the_identity_of_each_stored_message(
    stored: list[BaseMessage], edits: list[tuple[str, int]]
) -> None:
    """The addresses' answer is ``is`` one by one, for a list, a tuple and addresses given."""
    head = LineHead("k", len(stored), tuple(stored))
    messages = _edited(stored, edits)
    expected = _extended_by_plain(head, messages)
    objects = tuple(messages)
    assert head.extended_by(messages) == expected
    assert head.extended_by(objects) == expected
    assert head.extended_by(objects, addresses(objects)) == expected


def test_a_line_heads_identities_are_its_messages_addresses_on_cpython() -> None:
    """CPython reads the addresses (no walk of ``is``), one word per message, as ``id`` gives them."""
    messages = tuple(_POOL)
    head = LineHead("k", len(messages), messages)
    assert ADDRESSES is (sys.implementation.name == "cpython")
    if ADDRESSES:
        assert head.addresses == struct.pack(f"{len(messages)}P", *map(id, messages))
    assert addresses(cast(Any, list(messages))) is None  # only a tuple, which holds its items


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_POOL), min_size=1, max_size=6),
    _EDITS,
    st.booleans(),
    st.lists(st.sampled_from(["text", 1, None]), max_size=2),
)
def test_message_lists_with_heads_is_the_plain_scan(
    stored: list[BaseMessage], edits: list[tuple[str, int]], proven: bool, tags: list[Any]
) -> None:
    """A head answers for the prefix it proved; the rest, and every other channel, are scanned.

    A head not proven to hold messages only (one read back with something else in it)
    answers for nothing."""
    held: list[Any] = list(stored) if proven else [*stored, "text"]
    head = LineHead("k", len(held), tuple(held), all_messages=proven)
    values = {"messages": _edited(held, edits), "tags": tags, "n": 1, "other": list(held)}
    heads = {"messages": head, "other": head, "tags": head}
    got = message_lists(values, (), heads.get)
    plain = _plain(values)
    assert len(got) == len(plain) and all(map(operator.is_, got, plain))


@settings(max_examples=60, deadline=None)
@given(st.lists(_EDITS, min_size=1, max_size=5))
def test_a_rewritten_or_forked_list_starts_a_new_line_and_reads_back_exactly(
    rounds: list[list[tuple[str, int]]],
) -> None:
    """Put after put, each edited from the last: a list that does not start with the stored
    objects (an equal copy, a removal, a swap) is never appended to their line, and every
    checkpoint reads back its own list, from this saver and from a fresh one."""
    from flowmem.service import MemoryService
    from flowmem.store import open_store

    store = open_store("memory://")
    saver = FlowmemSaver(MemoryService(store))
    config: RunnableConfig = {"configurable": {"thread_id": "rewritten", "checkpoint_ns": ""}}
    current: list[Any] = [HumanMessage("q", id="q")]
    written: list[tuple[RunnableConfig, list[Any]]] = []
    for version, edits in enumerate([[], *rounds], start=1):
        current = [m for m in _edited(current, edits) if isinstance(m, BaseMessage)]
        known = saver.heads.get("rewritten", "", "messages")
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": current}
        checkpoint["channel_versions"] = {"messages": version}
        config = saver.put(
            config, checkpoint, {"source": "update", "step": version}, {"messages": version}
        )
        written.append((config, list(current)))
        head = saver.heads.get("rewritten", "", "messages")
        if current:
            assert head is not None and head.count == len(current)
            if known is not None:  # the same line exactly when it starts with the stored objects
                assert (head.key == known.key) == _extended_by_plain(known, current)
    fresh = FlowmemSaver(MemoryService(store))
    for config_at, messages in written:
        for reader in (saver, fresh):
            found = reader.get_tuple(config_at)
            assert found is not None
            assert found.checkpoint["channel_values"].get("messages", []) == messages
    store.close()


# --- a list's open calls from its head (decision 0177) -------------------------------------
def _turn(kind: str, at: int) -> BaseMessage:
    ids = [f"c{at % 4}", f"c{(at + 1) % 4}"]
    if kind == "call":
        return AIMessage(
            "", id=f"a{at}", tool_calls=[{"name": "f", "args": {}, "id": i} for i in ids]
        )
    if kind == "answer":
        return ToolMessage("ok", tool_call_id=ids[0], id=f"t{at}")
    if kind == "ai":
        return AIMessage(f"text {at}", id=f"a{at}")
    return HumanMessage(f"q {at}", id=f"h{at}")


_TURNS = st.lists(
    st.builds(_turn, st.sampled_from(["call", "answer", "ai", "human"]), st.integers(0, 9)),
    max_size=8,
)


def _open_calls_walk(messages: list[BaseMessage]) -> frozenset[str]:
    """The plain reading: the newest AI message's call ids that no later tool message answers."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return frozenset(
                c["id"] for c in message.tool_calls if c.get("id") and c["id"] not in answered
            )
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
    return frozenset()


@settings(max_examples=400, deadline=None)
@given(_TURNS, _TURNS)
def test_open_after_is_open_calls_of_the_whole_list(
    prefix: list[BaseMessage], added: list[BaseMessage]
) -> None:
    """The prefix's open calls and the added messages give the whole list's."""
    whole = _open_calls_walk([*prefix, *added])
    assert open_calls(prefix) == _open_calls_walk(prefix) and open_calls(added) == _open_calls_walk(
        added
    )
    assert open_after(open_calls(prefix), added) == open_calls([*prefix, *added]) == whole
    head = LineHead("k", len(prefix), tuple(prefix))
    assert open_calls_of([*prefix, *added], head) == open_calls([*prefix, *added])
    assert open_calls_of(added, None) == open_calls(added)


# The store's own write path (a connection borrowed or opened, a group commit joined or led,
# a condition notified) varies by a few dozen calls from put to put with the threads' timing;
# what this test counts is what the saver, LangGraph, LangChain and pydantic do per note.
_INCIDENTAL_STDLIB = {"threading.py", "weakref.py", "functools.py", "contextlib.py", "queue.py"}


def _incidental(filename: str) -> bool:
    """Whether a call is the store's write path or the threads' machinery, not the lines' reading."""
    return "/flowmem/store/" in filename or filename.rsplit("/", 1)[-1] in _INCIDENTAL_STDLIB


def _calls_of_puts(saver: FlowmemSaver, graph: Any) -> list[int]:
    """Python calls of each ``put`` of one invoke: a "go", then 10 steps each adding one note."""
    counts: list[int] = []
    put = saver.put

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls = [0]

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and not _incidental(frame.f_code.co_filename):
                calls[0] += 1

        sys.setprofile(profile)
        try:
            return put(*args, **kwargs)
        finally:
            sys.setprofile(None)
            counts.append(calls[0])

    saver.put = counted  # type: ignore[method-assign]
    try:
        _go(graph)
    finally:
        saver.put = put  # type: ignore[method-assign]
    return counts


_NOTES: RunnableConfig = {"configurable": {"thread_id": "notes"}, "recursion_limit": 100}


def _go(graph: Any) -> None:
    n = len(graph.get_state(_NOTES).values.get("messages", []))
    graph.invoke({"messages": [HumanMessage("go", id=f"go-{n}")]}, _NOTES)


def _notes_graph(saver: FlowmemSaver) -> Any:
    """A "go" and 10 notes an invoke, all human messages (``MessagesState``)."""

    def note(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [HumanMessage(f"note {n}", id=f"note-{n}")]}

    def route(state: MessagesState) -> str:
        messages = state["messages"]
        since = next(
            i for i in range(len(messages) - 1, -1, -1) if str(messages[i].id).startswith("go")
        )
        return "note" if len(messages) - since - 1 < 10 else END

    builder = StateGraph(MessagesState)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    builder.add_conditional_edges("note", route, ["note", END])
    return builder.compile(checkpointer=saver)


def test_a_list_with_no_ai_message_is_not_read_whole_at_each_put() -> None:
    """A channel of human notes (no AI message to stop ``open_calls``): each put reads its new
    notes only, the same calls at 11 and at 110 notes (it read every note: 2 failed
    attribute lookups through pydantic each, ~5 µs a note; 110 notes, not 440: a put that
    reads every note makes hundreds of calls more there, 10 allowed). Both counted invokes follow
    another: an invoke's first put on a line already stored reads its open calls once
    (11 calls more than on a new line, at any length)."""
    from flowmem.service import MemoryService
    from flowmem.store import open_store

    store = open_store("memory://")
    saver = FlowmemSaver(MemoryService(store))
    graph = _notes_graph(saver)
    _go(graph)
    short = _calls_of_puts(saver, graph)
    for _ in range(8):
        _go(graph)
    long = _calls_of_puts(saver, graph)
    store.close()
    assert len(short) == len(long) >= 10
    for before, after in zip(short, long, strict=True):
        assert after - before <= 10, (short, long)
