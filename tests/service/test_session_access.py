"""``flowmem.service.session_access``: MEM-9 for an in-process caller, and a delete as that caller."""

from __future__ import annotations

import pytest

from flowmem.errors import AccessDeniedError, InvalidInputError
from flowmem.service import MemoryService
from flowmem.service.session_access import delete_session, judge_session
from flowmem.store import MemoryStore
from flowmem.store.base import SessionRecord


@pytest.fixture
def memory() -> MemoryService:
    service = MemoryService(MemoryStore())
    service.store.create_session(SessionRecord(id="hers", name="", owner="alice"))
    service.store.create_session(SessionRecord(id="nobodys", name="", owner=None))
    return service


def test_mem_9_an_owner_may_view_drive_and_delete_her_session(memory: MemoryService) -> None:
    for action in ("view", "drive", "delete_session"):
        verdict = judge_session(memory, "hers", "alice", action)
        assert verdict.exists and verdict.allowed, action


def test_mem_9_another_user_may_not_act_on_a_session(memory: MemoryService) -> None:
    verdict = judge_session(memory, "hers", "bob", "view")
    assert verdict.exists and not verdict.allowed and verdict.rule == "MEM-9"


def test_mem_9_a_caller_without_a_user_acts_only_on_unowned_or_absent_sessions(
    memory: MemoryService,
) -> None:
    assert judge_session(memory, "nobodys", None, "delete_session").allowed
    absent = judge_session(memory, "absent", None, "view")
    assert absent.allowed and not absent.exists
    owned = judge_session(memory, "hers", "None", "view")  # not a usable identity: nobody
    assert not owned.allowed and owned.rule == "MEM-9"


def test_mem_15_a_user_may_not_act_on_a_session_that_does_not_exist(memory: MemoryService) -> None:
    verdict = judge_session(memory, "absent", "alice", "view")
    assert not verdict.exists and not verdict.allowed


def test_a_session_id_the_api_would_refuse_is_a_typed_error(memory: MemoryService) -> None:
    with pytest.raises(InvalidInputError):
        judge_session(memory, "x" * 256, "alice", "view")
    with pytest.raises(InvalidInputError):
        delete_session(memory, "a\x00b", "alice")


def test_mem_9_a_delete_by_another_user_raises_and_deletes_nothing(memory: MemoryService) -> None:
    with pytest.raises(AccessDeniedError) as refused:
        delete_session(memory, "hers", "bob")
    assert refused.value.rule == "MEM-9"
    with pytest.raises(AccessDeniedError):
        delete_session(memory, "hers", None)
    assert memory.store.get_session("hers") is not None


def test_a_delete_by_the_owner_deletes_the_session_and_its_scope(memory: MemoryService) -> None:
    memory.write_raw("session", "hers", "k", {"v": 1})
    assert delete_session(memory, "hers", "alice") is True
    assert memory.store.get_session("hers") is None
    assert not memory.read_raw("session", "hers", "k").found


def test_a_delete_of_a_session_that_does_not_exist_changes_nothing(memory: MemoryService) -> None:
    assert delete_session(memory, "absent", None) is False
    assert delete_session(memory, "absent", "alice") is False
