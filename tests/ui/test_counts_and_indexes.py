"""The inspector says what the API says: the provider view's `dropped` count, rows by their index in the buffer."""

from __future__ import annotations

from typing import Any

import httpx

from tests.ui.conftest import Page

LARGE = 5000
SHOWN = 2000  # the rows a session view reads (app.js's MAX_ROWS)


def _read(page: Page, sid: str, **params: Any) -> dict[str, Any]:
    """The session's conversation buffer read as alice, with ``params``."""
    answer = page.inspector.call(
        "GET", "/v1/buffers/session/chat_history", params={"session_id": sid, **params}
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_a_provider_view_that_drops_a_row_shows_how_many(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("an orphan result")
    # a result whose call was never appended: stored as sent, dropped by normalization (MEM-5)
    inspector.append(sid, [
        {"role": "user", "content": "What did the tool say?"},
        {"role": "tool", "tool_call_id": "call_gone", "content": "an answer to nothing"},
        {"role": "assistant", "content": "Nothing I asked for."},
    ])
    said = _read(page, sid, format="openai")
    assert said["dropped"] == 1  # the API's answer: a number
    page.login("alice")
    page.page.goto(f"{inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector("#conversation .msg")
    page.page.select_option("#format", "openai")
    page.page.wait_for_function(
        "() => document.getElementById('format-drops')?.textContent.includes('dropped by normalization')"
    )
    drops = page.page.text_content("#format-drops")
    assert "1 entry dropped by normalization" in drops
    assert "nothing dropped" not in drops
    page.page.locator("#formats").scroll_into_view_if_needed()
    page.shot("dropped")


def test_a_large_session_numbers_rows_by_their_index_in_the_buffer(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("five thousand messages")
    rows = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(LARGE)
    ]
    for start in range(0, LARGE, 1000):
        inspector.append(sid, rows[start : start + 1000])
    budget = 400
    window = _read(page, sid, max_tokens=budget)["window"]
    start = window["start"]
    first = LARGE - SHOWN
    assert first < start < LARGE, window  # the cut falls among the rows shown
    page.login("alice")
    page.page.goto(f"{inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector("#conversation .msg")
    assert f"Showing the last {SHOWN} of {LARGE} messages" in page.page.text_content("#conversation")
    shown = page.page.locator("#conversation .msg")
    assert shown.count() == SHOWN
    assert shown.first.locator(".msg-head .mono").text_content() == f"#{first}"
    assert shown.first.get_attribute("data-index") == str(first)
    assert f"message {first}" in shown.first.text_content()
    assert shown.last.locator(".msg-head .mono").text_content() == f"#{LARGE - 1}"
    # the token window: the line sits right before row #window.start
    page.page.fill("#window-tokens", str(budget))
    page.page.click("form:has(#window-tokens) button")
    page.page.wait_for_selector(".window-cut")
    after = page.page.locator(".window-cut + .msg")
    assert after.locator(".msg-head .mono").text_content() == f"#{start}"
    assert f"message {start}" in after.text_content()
    assert page.page.locator(".msg.cut").count() == start - first
    assert page.page.locator(f"#row-{start}").count() == 1
    assert page.page.text_content("#repairs h3") == f"Repairs · the last {SHOWN} of {LARGE} messages"
    # a window that starts before the rows shown: no line, a note naming its start
    wide = 30_000
    wide_start = _read(page, sid, max_tokens=wide)["window"]["start"]
    assert 0 < wide_start < first, wide_start
    page.page.fill("#window-tokens", str(wide))
    page.page.click("form:has(#window-tokens) button")
    page.page.wait_for_selector("#window-before")
    assert f"starts at #{wide_start}" in page.page.text_content("#window-before")
    assert page.page.locator(".window-cut").count() == 0 and page.page.locator(".msg.cut").count() == 0


def test_check_violations_name_rows_by_their_index_in_the_buffer(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("a late violation")
    rows: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"row {i}"} for i in range(2400)
    ]
    for start in range(0, len(rows), 1000):
        inspector.append(sid, rows[start : start + 1000])
    # an orphan result at buffer index 2400: the check outlines it there
    inspector.append(sid, [{"role": "tool", "tool_call_id": "call_none", "content": "orphan"}])
    auth = {"Authorization": f"Bearer {inspector.tokens['alice']}"}
    whole = _read(page, sid)["messages"]
    with httpx.Client(headers=auth) as client:
        checked = client.post(f"{inspector.url}/v1/check", params={"format": "rows"}, json=whole).json()
    indexes = sorted({v["index"] for v in checked["violations"]})
    assert indexes == [2400], checked
    page.login("alice")
    page.page.goto(f"{inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector("#check li")
    assert page.page.locator("#check li a").all_text_contents() == ["#2400"]
    outlined = page.page.locator(".msg.violation")
    assert outlined.count() == 1
    assert outlined.get_attribute("data-index") == "2400"
    assert outlined.get_attribute("id") == "row-2400"
