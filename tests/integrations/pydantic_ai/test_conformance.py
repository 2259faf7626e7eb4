"""``FlowmemConversationStore`` beside pydantic-ai's ``InMemoryConversationStore``, on every backend.

Each scenario runs the same calls on both stores and records what they give back:
conversations, entries, records, and the exceptions raised. Entry ids and revisions are
minted at random, so both traces name them by order of appearance; the traces must
then be equal. A deleted conversation's id stays deleted in flowmem (decision 0042), so
no scenario saves one again: tests/integrations/pydantic_ai/test_sessions.py does.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import fields, is_dataclass
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessagesTypeAdapter

from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from tests.integrations.pydantic_ai.messages import answer, call, prompt, result

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
Trace = list[Any]


class Names:
    """Names random ids by their order of first appearance."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str) and UUID.match(value):
            return self.seen.setdefault(value, f"id{len(self.seen)}")
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        return value


def _conversation(c: Conversation | None) -> Any:
    if c is None:
        return None
    return {
        "messages": ModelMessagesTypeAdapter.dump_python(c.messages, mode="json"),
        "id": c.conversation_id,
        "revision": c.revision,
        "new_message_index": c.new_message_index,
        "deferred": c.deferred_tool_requests is not None,
    }


def _entries(found: list[ConversationEntry] | None) -> Any:
    if found is None:
        return None
    return [
        (e.id, e.parent_id, ModelMessagesTypeAdapter.dump_python([e.message], mode="json")) for e in found
    ]


def _record(r: ConversationRecord) -> Any:
    return {
        f.name: getattr(r, f.name)
        for f in fields(r)
        if f.name not in {"updated_at", "usage", "deferred_tool_requests"}
    }


def _shown(value: Any) -> Any:
    if isinstance(value, Conversation) or value is None:
        return _conversation(value)
    if isinstance(value, list) and value and isinstance(value[0], ConversationEntry):
        return _entries(value)
    if isinstance(value, list) and value and isinstance(value[0], ConversationRecord):
        return [_record(r) for r in value]
    if is_dataclass(value) and isinstance(value, ConversationRecord):
        return _record(value)
    return value


async def step(trace: Trace, name: str, made: Awaitable[Any]) -> Any:
    """Await ``made`` and record its outcome (or the class of what it raised)."""
    try:
        value = await made
    except (UserError, KeyError, LookupError) as exc:
        trace.append((name, "raised", type(exc).__name__))
        return None
    trace.append((name, _shown(value)))
    return value


# --- scenarios ---------------------------------------------------------------------------
async def save_and_load(store: ConversationStore, trace: Trace) -> None:
    conversation = Conversation(conversation_id="c1", messages=[prompt("hi", 0), answer("hello", 1)])
    await step(trace, "save", store.save(conversation))
    loaded = await step(trace, "load", store.load("c1"))
    await step(trace, "entries", store.load_entries("c1"))
    loaded.messages.extend([prompt("more", 2, "r2"), answer("sure", 3, "r2")])
    await step(trace, "save more", store.save(loaded))
    await step(trace, "save nothing new", store.save(loaded))
    for limit in (0, 1, 3, 10):
        await step(trace, f"load limit {limit}", store.load("c1", limit=limit))
    await step(trace, "entries limit 2", store.load_entries("c1", limit=2))
    await step(trace, "negative limit", store.load("c1", limit=-1))
    await step(trace, "unknown", store.load("nope"))
    await step(trace, "unknown entries", store.load_entries("nope"))


async def conflicts(store: ConversationStore, trace: Trace) -> None:
    first = Conversation(conversation_id="c1", messages=[prompt("a", 0)])
    await step(trace, "save", store.save(first))
    twin = Conversation(conversation_id="c1", messages=[prompt("b", 0)])
    await step(trace, "save a twin", store.save(twin))
    stale = await store.load("c1")
    fresh = await store.load("c1")
    fresh.messages.append(answer("x", 1))
    await step(trace, "save fresh", store.save(fresh))
    stale.messages.append(answer("y", 1))
    await step(trace, "save stale", store.save(stale))
    await step(trace, "branch stale", store.branch("c1", at=0, expected_revision=stale.revision))
    await step(trace, "branch no revision", store.branch("c1", at=0, expected_revision=None))
    record = await store.read_record("c1")
    await step(
        trace,
        "write stale",
        store.write_record(record, expected_revision="not-the-revision"),
    )
    await step(trace, "records", store.list_conversations())


