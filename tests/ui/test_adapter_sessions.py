"""In Chromium: a session written by each adapter opens on its conversation (issue 37 §1, §3).

The sessions are written by the real adapters in process, on the SQLite file the
served app reads: a LangGraph thread before and after a heal (``FlowmemHealing``),
an Agents SDK session, a pydantic-ai conversation and a Google ADK session, each with
a call healed by the next user turn (MEM-3). Before issue 37 every one was listed with
0 messages and opened on the empty ``chat_history``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from urllib.parse import quote

import pytest

from flowmem.store import open_store
from tests.api.adapter_sessions import adk_session, agents_session, pydantic_session
from tests.api.langgraph_thread import _agent, crash_thread, heal_thread
from tests.ui.conftest import Inspector, Page

# session id -> (its conversation's buffer, or its prefix; rows; healed placeholders)
WRITTEN = {
    "ui-langgraph": ("langgraph#", 5, 1),
    "ui-agents": ("agent_items", 4, 1),
    "ui-pydantic": ("pydantic_ai", 4, 1),
    "ui-adk": ("adk", 5, 1),
}


def _write(inspector: Inspector, build: Any, sid: str, **options: Any) -> None:
    """Run an adapter's builder on the served database, in a thread of its own.

    The adapters' async APIs run their own event loop (``asyncio.run``), which the
    thread Playwright's sync API drives cannot start.
    """
    failed: list[BaseException] = []

    def run() -> None:
        store = open_store(inspector.database)
        try:
            build(store, sid, "alice", **options)
        except BaseException as exc:  # re-raised in the test's thread
            failed.append(exc)
        finally:
            store.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]


@pytest.fixture(scope="module")
def adapters(inspector: Inspector) -> Inspector:
    """The adapters' sessions, written once for the module."""
    if "ui-agents" not in inspector.ids:
        _write(inspector, heal_thread, "ui-langgraph")
        _write(inspector, agents_session, "ui-agents")
        _write(inspector, pydantic_session, "ui-pydantic")
        _write(inspector, adk_session, "ui-adk")
        inspector.ids["ui-agents"] = "ui-agents"
    return inspector


