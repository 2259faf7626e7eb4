"""The inspector in a real browser: login, repairs marked, markup inert, actions by access, live updates."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from flowmem.store import open_store
from tests.api.langgraph_thread import write_thread
from tests.ui.conftest import XSS, Inspector, Page, new_tab, reset_tab


def open_session(page: Page, key: str) -> None:
    """Go to one seeded session and wait for its conversation."""
    page.page.goto(f"{page.inspector.url}/ui#/session/{page.inspector.ids[key]}")
    page.page.wait_for_selector("#conversation .msg")


def test_login_lists_the_sessions_the_token_may_view(page: Page) -> None:
    page.login("alice")
    rows = page.page.locator("#sessions tbody tr")
    assert rows.count() == 2
    names = page.page.locator("#sessions td.name").all_text_contents()
    assert "weather in Lisbon" in names
    counts = page.page.locator("#sessions td.count")
    page.page.wait_for_function(
        "() => [...document.querySelectorAll('#sessions td.count')].every(c => c.textContent !== '…')"
    )
    assert sorted(counts.all_text_contents()) == ["4", "6"]
    assert page.page.evaluate("() => sessionStorage.getItem('flowmem.token')") == page.inspector.tokens["alice"]
    assert page.inspector.tokens["alice"] not in page.page.url
    page.shot("sessions")
    assert page.outside == []


def test_a_token_that_may_view_nothing_sees_no_session(page: Page) -> None:
    page.login("bob")
    assert page.page.locator("#sessions tbody tr").count() == 0


def test_sessions_filter_by_owner_and_status_across_pages(page: Page) -> None:
    inspector = page.inspector
    bobs = inspector.session("bob's session", who="bob")
    failed = inspector.session("a failed one")
    store = open_store(inspector.database)
    try:
        store.set_session_status(failed, "failed")
    finally:
        store.close()
    page.login("viewer")
    page.page.fill("#filter-owner", "bob")
    page.page.click("#filter-owner ~ button, form:has(#filter-owner) button")
    page.page.wait_for_function("() => /matches/.test(document.getElementById('sessions-said')?.textContent)")
    # the rows by id: a row's message count arrives after it (shown as … until then)
    ids = page.page.locator("#sessions tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert ids == [bobs]
    page.page.goto(inspector.url + "/ui#/sessions?status=failed")
    page.page.wait_for_function(
        "() => document.getElementById('filter-status')?.value === 'failed'"
        " && /matches/.test(document.getElementById('sessions-said')?.textContent)"
    )
    ids = page.page.locator("#sessions tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert ids == [failed]


def test_a_wrong_token_is_refused_at_login(page: Page) -> None:
    page.page.goto(page.inspector.url + "/ui")
    page.page.fill("#token", "fm_not_a_token")
    page.page.click("#login-form button")
    page.page.wait_for_function("() => document.getElementById('login-error').textContent !== ''")
    assert "401" in page.page.text_content("#login-error")
    assert page.page.evaluate("() => sessionStorage.getItem('flowmem.token')") is None


def test_a_healed_call_is_marked_and_paired_with_its_placeholder(page: Page) -> None:
    page.login("alice")
    open_session(page, "healed")
    healed = page.page.locator(".msg.healed")
    assert healed.count() == 1
    assert "healed placeholder" in healed.locator(".badge.heal").text_content()
    assert "MEM-3" in healed.text_content()
    # the call says it was answered by the placeholder, the placeholder names its call
    call = page.page.locator(".msg.role-assistant .call")
    assert "healed placeholder · #3" in call.text_content()
    assert "weather · #2" in healed.text_content()
    assert "1 healed placeholder" in page.page.text_content("#count-healed")
    page.page.wait_for_selector("#sendable")
    assert page.page.text_content("#sendable") == "sendable as is"
    # reasoning collapsed, the image shown from its data URL, the file listed
    assert page.page.locator("details.reasoning:not([open])").count() == 1
    image = page.page.locator(".media img")
    assert image.get_attribute("src").startswith("data:image/png;base64,")
    assert page.page.evaluate("() => document.querySelector('.media img').naturalWidth") == 48
    assert page.page.locator(".filename").text_content() == "lisbon.pdf"
    page.shot("conversation")
    assert page.outside == []


def test_each_provider_format_shows_what_it_drops(page: Page) -> None:
    page.login("alice")
    open_session(page, "healed")
    page.page.wait_for_selector("#format-drops li")
    page.page.select_option("#format", "openai")
    page.page.wait_for_function(
        "() => document.getElementById('format-drops').textContent.includes('reasoning')"
    )
    assert "not carried by openai" in page.page.text_content("#format-drops")
    page.page.select_option("#format", "anthropic")
    page.page.wait_for_function(
        "() => document.getElementById('format-drops').textContent.includes('nothing dropped')"
    )
    assert '"tool_use"' in page.page.text_content("#format-messages")


def test_markup_in_messages_results_file_and_session_names_stays_text(page: Page) -> None:
    page.login("alice")
    assert XSS in page.page.locator("#sessions td.name").all_text_contents()
    open_session(page, "markup")
    assert page.page.text_content("#session-name") == XSS
    text = page.page.text_content("#conversation")
    assert text.count(XSS) >= 4  # message, tool call name, tool result, text part
    assert page.page.locator(".filename").text_content() == XSS
    injected = page.page.evaluate(
        """() => ({
          xss: window.__xss === undefined ? null : window.__xss,
          imgs: document.querySelectorAll('img[src="x"]').length,
          scripts: [...document.scripts].map(s => s.src),
          images: [...document.images].map(i => i.src),
        })"""
    )
    assert injected["xss"] is None
    assert injected["imgs"] == 0
    assert injected["scripts"] == [page.inspector.url + f"/ui/static/{name}" for name in ("repairs.js", "app.js")]
    assert not any(src.startswith("javascript:") for src in injected["images"])
    assert page.dialogs == []
    assert page.outside == []


def test_the_page_has_a_strict_policy_without_inline_code(page: Page) -> None:
    answer = page.page.goto(page.inspector.url + "/ui")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    # an inline script the page did not ship is refused by the browser
    ran = page.page.evaluate(
        """() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1';
                   document.body.append(s); return window.__inline === undefined; }"""
    )
    assert ran


def test_a_viewer_sees_no_drive_action_and_a_forced_one_is_refused(page: Page) -> None:
    page.login("viewer")
    open_session(page, "healed")
    assert page.page.locator("#view-only").is_visible()
    assert page.page.locator("#actions, #send-turn, #stop, #reset").count() == 0
    path = f"/v1/sessions/{page.inspector.ids['healed']}"
    statuses = page.page.evaluate(
        """async (path) => {
          const headers = {Authorization: 'Bearer ' + sessionStorage.getItem('flowmem.token'),
                           'Content-Type': 'application/json'};
          const out = [];
          for (const [p, body] of [['/turns', {content: 'hi'}], ['/stop', null], ['/reset', null]]) {
            const r = await fetch(path + p, {method: 'POST', headers, body: body && JSON.stringify(body)});
            out.push(r.status);
          }
          return out;
        }""",
        path,
    )
    assert statuses == [403, 403, 403]
    page.shot("viewer")


def test_the_owner_drives_the_session_and_the_turn_appears(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("driven")  # not a seeded one: the other tests count the seed's rows
    inspector.append(sid, [{"role": "user", "content": "What is the weather?"}])
    page.login("alice")
    page.page.goto(f"{inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector("#conversation .msg")
    before = page.page.locator("#conversation .msg").count()
    page.page.fill("#turn-content", "And tomorrow?")
    page.page.click("#send-turn")
    page.page.wait_for_function(
        f"() => document.querySelectorAll('#conversation .msg').length > {before}"
    )
    assert "And tomorrow?" in page.page.text_content("#conversation")
    assert "turns" in page.page.text_content("#action-result")


def test_a_running_turn_shows_without_a_reload(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("live")
    inspector.append(sid, [{"role": "user", "content": "Start the report."}])
    page.login("alice")
    page.page.goto(f"{inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector("#conversation .msg")
    marker = page.page.evaluate("() => { window.__same = 1; return 1; }")
    store = open_store(inspector.database)
    try:
        store.set_session_status(sid, "running")
        inspector.append(
            sid,
            [{"role": "assistant", "content": "", "tool_calls": [
                {"tool_call_id": "call_live", "name": "search", "args": {}}]}],
        )
        page.page.wait_for_function("() => document.getElementById('session-status').textContent === 'running'")
        page.page.wait_for_selector("text=no result yet")
        inspector.append(sid, [{"role": "tool", "tool_call_id": "call_live", "content": "3 hits"}])
        page.page.wait_for_selector("text=3 hits")
        store.set_session_status(sid, "completed")
        page.page.wait_for_function("() => document.getElementById('session-status').textContent === 'completed'")
    finally:
        store.close()
    assert page.page.evaluate("() => window.__same") == marker  # the same document: no reload


def test_a_late_result_replacing_a_placeholder_is_marked_live_mem_10(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("late")
    inspector.append(sid, [
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"tool_call_id": "call_late", "name": "lookup", "args": {}}]},
        {"role": "user", "content": "Hello?"},
    ])
    page.login("alice")
    page.page.goto(f"{inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector(".msg.healed")
    inspector.append(sid, [{"role": "tool", "tool_call_id": "call_late", "content": "found it"}])
    # the page reads the repair log as it polls: the replacement row is marked from it
    page.page.wait_for_selector('#row-2 .badge.repair[data-kind="replace"] >> text=MEM-10')
    assert page.page.locator(".msg.healed").count() == 0


def test_memory_lists_records_with_their_expiry_and_reads_a_buffer(page: Page) -> None:
    inspector = page.inspector
    for key, ttl in (("profile", None), ("draft", 3600)):
        put = inspector.call("PUT", f"/v1/memory/user/{key}", json={"value": {"k": key}, "ttl": ttl})
        assert put.status_code == 200, put.text
    page.login("alice")
    page.page.goto(inspector.url + "/ui#/memory")
    page.page.click("#mem-list-form button")
    page.page.wait_for_selector("#records tbody tr")
    rows = page.page.locator("#records tbody tr").all_text_contents()
    assert rows[0].startswith("draft") and "in 3" in rows[0]
    assert rows[1].startswith("profile") and rows[1].endswith("never")
    page.page.click("#records >> text=profile")
    page.page.wait_for_function("() => (document.getElementById('mem-value') || {}).textContent?.includes('profile')")
    page.shot("memory")
    page.page.select_option("#mem-scope", "session")
    page.page.fill("#mem-scope-id", inspector.ids["healed"])
    page.page.select_option("#mem-kind", "buffer")
    page.page.fill("#mem-key", "chat_history")
    page.page.click("#mem-read-form button")
    page.page.wait_for_selector("#mem-out .msg")
    assert "healed placeholder" in page.page.text_content("#mem-out")
    page.page.select_option("#mem-scope", "global")
    page.page.click("#mem-list-form button")
    page.page.wait_for_function("() => /403/.test(document.getElementById('mem-list').textContent)")


DOCS_MS = 30_000
"""Swagger UI's bundle (~1.5 MB of script) parsed and drawn: over 10 s at a load of 17 on 2 cores."""