async def scopes(store: ConversationStore, trace: Trace) -> None:
    owned = Conversation(conversation_id="c1", messages=[prompt("mine", 0)])
    await step(trace, "save alice", store.save(owned, scope="alice"))
    await step(trace, "load bob", store.load("c1", scope="bob"))
    await step(trace, "entries bob", store.load_entries("c1", scope="bob"))
    loaded = await step(trace, "load alice", store.load("c1", scope="alice"))
    loaded.messages.append(answer("yours", 1))
    await step(trace, "save as bob", store.save(loaded, scope="bob"))
    await step(trace, "save unscoped", store.save(loaded))
    await step(trace, "list alice", store.list_conversations(scope="alice"))
    await step(trace, "list bob", store.list_conversations(scope="bob"))
    await step(trace, "delete as bob", store.delete("c1", scope="bob"))
    await step(trace, "still there", store.load("c1"))
    await step(trace, "branch as bob", store.branch("c1", at=0, expected_revision=None, scope="bob"))
    await step(trace, "fork as bob", store.fork("c1", new_conversation_id="f1", source_scope="bob"))
    await step(trace, "delete as alice", store.delete("c1", scope="alice"))
    await step(trace, "gone", store.load("c1"))


async def branches(store: ConversationStore, trace: Trace) -> None:
    history = [prompt("1", 0), answer("a", 1), prompt("2", 2, "r2"), answer("b", 3, "r2")]
    await step(trace, "save", store.save(Conversation(conversation_id="c1", messages=history)))
    loaded = await store.load("c1")
    tip = (await store.load_entries("c1"))[-1].id
    branched = await step(trace, "branch at 2", store.branch("c1", at=2, expected_revision=loaded.revision))
    branched.messages.extend([prompt("2'", 4, "r3"), answer("b'", 5, "r3")])
    await step(trace, "save on the branch", store.save(branched))
    await step(trace, "load the branch", store.load("c1"))
    await step(trace, "record", store.read_record("c1"))
    now = await store.load("c1")
    back = await step(
        trace, "back to the old tip", store.branch("c1", from_entry=tip, expected_revision=now.revision)
    )
    await step(trace, "load the old tip", store.load("c1"))
    await step(trace, "record after", store.read_record("c1"))
    back.messages.extend([prompt("3", 6, "r4"), answer("c", 7, "r4")])
    await step(trace, "continue the old tip", store.save(back))
    await step(trace, "load continued", store.load_entries("c1"))
    now = await store.load("c1")
    await step(trace, "at out of range", store.branch("c1", at=99, expected_revision=now.revision))
    await step(trace, "both at and entry", store.branch("c1", at=1, from_entry=tip, expected_revision=now.revision))
    await step(trace, "unknown entry", store.branch("c1", from_entry="x", expected_revision=now.revision))
    await step(trace, "branch to nothing", store.branch("c1", at=0, expected_revision=now.revision))
    await step(trace, "load empty", store.load("c1"))
    empty = await store.load("c1")
    empty.messages.append(prompt("fresh", 8, "r5"))
    await step(trace, "save on empty", store.save(empty))
    await step(trace, "load fresh", store.load_entries("c1"))
    await step(trace, "record at end", store.read_record("c1"))


async def rewrites(store: ConversationStore, trace: Trace) -> None:
    history = [prompt("1", 0), answer("a", 1), prompt("2", 2, "r2"), answer("b", 3, "r2")]
    await step(trace, "save", store.save(Conversation(conversation_id="c1", messages=history)))
    loaded = await store.load("c1")
    rewritten = Conversation(
        conversation_id="c1",
        messages=[prompt("1", 0), answer("a, compacted", 1), prompt("3", 4, "r3")],
        revision=loaded.revision,
    )
    await step(trace, "save a rewrite", store.save(rewritten))
    await step(trace, "load", store.load_entries("c1"))
    await step(trace, "record", store.read_record("c1"))
    again = await store.load("c1")
    extended = Conversation(
        conversation_id="c1", messages=[*again.messages, answer("c", 5, "r3")], revision=again.revision
    )
    await step(trace, "save an extension unmarked", store.save(extended))
    await step(trace, "load extended", store.load_entries("c1"))
    windowed = await store.load("c1", limit=2)
    windowed.messages.append(prompt("4", 6, "r4"))
    await step(trace, "save a window", store.save(windowed))
    await step(trace, "load after the window", store.load_entries("c1"))


