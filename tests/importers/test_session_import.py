"""Importing a Claude Code transcript into a session: exact, idempotent, healing, all or nothing (issue 41 §4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.errors import AccessDeniedError, TranscriptError
from flowmem.formats import to_anthropic
from flowmem.importers import ImportResult, import_claude_code
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import open_store
from tests.importers.helpers import (
    ARCHIVED_ROWS,
    BEFORE_COMPACTION,
    DATA,
    KEY,
    LIVE,
    LIVE_ROWS,
    SESSION,
    SKIPPED,
    lines_until,
)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def service(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[MemoryService]:
    """A memory service over each backend."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    else:
        url = request.getfixturevalue("postgres_store_url")  # migrated already
    store = open_store(url, create=True)
    try:
        yield MemoryService(store)
    finally:
        store.close()


def _rows(service: MemoryService, user: str | None = None) -> list[dict[str, Any]]:
    context = ExecutionContext(session_id=SESSION, user_id=user)
    return service.load("session", KEY, context, include_archived=True).messages


def _sent(service: MemoryService) -> list[dict[str, Any]]:
    system, messages = to_anthropic(_rows(service))
    assert system is None
    return messages


def _live(service: MemoryService) -> list[dict[str, Any]]:
    return service.load("session", KEY, ExecutionContext(session_id=SESSION)).messages


def test_mem_3_a_transcript_imports_exactly_block_for_block(service: MemoryService) -> None:
    result = import_claude_code(service, DATA)
    assert result == ImportResult(SESSION, KEY, 21, 18, 1, LIVE_ROWS, SKIPPED)
    assert _sent(service) == BEFORE_COMPACTION + LIVE
    live = _live(service)
    assert len(live) == LIVE_ROWS and to_anthropic(live)[1] == LIVE
    assert len(_rows(service)) == ARCHIVED_ROWS + LIVE_ROWS


def test_the_rows_keep_their_lines_times_and_the_compactions_facts(service: MemoryService) -> None:
    import_claude_code(service, DATA)
    rows = _rows(service)
    first = rows[0]
    assert first["metadata"]["extra"]["claude_code"] == {"uuids": ["u-0001"]}
    assert first["timestamp"] == 1796119200  # 2026-12-01T10:00:00Z
    assert rows[1]["metadata"]["extra"]["claude_code"] == {
        "uuids": ["a-0001", "a-0002", "a-0003"],
        "message_id": "msg_01A",
    }
    summary = rows[ARCHIVED_ROWS]
    mark = summary["metadata"]["extra"]["claude_code"]
    assert mark["uuids"] == ["c-0001"]
    assert mark["compact_summary"] == {
        "boundary_line": 20,
        "boundary_uuid": "b-0001",
        "logical_parent_uuid": "a-0008",
        "metadata": {"trigger": "manual", "preTokens": 18250},
    }
    assert summary["metadata"]["summary"]["archived"] == ARCHIVED_ROWS  # flowmem's own compaction mark
    assert not any(
        u.startswith("s-") for row in rows for u in row["metadata"].get("extra", {}).get("claude_code", {}).get("uuids", [])
    )


def test_mem_1_mem_2_importing_twice_stores_nothing_twice(service: MemoryService) -> None:
    import_claude_code(service, DATA)
    before = _rows(service)
    again = import_claude_code(service, DATA)
    assert (again.lines_new, again.rows_stored, again.compactions, again.count) == (0, 0, 0, LIVE_ROWS)
    assert _rows(service) == before


@pytest.mark.parametrize("cut", ["u-0002", "a-0007", "u-0008"])
def test_a_longer_transcript_stores_only_its_new_lines(service: MemoryService, cut: str) -> None:
    first = import_claude_code(service, lines_until(cut))
    rest = import_claude_code(service, DATA)
    assert first.lines_new + rest.lines_new == 21
    assert first.rows_stored + rest.rows_stored == 18
    assert _sent(service) == BEFORE_COMPACTION + LIVE
    assert len(_rows(service)) == ARCHIVED_ROWS + LIVE_ROWS


def test_a_message_cut_between_its_lines_goes_on_in_a_row_of_its_own(service: MemoryService) -> None:
    import_claude_code(service, lines_until("a-0001"))  # the thinking block written, not yet the text and tool_use
    rest = import_claude_code(service, DATA)
    assert rest.lines_new == 19
    rows = _rows(service)
    assert [r["metadata"]["extra"]["claude_code"]["uuids"] for r in rows[1:3]] == [["a-0001"], ["a-0002", "a-0003"]]
    assert _sent(service) == BEFORE_COMPACTION + LIVE  # consecutive assistant rows send as one message


