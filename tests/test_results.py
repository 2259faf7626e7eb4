"""The results name their refusal: ``refused`` in process, in ``to_dict`` and back (MEM-7, decision 0047)."""

from __future__ import annotations

import pytest

from flowmem.results import BufferResult, PopResult, ReadResult, WriteResult
from flowmem.scope import REFUSAL_CODES, ExecutionContext, Refusal, resolve_scope
from flowmem.service import MemoryService
from flowmem.store import MemoryStore

ROW = {"role": "user", "content": "hi"}


def test_mem_7_memory_service_results_say_which_refusal() -> None:
    service = MemoryService(MemoryStore())
    no_session = ExecutionContext(user_id="alice")
    results = [
        service.append("session", "chat", ROW, no_session),
        service.load("session", "chat", no_session),
        service.read("session", "k", no_session, default=1),
        service.write("session", "k", 1, no_session),
        service.delete("session", "k", no_session),
        service.clear("session", "chat", no_session),
        service.pop_last("session", "chat", no_session),
        service.load_page("session", "chat", no_session, last=5),
        service.load_text("session", "chat", no_session),
        service.iter_load("session", "chat", no_session),
    ]
    assert [r.refused for r in results] == ["no_session_id"] * len(results)
    assert service.append("user", "chat", ROW, None).refused == "no_context"
    assert service.append("user", "chat", ROW, ExecutionContext(user_id="  ")).refused == (
        "unusable_user_id"
    )
    assert service.append("user", "chat", ROW, ExecutionContext(user_id="alice")).refused is None


def test_mem_7_the_neutral_shape_only_gains_refused() -> None:
    refusal = resolve_scope("session", ExecutionContext())
    assert isinstance(refusal, Refusal)
    assert BufferResult(refusal=refusal).to_dict() == {
        "messages": [],
        "count": 0,
        "appended": 0,
        "appended_any": False,
        "resolved_scope_id": "",
        "refused": "no_session_id",
    }
    assert "refused" not in BufferResult().to_dict()
    assert ReadResult(refusal=refusal).to_dict()["refused"] == "no_session_id"
    assert WriteResult(refusal=refusal).to_dict()["refused"] == "no_session_id"
    assert PopResult(refusal=refusal).to_dict()["refused"] == "no_session_id"
    assert BufferResult(refusal=refusal) == BufferResult()  # a refusal does not change equality


@pytest.mark.parametrize("code", sorted(REFUSAL_CODES))
def test_every_refusal_code_reads_back_as_its_refusal(code: str) -> None:
    refusal = Refusal.from_code(code)
    assert refusal.code == code
    assert (refusal.scope, refusal.reason) == REFUSAL_CODES[code]


def test_a_code_this_version_does_not_know_is_kept() -> None:
    assert Refusal.from_code("no_tenant_id").code == "no_tenant_id"