async def forks(store: ConversationStore, trace: Trace) -> None:
    history = [prompt("1", 0), answer("a", 1), prompt("2", 2, "r2"), answer("b", 3, "r2")]
    await step(trace, "save", store.save(Conversation(conversation_id="c1", messages=history), scope="alice"))
    entries = await store.load_entries("c1")
    forked = await step(trace, "fork at 2", store.fork("c1", at=2, new_conversation_id="f1"))
    await step(trace, "fork entries", store.load_entries("f1"))
    await step(trace, "fork record", store.read_record("f1"))
    forked.messages.extend([prompt("2f", 4, "r3"), answer("bf", 5, "r3")])
    await step(trace, "save the fork", store.save(forked))
    await step(trace, "fork entries after", store.load_entries("f1"))
    await step(trace, "source untouched", store.load_entries("c1"))
    await step(
        trace, "fork from an entry", store.fork("c1", from_entry=entries[2].id, new_conversation_id="f2", scope="bob")
    )
    await step(trace, "f2", store.load_entries("f2", scope="bob"))
    await step(trace, "whole fork", store.fork("c1", new_conversation_id="f3"))
    await step(trace, "fork onto an existing id", store.fork("c1", new_conversation_id="f1"))
    await step(trace, "fork at nothing", store.fork("c1", at=0, new_conversation_id="f4"))
    await step(trace, "f4", store.load("f4"))
    await step(trace, "fork of unknown", store.fork("nope", new_conversation_id="f5"))
    await step(trace, "fork source scope", store.fork("c1", new_conversation_id="f6", source_scope="bob"))
    await step(trace, "delete the source", store.delete("c1"))
    await step(trace, "f1 after the source went", store.load_entries("f1"))
    await step(trace, "f3 after the source went", store.load("f3"))
    loaded = await store.load("f3")
    loaded.messages.append(prompt("go on", 6, "r4"))
    await step(trace, "continue f3", store.save(loaded))
    await step(trace, "f3 continued", store.load_entries("f3"))
    await step(trace, "fork of a fork", store.fork("f1", at=3, new_conversation_id="g1"))
    await step(trace, "g1", store.load_entries("g1"))


async def listing(store: ConversationStore, trace: Trace) -> None:
    for number, (cid, scope) in enumerate([("a1", "alice"), ("b1", "bob"), ("a2", "alice")]):
        conversation = Conversation(conversation_id=cid, messages=[prompt(cid, number)])
        await step(trace, f"save {cid}", store.save(conversation, scope=scope))
        await asyncio.sleep(0.002)
    await step(trace, "list", store.list_conversations())
    await step(trace, "list 2", store.list_conversations(limit=2))
    await step(trace, "list 0", store.list_conversations(limit=0))
    await step(trace, "list alice", store.list_conversations(scope="alice"))
    await step(trace, "list nobody", store.list_conversations(scope="carol"))
    await step(trace, "negative", store.list_conversations(limit=-1))
    b1 = await store.load("b1")
    b1.messages.append(answer("later", 5))
    await step(trace, "touch b1", store.save(b1))
    await step(trace, "list after", store.list_conversations())
    await step(trace, "delete a1", store.delete("a1"))
    await step(trace, "delete unknown", store.delete("zz"))
    await step(trace, "list at end", store.list_conversations())


async def tools(store: ConversationStore, trace: Trace) -> None:
    history = [prompt("1", 0), call("t1", "t2", t=1), result("t1", "t2", t=2), answer("a", 3)]
    await step(trace, "save", store.save(Conversation(conversation_id="c1", messages=history)))
    await step(trace, "load", store.load_entries("c1"))
    loaded = await store.load("c1")
    loaded.messages.extend([prompt("2", 4, "r2"), call("t3", t=5, run="r2"), result("t3", t=6, run="r2")])
    await step(trace, "save more calls", store.save(loaded))
    await step(trace, "load more", store.load("c1"))
    now = await store.load("c1")
    await step(trace, "branch between call and result", store.branch("c1", at=6, expected_revision=now.revision))
    await step(trace, "record", store.read_record("c1"))


SCENARIOS: dict[str, Callable[[ConversationStore, Trace], Awaitable[None]]] = {
    "save_and_load": save_and_load,
    "conflicts": conflicts,
    "scopes": scopes,
    "branches": branches,
    "rewrites": rewrites,
    "forks": forks,
    "listing": listing,
    "tools": tools,
}


def _trace(store: ConversationStore, scenario: Callable[[ConversationStore, Trace], Awaitable[None]]) -> Trace:
    trace: Trace = []
    asyncio.run(scenario(store, trace))
    return Names()(trace)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_flowmem_store_behaves_as_the_in_memory_store(
    name: str, flowmem_store: FlowmemConversationStore
) -> None:
    expected = _trace(InMemoryConversationStore(), SCENARIOS[name])
    got = _trace(flowmem_store, SCENARIOS[name])
    for index, (want, have) in enumerate(zip(expected, got, strict=False)):
        assert have == want, f"step {index}: {want[0]}"
    assert len(got) == len(expected)