def test_docs_render_offline(page: Page) -> None:
    page.page.goto(page.inspector.url + "/docs")
    page.page.wait_for_selector(".swagger-ui .info .title", timeout=DOCS_MS)
    assert re.search("flowmem", page.page.text_content(".swagger-ui .info .title"))
    page.page.wait_for_selector(".opblock", timeout=DOCS_MS)
    assert page.outside == []
    page.shot("docs")


def test_a_request_off_the_servers_origin_is_blocked_and_recorded(page: Page) -> None:
    """The fixture's guard behind every ``outside == []``: off the origin blocked, the origin not."""
    from playwright.sync_api import Error as PlaywrightError

    port = int(page.inspector.url.rsplit(":", 1)[1])
    elsewhere = f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}/ui"
    other = page.page.context.new_page()  # its error page's navigation stays its own
    with pytest.raises(PlaywrightError):  # aborted: net::ERR_FAILED, or its error page
        other.goto(elsewhere)
    other.close()
    assert page.outside == [elsewhere]
    page.page.goto(page.inspector.url + "/ui")
    assert page.page.locator("#login").is_visible()
    assert page.outside == [elsewhere]


def test_root_leads_to_the_inspector(page: Page) -> None:
    page.page.goto(page.inspector.url + "/")
    assert page.page.url == page.inspector.url + "/ui"
    assert page.page.locator("#login").is_visible()


