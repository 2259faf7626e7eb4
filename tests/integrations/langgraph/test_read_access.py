"""Issue 38 §3: ``FlowmemSaver`` reads a thread only for a caller who may view its session.

A thread is a session: reading it needs the right to view it, as over HTTP, judged by
``flowmem.access.decide`` for the same caller a write is judged for (the config's
``user_id``, else the saver's context user). A thread the caller may not view is not
found (``get_tuple`` is None, ``list`` yields nothing: decision 0107), while its writes
are refused (``AccessDeniedError``) as before. A caller without a user reads the
unowned threads it writes, and nothing owned.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from flowmem.errors import AccessDeniedError
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.scope import ExecutionContext
from tests.integrations.langgraph.owners import SECRET
from tests.integrations.langgraph.owners import alices as _alices
from tests.integrations.langgraph.owners import config as _config
from tests.integrations.langgraph.owners import contents as _contents
from tests.integrations.langgraph.owners import graph as _graph


def test_another_user_reads_nothing_of_the_thread(saver: FlowmemSaver) -> None:
    _alices(saver)
    bob = _config("alices", user_id="bob")
    assert saver.get_tuple(bob) is None
    assert list(saver.list(bob)) == []
    assert list(saver.list(bob, limit=5)) == []
    first = next(saver.list(_config("alices", user_id="alice")))
    past = _config("alices", user_id="bob", checkpoint_id=first.config["configurable"]["checkpoint_id"])
    assert saver.get_tuple(past) is None
    assert list(saver.list(past)) == []
    # and bob's writes are refused, as before
    with pytest.raises(AccessDeniedError):
        _graph(saver).invoke({"messages": [HumanMessage("mine now", id="m")]}, bob)


def test_a_config_without_a_user_reads_nothing_owned(saver: FlowmemSaver) -> None:
    _alices(saver)
    assert saver.get_tuple(_config("alices")) is None
    assert list(saver.list(_config("alices"))) == []
    assert SECRET not in _contents(saver.list(None))


def test_the_savers_context_user_is_the_reader(saver: FlowmemSaver) -> None:
    _alices(saver)
    bobs = FlowmemSaver(saver.memory, context=ExecutionContext(user_id="bob"))
    assert bobs.get_tuple(_config("alices")) is None
    assert list(bobs.list(_config("alices"))) == []
    assert SECRET not in _contents(bobs.list(None))
    alices = FlowmemSaver(saver.memory, context=ExecutionContext(user_id="alice"))
    assert SECRET in _contents([alices.get_tuple(_config("alices"))])
    # the config's user_id wins over the context's, as it does for writes
    assert alices.get_tuple(_config("alices", user_id="bob")) is None


def test_async_reads_refuse_alike(saver: FlowmemSaver) -> None:
    _alices(saver)
    bob = _config("alices", user_id="bob")

    async def read() -> tuple[Any, list[Any]]:
        return await saver.aget_tuple(bob), [t async for t in saver.alist(bob)]

    assert asyncio.run(read()) == (None, [])


def test_the_owner_reads_and_the_listing_keeps_each_users_own(saver: FlowmemSaver) -> None:
    _alices(saver)
    _graph(saver).invoke({"messages": [HumanMessage("bob here", id="b")]}, _config("bobs", user_id="bob"))
    _graph(saver).invoke({"messages": [HumanMessage("nobody", id="n")]}, _config("nobodys"))
    mine = saver.get_tuple(_config("alices", user_id="alice"))
    assert mine is not None
    assert [m.content for m in mine.checkpoint["channel_values"]["messages"]] == [SECRET, "answer 1"]
    assert len(list(saver.list(_config("alices", user_id="alice")))) == 3
    bobs = FlowmemSaver(saver.memory, context=ExecutionContext(user_id="bob"))
    assert set(_contents(bobs.list(None))) == {"bob here", "answer 1"}
    everyone = set(_contents(saver.list(None)))
    assert "nobody" in everyone and SECRET not in everyone and "bob here" not in everyone


def test_an_unowned_thread_is_read_only_by_a_caller_without_a_user(saver: FlowmemSaver) -> None:
    """access.py: an unowned session is owned by nobody; a user may neither view nor write it."""
    _graph(saver).invoke({"messages": [HumanMessage("nobody", id="n")]}, _config("nobodys"))
    assert saver.get_tuple(_config("nobodys")) is not None
    assert saver.get_tuple(_config("nobodys", user_id="bob")) is None
    assert list(saver.list(_config("nobodys", user_id="bob"))) == []
    with pytest.raises(AccessDeniedError):
        _graph(saver).invoke({"messages": [HumanMessage("mine", id="m")]}, _config("nobodys", user_id="bob"))
