"""Issue 38 §3: ``delete_thread``, ``copy_thread``, ``prune`` and ``delete_for_runs`` never touch another user's thread.

A thread is a session: deleting it needs the right to delete the session, pruning it
the right to delete (``"delete"``) or drive (``"keep_latest"``) it, deleting a run's
checkpoints the right to drive every thread the run wrote, copying it the
right to view the source and to write the target, as over HTTP (``flowmem.access``,
decision 0109). These methods take no config, so the caller is the saver's context
user. A refused call raises ``AccessDeniedError`` and changes nothing; a thread that
does not exist is skipped. Each test has a second user, bob, on alice's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from flowmem.errors import AccessDeniedError
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.store.checkpoints import CheckpointFilter
from tests.integrations.langgraph.owners import SECRET, alices, as_user, config, contents, graph


def _state(saver: FlowmemSaver, thread: str = "alices", user: str = "alice") -> list[Any]:
    """Every checkpoint of ``thread`` as its owner reads it: (id, messages), newest first."""
    return [
        (t.config["configurable"]["checkpoint_id"], contents([t]))
        for t in saver.list(config(thread, user_id=user))
    ]


def _bobs(saver: FlowmemSaver) -> FlowmemSaver:
    bob = as_user(saver, "bob")
    graph(bob).invoke({"messages": [HumanMessage("bob here", id="b")]}, config("bobs"))
    return bob


@pytest.mark.parametrize("who", ["bob", None], ids=["another-user", "no-user"])
def test_mem_9_another_user_may_not_delete_the_thread(saver: FlowmemSaver, who: str | None) -> None:
    alices(saver)
    before = _state(saver)
    with pytest.raises(AccessDeniedError, match="may not delete") as refused:
        as_user(saver, who).delete_thread("alices")
    assert refused.value.rule == "MEM-9"
    assert _state(saver) == before and SECRET in before[0][1]
    assert saver.memory.store.get_session("alices").owner == "alice"  # type: ignore[union-attr]
    as_user(saver, "alice").delete_thread("alices")  # the owner may
    assert saver.memory.store.get_session("alices") is None
    assert _state(saver) == []


@pytest.mark.parametrize("strategy", ["keep_latest", "delete"])
def test_mem_9_another_user_may_not_prune_the_thread(saver: FlowmemSaver, strategy: str) -> None:
    alices(saver)
    graph(saver).invoke({"messages": [HumanMessage("more", id="h2")]}, config("alices", user_id="alice"))
    bob = _bobs(saver)
    graph(bob).invoke({"messages": [HumanMessage("again", id="b2")]}, config("bobs"))
    before, his = _state(saver), _state(saver, "bobs", "bob")
    for caller in (bob, saver):
        with pytest.raises(AccessDeniedError):
            caller.prune(["bobs", "alices"], strategy=strategy)  # judged all before any
    assert _state(saver) == before and _state(saver, "bobs", "bob") == his
    bob.prune(["bobs"], strategy=strategy)  # his own
    assert len(_state(saver, "bobs", "bob")) == (1 if strategy == "keep_latest" else 0)
    as_user(saver, "alice").prune(["alices"], strategy=strategy)
    assert len(_state(saver)) == (1 if strategy == "keep_latest" else 0)


def test_mem_9_another_user_may_not_copy_the_thread_out_nor_into_it(saver: FlowmemSaver) -> None:
    alices(saver)
    before = _state(saver)
    bob = _bobs(saver)
    with pytest.raises(AccessDeniedError, match="may not view"):
        bob.copy_thread("alices", "bobs-copy")
    with pytest.raises(AccessDeniedError):
        saver.copy_thread("alices", "nobodys-copy")  # no user: nothing owned
    for target in ("bobs-copy", "nobodys-copy"):
        assert saver.memory.store.get_session(target) is None
        assert list(saver.tables.list_checkpoints(CheckpointFilter(target, None))) == []
    with pytest.raises(AccessDeniedError):
        bob.copy_thread("bobs", "alices")  # his own thread over hers
    assert _state(saver) == before


def test_the_owner_copies_to_a_thread_of_her_own(saver: FlowmemSaver) -> None:
    alices(saver)
    alice = as_user(saver, "alice")
    alice.copy_thread("alices", "alices-copy")
    assert saver.memory.store.get_session("alices-copy").owner == "alice"  # type: ignore[union-attr]
    assert SECRET in contents([alice.get_tuple(config("alices-copy"))])
    assert as_user(saver, "bob").get_tuple(config("alices-copy")) is None


def test_a_thread_that_does_not_exist_is_skipped(saver: FlowmemSaver) -> None:
    bob = as_user(saver, "bob")
    bob.delete_thread("nothing")
    bob.prune(["nothing"])
    bob.copy_thread("nothing", "bobs-copy")
    assert saver.memory.store.list_sessions(None, True, 10, 0)[1] == 0


def test_an_unowned_thread_is_acted_on_only_by_a_caller_without_a_user(saver: FlowmemSaver) -> None:
    graph(saver).invoke({"messages": [HumanMessage("nobody", id="n")]}, config("nobodys"))
    bob = as_user(saver, "bob")
    for act in (
        lambda: bob.delete_thread("nobodys"),
        lambda: bob.prune(["nobodys"]),
        lambda: bob.copy_thread("nobodys", "bobs-copy"),
    ):
        with pytest.raises(AccessDeniedError):
            act()
    assert contents([saver.get_tuple(config("nobodys"))]) == ["nobody", "answer 1"]
    saver.copy_thread("nobodys", "nobodys-copy")
    assert saver.memory.store.get_session("nobodys-copy").owner is None  # type: ignore[union-attr]
    saver.delete_thread("nobodys")
    assert saver.get_tuple(config("nobodys")) is None


def test_the_async_twins_refuse_alike(saver: FlowmemSaver) -> None:
    alices(saver)
    before = _state(saver)
    bob = as_user(saver, "bob")
    calls: list[Callable[[], Any]] = [
        lambda: bob.adelete_thread("alices"),
        lambda: bob.aprune(["alices"], strategy="delete"),
        lambda: bob.acopy_thread("alices", "bobs-copy"),
    ]
    for call in calls:
        with pytest.raises(AccessDeniedError):
            asyncio.run(call())
    assert _state(saver) == before
    assert saver.memory.store.get_session("bobs-copy") is None


def _run(saver: FlowmemSaver, thread: str, run: str, user: str) -> None:
    """One turn of ``user`` on ``thread`` made by the run ``run`` (its checkpoints carry the run id)."""
    said = HumanMessage(f"{run} says", id=f"h-{run}")
    graph(saver).invoke({"messages": [said]}, config(thread, user_id=user, run_id=run))


@pytest.mark.parametrize("who", ["bob", None], ids=["another-user", "no-user"])
def test_mem_9_another_user_may_not_delete_the_runs_of_the_thread(saver: FlowmemSaver, who: str | None) -> None:
    alices(saver)
    _run(saver, "alices", "run-a", "alice")
    _run(saver, "bobs", "run-b", "bob")
    before, his = _state(saver), _state(saver, "bobs", "bob")
    assert saver.tables.run_threads(["run-a", "run-b"]) == ["alices", "bobs"]
    caller = as_user(saver, who)
    for runs in (["run-a"], ["run-b", "run-a"]):  # every thread judged before any is touched
        with pytest.raises(AccessDeniedError, match="may not drive") as refused:
            caller.delete_for_runs(runs)
        assert refused.value.rule == "MEM-9"
    with pytest.raises(AccessDeniedError):
        asyncio.run(caller.adelete_for_runs(["run-a"]))
    assert _state(saver) == before and _state(saver, "bobs", "bob") == his
    as_user(saver, "bob").delete_for_runs(["run-b"])  # his own run
    assert len(_state(saver, "bobs", "bob")) < len(his)
    as_user(saver, "alice").delete_for_runs(["run-a"])  # the owner may
    assert len(_state(saver)) < len(before) and SECRET in _state(saver)[0][1]

