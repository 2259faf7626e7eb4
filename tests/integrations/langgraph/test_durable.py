"""``DurableCheckpoints``: what the write-ahead waits on (decision 0097), without LangGraph running."""

from __future__ import annotations

import threading
import time

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from flowmem.errors import ThreadForkedError
from flowmem.integrations.langgraph.durable import (
    HEALED_ID_PREFIX,
    DurableCheckpoints,
    open_calls,
    ran_tools,
)

KEY = ("t", "", "cp-1")


def _call(*ids: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"id": i, "name": "f", "args": {}} for i in ids])


def test_open_calls_are_the_newest_turns_unanswered_calls() -> None:
    assert open_calls([HumanMessage("q"), _call("a", "b")]) == {"a", "b"}
    assert open_calls([HumanMessage("q"), _call("a", "b"), ToolMessage("x", tool_call_id="a")]) == {"b"}
    assert open_calls([_call("a"), ToolMessage("x", tool_call_id="a"), AIMessage("done")]) == set()
    assert open_calls([HumanMessage("q")]) == set()


def test_a_placeholder_is_not_a_tool_that_ran() -> None:
    placeholder = ToolMessage("interrupted", tool_call_id="a", id=f"{HEALED_ID_PREFIX}a")
    assert not ran_tools([_call("a"), placeholder], frozenset({"a"}), HEALED_ID_PREFIX)
    assert ran_tools([_call("a"), ToolMessage("18C", tool_call_id="a")], frozenset({"a"}), HEALED_ID_PREFIX)
    assert not ran_tools([_call("a")], frozenset({"a"}), HEALED_ID_PREFIX)


def test_a_waiter_wakes_when_the_put_lands() -> None:
    durable = DurableCheckpoints()
    threading.Timer(0.1, durable.stored, args=(KEY,)).start()
    started = time.monotonic()
    assert durable.wait(KEY, 5, lambda: False) is True
    assert time.monotonic() - started < 2


def test_a_waiter_gives_up_after_its_timeout_and_a_lookup_answers_first() -> None:
    durable = DurableCheckpoints()
    assert durable.wait(KEY, 0.05, lambda: False) is False
    assert durable.wait(("t", "", "cp-2"), 5, lambda: True) is True
    assert durable.is_stored(("t", "", "cp-2"))


def test_a_failed_put_raises_to_its_waiters() -> None:
    durable = DurableCheckpoints()
    threading.Timer(0.05, durable.failed, args=(KEY, ThreadForkedError("moved", thread_id="t"))).start()
    with pytest.raises(ThreadForkedError):
        durable.wait(KEY, 5, lambda: False)


def test_only_an_unwaited_checkpoint_whose_calls_a_tool_answered_is_unguarded() -> None:
    durable = DurableCheckpoints()
    durable.stored(KEY, frozenset({"a"}))
    answered = [[_call("a"), ToolMessage("18C", tool_call_id="a")]]
    assert durable.unguarded(KEY, answered, HEALED_ID_PREFIX)
    durable.is_stored(KEY)  # a task looked: it waited
    assert not durable.unguarded(KEY, answered, HEALED_ID_PREFIX)
    read = ("t", "", "cp-3")
    durable.stored(read, frozenset({"a"}))
    durable.read(read)  # a run that read it started its tasks after it was stored
    assert not durable.unguarded(read, answered, HEALED_ID_PREFIX)


def test_what_it_remembers_is_bounded() -> None:
    durable = DurableCheckpoints(capacity=3)
    for i in range(10):
        durable.stored(("t", "", f"cp-{i}"))
    assert durable.is_stored(("t", "", "cp-9")) and not durable.is_stored(("t", "", "cp-0"))