def test_a_langgraph_thread_shows_each_checkpoint_with_its_messages(page: Page) -> None:
    store = open_store(page.inspector.database)
    try:
        write_thread(store, "lg-thread", "alice", ["plan a trip", "and the budget?"])
    finally:
        store.close()
    # deleted after the test, as the sessions the API made: alice lists two sessions in the others
    page.inspector.created.append(("lg-thread", "alice"))
    page.login("alice")
    page.page.goto(f"{page.inspector.url}/ui#/session/lg-thread")
    page.page.wait_for_selector("#checkpoint-list > li")
    checkpoints = page.page.locator("#checkpoint-list > li")
    assert checkpoints.count() >= 4
    checkpoints.first.locator("summary").click()
    newest = checkpoints.first.text_content()
    assert "messages: 4 messages" in newest and "and the budget?" in newest
    assert "answer 3" in newest and "buffer langgraph" in newest
    page.page.fill("#buffer-key", "langgraph")
    page.page.click("#buffer-key + button")
    page.page.wait_for_selector("#conversation >> text=and the budget?")
    page.page.locator("#checkpoints").scroll_into_view_if_needed()
    page.shot("checkpoints")


def test_a_token_window_is_drawn_where_the_api_cuts(page: Page) -> None:
    """The page asks the real ``max_tokens`` read and draws the cut at the window's ``start``."""
    sid = page.inspector.ids["healed"]
    auth = {"Authorization": f"Bearer {page.inspector.tokens['alice']}"}
    url = f"{page.inspector.url}/v1/buffers/session/chat_history"
    with httpx.Client(headers=auth) as client:
        whole = client.get(url, params={"session_id": sid}).json()

        def fits(budget: int) -> bool:
            return client.get(url, params={"session_id": sid, "max_tokens": budget}).status_code == 200

        # the smallest budget the newest turn fits in (a larger one fits too): bisected
        low, high = 1, 4000
        assert fits(high), "the newest turn fits in no budget up to 4,000 tokens"
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if fits(middle) else (middle + 1, high)
        budget = low
        window = client.get(url, params={"session_id": sid, "max_tokens": budget}).json()["window"]
    assert window["cut_messages"] > 0, "the smallest budget that fits cuts nothing in this session"
    page.login("alice")
    open_session(page, "healed")
    page.page.fill("#window-tokens", str(budget))
    page.page.click("form:has(#window-tokens) button")
    page.page.wait_for_selector(".window-cut")
    assert page.page.locator("#conversation .msg").count() == whole["count"]
    systems = sum(1 for row in whole["messages"][: window["start"]] if row["role"] == "system")
    assert page.page.locator(".msg.cut").count() == window["start"] - systems == window["cut_messages"]
    assert f"window of {budget} tokens" in page.page.text_content(".window-cut")


