"""In Chromium: a session written by each adapter opens on its conversation (issue 37 §1, §3).

The sessions are written by the real adapters in process, on the SQLite file the
served app reads: a LangGraph thread before and after a heal (``FlowmemHealing``),
an Agents SDK session, a pydantic-ai conversation and a Google ADK session, each with
a call healed by the next user turn (MEM-3). Before issue 37 every one was listed with
0 messages and opened on the empty ``chat_history``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flowmem.store import open_store
from tests.api.adapter_sessions import adk_session, agents_session, pydantic_session
from tests.api.langgraph_thread import crash_thread, heal_thread
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
    listed = page.page.locator("#buffer-list li")
    assert listed.count() == 2
    stale = page.page.locator('#buffer-list li[data-buffer="langgraph"]')
    assert "stale line (history)" in (stale.text_content() or "")
    assert "langgraph · 3 messages" in (stale.text_content() or "")
    page.page.reload()
    page.page.wait_for_selector("#conversation .msg.healed")
    assert (page.page.text_content("#buffer-shown") or "").startswith("langgraph#")


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