def _open(page: Page, sid: str) -> None:
    page.page.goto(f"{page.inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector("#conversation .msg")


def test_the_session_list_counts_each_adapters_conversation(page: Page, adapters: Inspector) -> None:
    page.login("alice")
    for sid, (buffer, rows, _) in WRITTEN.items():
        cell = page.page.locator(f'#sessions tr[data-id="{sid}"] td.count')
        text = cell.text_content() or ""
        assert text.split()[0] == str(rows), (sid, text)
        assert buffer in (cell.get_attribute("title") or ""), sid
    page.page.locator('#sessions tr[data-id="ui-langgraph"]').scroll_into_view_if_needed()
    page.shot("adapter-sessions")


@pytest.mark.parametrize("sid", list(WRITTEN))
def test_an_adapter_session_opens_on_its_conversation_with_the_placeholder_marked(
    page: Page, adapters: Inspector, sid: str
) -> None:
    buffer, rows, healed = WRITTEN[sid]
    page.login("alice")
    _open(page, sid)
    shown = page.page.text_content("#buffer-shown") or ""
    assert shown.startswith(buffer), shown
    assert "Conversation" in (page.page.text_content("#buffer-heading") or "")
    assert page.page.locator("#conversation .msg").count() == rows
    assert page.page.locator("#conversation .msg.healed").count() == healed
    assert f"{healed} healed placeholder" in (page.page.text_content("#count-healed") or "")
    assert f"Repairs · {rows} messages" in (page.page.text_content("#repairs") or "")
    page.page.wait_for_selector("#sendable")
    assert page.page.text_content("#sendable") == "sendable as is"
    assert "The buffer is empty." not in (page.page.text_content("#conversation") or "")
    if sid == "ui-langgraph":
        page.shot("adapter-langgraph-healed")


def test_a_langgraph_thread_opens_before_its_heal_and_follows_it_to_the_new_line(page: Page) -> None:
    inspector = page.inspector
    _write(inspector, crash_thread, "ui-crashed")
    page.login("alice")
    _open(page, "ui-crashed")
    assert page.page.text_content("#buffer-shown") == "langgraph"
    assert page.page.locator("#conversation .msg").count() == 2
    assert "no result yet" in (page.page.text_content("#conversation") or "")
    assert page.page.locator("#conversation .msg.healed").count() == 0
    _write(inspector, heal_thread, "ui-crashed", crashed=True)
    # the page polls: it moves to the thread's new head line and marks the placeholder
    page.page.wait_for_function(
        "() => (document.getElementById('buffer-shown')?.textContent || '').startsWith('langgraph#')"
    )
    page.page.wait_for_selector("#conversation .msg.healed")
    assert page.page.locator("#conversation .msg").count() == 5
    # the heal is in the new line's repair log: marked on the placeholder, live
    mark = page.page.wait_for_selector('#row-2 .badge.repair[data-kind="heal"]')
    assert "call_w1" in (mark.text_content() or "")
    listed = page.page.locator("#buffer-list li")
    assert listed.count() == 2
    stale = page.page.locator('#buffer-list li[data-buffer="langgraph"]')
    assert "stale line (history)" in (stale.text_content() or "")
    assert "langgraph · 3 messages" in (stale.text_content() or "")
    page.page.reload()
    page.page.wait_for_selector("#conversation .msg.healed")
    assert (page.page.text_content("#buffer-shown") or "").startswith("langgraph#")
    page.page.wait_for_selector('#row-2 .badge.repair[data-kind="heal"]')
    assert page.page.locator("#repair-log-list li").count() == 1


def test_another_buffer_of_the_session_opens_from_the_list(page: Page) -> None:
    inspector = page.inspector
    sid = "ui-mixed"
    inspector.call("POST", "/v1/buffers/session/chat_history", params={"session_id": sid},
                   json={"messages": [{"role": "user", "content": "an API turn"},
                                      {"role": "assistant", "content": "an API answer"}]})
    _write(inspector, agents_session, sid)  # created after chat_history: the conversation
    page.login("alice")
    _open(page, sid)
    assert page.page.text_content("#buffer-shown") == "agent_items"
    item = page.page.locator('#buffer-list li[data-buffer="chat_history"]')
    assert "chat_history · 2 messages" in (item.text_content() or "")
    item.locator("a").click()
    page.page.wait_for_selector("#conversation >> text=an API answer")
    assert page.page.text_content("#buffer-shown") == "chat_history"
    assert "not the conversation" in (page.page.text_content("#buffer-heading") or "")
    assert page.page.locator("#conversation .msg").count() == 2
    page.page.locator('#buffer-list li[data-buffer="agent_items"] a').click()
    page.page.wait_for_function("() => document.getElementById('buffer-shown')?.textContent === 'agent_items'")
    page.page.wait_for_selector("#conversation .msg.healed")
    assert page.page.locator("#conversation .msg").count() == 4


# ---- the repair log of each adapter's conversation (issue 37 §2) ---------------------------


def agents_late(store: Any, sid: str, user: str) -> None:
    """``agents_session``, then the late result of ``call_a1``: it replaces the placeholder (MEM-10)."""
    from flowmem.integrations.openai_agents import FlowmemSession
    from flowmem.scope import ExecutionContext
    from flowmem.service import MemoryService

    agents_session(store, sid, user)
    session = FlowmemSession(sid, MemoryService(store), context=ExecutionContext(session_id=sid, user_id=user))
    late = {"type": "function_call_output", "call_id": "call_a1", "output": "sunny, late"}
    asyncio.run(session.add_items([late]))


def langgraph_late(store: Any, sid: str, user: str) -> None:
    """``heal_thread``, then a late ``ToolMessage`` for ``call_w1`` written as the tools node would."""
    from langchain_core.messages import ToolMessage

    heal_thread(store, sid, user)
    config: Any = {"configurable": {"thread_id": sid, "user_id": user}}
    late = ToolMessage("sunny, late", tool_call_id="call_w1", id="late-w1")
    _agent(store).update_state(config, {"messages": [late]}, as_node="tools")


def adk_late(store: Any, sid: str, user: str) -> None:
    """``adk_session``, then the late function response of ``c1``."""
    from flowmem.integrations.adk import FlowmemSessionService
    from flowmem.service import MemoryService
    from tests.integrations.adk.events import result

    adk_session(store, sid, user)
    service = FlowmemSessionService(MemoryService(store))

    async def write() -> None:
        session = await service.get_session(app_name="app", user_id=user, session_id=sid)
        assert session is not None
        await service.append_event(session, result("c1", 5))

    asyncio.run(write())


LATE = {"ui-agents-late": agents_late, "ui-langgraph-late": langgraph_late, "ui-adk-late": adk_late}
ROW_KINDS = {"MEM-3": "heal", "MEM-10": "replace"}  # the entries whose positions are rows now
# what each conversation's log holds of them, newest first: every adapter logs its heal,
# and its late result's replacement (a LangGraph line: the result after the placeholder)
LOGGED = {
    **{sid: [("heal", "MEM-3")] for sid in WRITTEN},
    **{sid: [("replace", "MEM-10"), ("heal", "MEM-3")] for sid in LATE},
}


@pytest.fixture(scope="module")
def late(adapters: Inspector) -> Inspector:
    """The adapters' sessions, and one per adapter where a late result followed the heal."""
    for sid, build in LATE.items():
        if sid not in adapters.ids:
            _write(adapters, build, sid)
            adapters.ids[sid] = sid
    return adapters


def _conversation_log(inspector: Inspector, sid: str) -> list[dict[str, Any]]:
    """The repair log of the session's conversation buffer, as the API answers it to alice."""
    found = inspector.call("GET", f"/v1/sessions/{sid}")
    assert found.status_code == 200, found.text
    buffer = found.json()["conversation"]["buffer"]
    answer = inspector.call("GET", f"/v1/buffers/session/{quote(buffer, safe='')}/repairs",
                            params={"session_id": sid, "limit": 1000})
    assert answer.status_code == 200, answer.text
    entries: list[dict[str, Any]] = answer.json()["repairs"]
    return entries


@pytest.mark.parametrize("sid", [*WRITTEN, *LATE])
def test_an_adapter_sessions_repairs_are_marked_from_its_log_after_a_reload(
    page: Page, late: Inspector, sid: str
) -> None:
    logged = [(e["kind"], e["rule"]) for e in _conversation_log(late, sid) if e["rule"] in ROW_KINDS]
    assert logged == LOGGED[sid], "every adapter logs its heal and its late result (issue 37 §2)"
    page.login("alice")
    _open(page, sid)
    page.page.reload()
    page.page.wait_for_selector("#conversation .msg")
    page.page.wait_for_selector("#repair-log h3")
    # the log as it is once the page has read the buffer (a read that drops a row notes it: MEM-5)
    entries = _conversation_log(late, sid)
    page.page.wait_for_function(
        "seqs => JSON.stringify([...document.querySelectorAll('#repair-log-list li')]"
        ".map(i => Number(i.dataset.seq))) === JSON.stringify(seqs)",
        arg=[entry["seq"] for entry in entries][:20],
    )
    assert _conversation_log(late, sid) == entries
    if not entries:
        assert page.page.locator("#repair-log-empty").is_visible()
    marked = 0
    for entry in entries:
        kind = entry.get("kind") or ROW_KINDS.get(entry["rule"])
        if kind not in ("heal", "replace"):
            continue
        for position in entry["positions"]:
            mark = page.page.locator(f'#row-{position} .badge.repair[data-seq="{entry["seq"]}"]')
            assert mark.count() == 1, (entry, position)
            assert entry["call_ids"][0] in (mark.text_content() or "")
            marked += 1
    assert page.page.locator("#conversation .badge.repair").count() == marked


def test_an_agents_sdk_late_result_is_marked_on_its_replacement_row_after_a_reload(
    page: Page, late: Inspector
) -> None:
    page.login("alice")
    _open(page, "ui-agents-late")
    page.page.reload()
    mark = page.page.wait_for_selector('#row-2 .badge.repair[data-kind="replace"]')
    assert (mark.text_content() or "").startswith("replaced a placeholder for call call_a1 at ")
    assert "MEM-10" in (mark.text_content() or "")
    healed = page.page.locator('#row-2 .badge.repair[data-kind="heal"]').text_content() or ""
    assert "stood here until its result came" in healed
    assert page.page.locator("#conversation .msg.healed").count() == 0
    assert "sunny, late" in (page.page.text_content("#row-2") or "")
    page.page.locator("#repair-log").scroll_into_view_if_needed()
    page.shot("repair-agents")


@pytest.mark.parametrize(("sid", "placeholder", "result"), [("ui-langgraph-late", 2, 5), ("ui-adk-late", 2, 2)])
def test_a_late_result_is_marked_on_its_row_and_the_heal_on_the_placeholders_after_a_reload(
    page: Page, late: Inspector, sid: str, placeholder: int, result: int
) -> None:
    page.login("alice")
    _open(page, sid)
    page.page.reload()
    mark = page.page.wait_for_selector(f'#row-{result} .badge.repair[data-kind="replace"]')
    assert "MEM-10" in (mark.text_content() or "")
    assert page.page.locator(f'#row-{placeholder} .badge.repair[data-kind="heal"]').count() == 1
    assert page.page.locator(f"#conversation .msg.healed#row-{result}").count() == 0  # the real result
    if sid == "ui-langgraph-late":  # appended after the placeholder, which stays
        assert "sunny, late" in (page.page.text_content(f"#row-{result}") or "")
        assert page.page.locator(f"#conversation .msg.healed#row-{placeholder}").count() == 1