def test_no_token_reaches_the_server_log(page: Page) -> None:
    page.login("alice")
    open_session(page, "healed")
    page.page.goto(page.inspector.url + "/ui#/memory")
    page.page.click("#mem-list-form button")
    page.page.wait_for_selector("#mem-list p")
    written = "".join(path.read_text(errors="replace") for path in page.inspector.logs)
    assert "/v1/sessions" in written  # the request log is on
    for token in page.inspector.tokens.values():
        assert token not in written


def test_the_tab_a_test_leaves_is_reset_to_what_a_new_page_is(browser: Any, inspector: Inspector) -> None:
    """The package's tab (decision 0215): what a test leaves in it is gone once ``reset_tab`` ran."""

    def seen(context: Any, tab: Any) -> dict[str, Any]:
        """What a test could see of what an earlier one left: pages, cookies, storage, a route."""
        found = {"url": tab.url, "pages": len(context.pages), "cookies": context.cookies()}
        tab.goto(inspector.url + "/ui")
        found["login"] = tab.locator("#login").is_visible()
        found["storage"] = tab.evaluate("() => [sessionStorage.length, localStorage.length]")
        Page(tab, [], [], inspector).login("alice")  # the route below would answer 500
        found["sessions"] = tab.locator("#sessions tbody tr").count()
        return found

    context, tab = new_tab(browser)
    plain, plain_tab = new_tab(browser)
    try:
        used = Page(tab, [], [], inspector)
        used.login("alice")
        tab.evaluate("() => localStorage.setItem('left', '1')")
        context.add_cookies([{"name": "left", "value": "1", "url": inspector.url}])
        tab.route("**/v1/sessions?*", lambda route: route.fulfill(status=500, body="{}"))
        left: list[str] = []
        used.on("request", lambda request: left.append(request.url))
        context.new_page()
        tab.goto("data:text/html,<p>off the origin</p>")
        left.clear()
        reset_tab(context, tab, inspector.url, used.listeners)
        assert used.listeners == []
        reset = seen(context, tab)
        assert reset == seen(plain, plain_tab)
        # the module's other tests may have added alice's sessions: the route's 500 shows none
        assert reset.pop("sessions") >= 2
        assert reset == {
            "url": "about:blank",
            "pages": 1,
            "cookies": [],
            "login": True,
            "storage": [0, 0],
        }
        assert left == []  # the listener the test added heard none of the requests since
    finally:
        context.close()
        plain.close()