def test_mem_3_an_interrupted_tool_use_is_healed_when_the_next_user_turn_arrives(service: MemoryService) -> None:
    import_claude_code(service, lines_until("a-0007"))
    rows = _rows(service)
    assert rows[-1]["metadata"]["tool_calls"][0]["tool_call_id"] == "toolu_04Edit"  # no placeholder yet
    import_claude_code(service, lines_until("u-0005"))
    rows = _rows(service)
    assert rows[-2]["metadata"] == {"tool_call_id": "toolu_04Edit", "healed": True}
    assert rows[-1]["metadata"]["extra"]["claude_code"]["uuids"] == ["u-0005"]


def test_an_import_cut_short_by_a_crash_is_completed_by_the_next(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    appended: list[int] = []
    real = service.append

    def crash_after_the_compaction(*args: Any, **kwargs: Any) -> Any:
        appended.append(1)
        if len(appended) == 2:  # the rows after the compaction's summary
            raise RuntimeError("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(service, "append", crash_after_the_compaction)
    with pytest.raises(RuntimeError):
        import_claude_code(service, DATA)
    monkeypatch.setattr(service, "append", real)
    assert len(_live(service)) == 1  # the summary stored, the rest not
    done = import_claude_code(service, DATA)
    assert (done.lines_new, done.compactions) == (6, 0)  # u-0007 … a-0011
    assert _sent(service) == BEFORE_COMPACTION + LIVE


def _replace(line_no: int, text: str) -> bytes:
    lines = DATA.split(b"\n")
    lines[line_no - 1] = text.encode()
    return b"\n".join(lines)


def _entry(uuid: str) -> dict[str, Any]:
    for raw in DATA.split(b"\n")[:-1]:
        entry: dict[str, Any] = json.loads(raw)
        if entry.get("uuid") == uuid:
            return entry
    raise KeyError(uuid)


def _changed(uuid: str, change: Any) -> str:
    entry = _entry(uuid)
    change(entry)
    return json.dumps(entry)


BAD_LINES = {
    "not JSON": (9, '{"type": "user", "uuid": '),
    "not an object": (9, "[1, 2]"),
    "no type": (9, '{"uuid": "x"}'),
    "no uuid": (9, _changed("u-0003", lambda e: e.pop("uuid"))),
    "no message": (9, _changed("u-0003", lambda e: e.pop("message"))),
    "role is not the type's": (9, _changed("u-0003", lambda e: e["message"].update(role="assistant"))),
    "thinking without its signature": (4, _changed("a-0001", lambda e: e["message"]["content"][0].pop("signature"))),
    "tool_result in an assistant message": (6, _changed("a-0003", lambda e: e["message"]["content"][0].update(type="tool_result"))),
    "a flag that is not a boolean": (12, _changed("s-0001", lambda e: e.update(isSidechain="yes"))),
    "a time that is not ISO 8601": (9, _changed("u-0003", lambda e: e.update(timestamp="yesterday"))),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_refuses_the_file_naming_the_line_and_stores_nothing(service: MemoryService, case: str) -> None:
    line_no, text = BAD_LINES[case]
    with pytest.raises(TranscriptError) as refused:
        import_claude_code(service, _replace(line_no, text))
    assert refused.value.details["line"] == line_no
    assert refused.value.message.startswith(f"line {line_no}: ")
    assert _rows(service) == []
    assert service.store.get_session(SESSION) is None


def test_a_truncated_last_line_is_named_and_the_stored_prefix_is_left_as_it_was(service: MemoryService) -> None:
    import_claude_code(service, lines_until("u-0002"))
    before = _rows(service)
    cut = lines_until("a-0004")[:-40]  # the writer was stopped inside line 8
    with pytest.raises(TranscriptError, match=r"^line 8: truncated"):
        import_claude_code(service, cut)
    assert _rows(service) == before


def test_a_session_of_another_owner_refuses_the_import(service: MemoryService) -> None:
    import_claude_code(service, lines_until("u-0002"), user_id="alice")
    before = _rows(service, "alice")
    with pytest.raises(AccessDeniedError):
        import_claude_code(service, DATA, user_id="bob")
    assert _rows(service, "alice") == before
    assert service.store.get_session(SESSION).owner == "alice"


def test_the_session_can_be_named_instead_of_the_transcripts(service: MemoryService) -> None:
    result = import_claude_code(service, DATA, session_id="my-session", key="cc")
    assert (result.session_id, result.key) == ("my-session", "cc")
    rows = service.load("session", "cc", ExecutionContext(session_id="my-session"), include_archived=True).messages
    assert to_anthropic(rows)[1] == BEFORE_COMPACTION + LIVE


def test_a_subagents_own_file_imports_nothing_and_creates_no_session(service: MemoryService) -> None:
    sidechain = b"".join(line + b"\n" for line in DATA.split(b"\n") if b'"isSidechain":true' in line)
    result = import_claude_code(service, sidechain)
    assert (result.session_id, result.lines_new, dict(result.skipped)) == (SESSION, 0, {"sidechain": 2})
    assert service.store.get_session(SESSION) is None
