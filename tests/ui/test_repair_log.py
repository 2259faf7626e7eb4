"""In Chromium: the buffer's repair log on the conversation and as a timeline (issue 37 §2).

The page reads ``GET …/repairs`` (decision 0116): each entry is marked on the rows it
touched (its ``positions``, indexes in the buffer as read) and listed newest first,
paged with ``before``. So a heal (MEM-3) is marked after a reload, a placeholder a
later append replaced (MEM-10) is marked on the replacement row, which the rows alone
no longer tell apart from any result, and a duplicate refused beside a stored row
(MEM-1) is in the timeline with how many. Before, the page marked only what it saw
change while it polled (decision 0086).
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.ui.conftest import XSS, Inspector, Page

LOG_PAGE = 20  # the timeline's page (repairs.js's REPAIR_PAGE)
SHOWN = 2000  # the rows a session view reads (app.js's MAX_ROWS)


def stamp(at: float) -> str:
    """An entry's time as the page writes it (UTC, to the second)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(int(at)))


def call_turn(*ids: str) -> dict[str, Any]:
    """An assistant turn calling ``lookup`` once per id."""
    return {"role": "assistant", "content": "", "tool_calls": [
        {"tool_call_id": cid, "name": "lookup", "args": {"q": cid}} for cid in ids]}


def log_of(inspector: Inspector, sid: str, **params: Any) -> list[dict[str, Any]]:
    """The session's ``chat_history`` repair log as alice reads it from the API."""
    answer = inspector.call(
        "GET", "/v1/buffers/session/chat_history/repairs", params={"session_id": sid, **params}
    )
    assert answer.status_code == 200, answer.text
    entries: list[dict[str, Any]] = answer.json()["repairs"]
    return entries


def open_log(page: Page, sid: str) -> None:
    """Open a session and wait for its conversation and its repair log."""
    page.page.goto(f"{page.inspector.url}/ui#/session/{sid}")
    page.page.wait_for_selector("#conversation .msg")
    page.page.wait_for_selector("#repair-log h3")


def test_mem_3_a_heal_is_marked_on_its_placeholder_after_a_reload(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("logged heal")
    inspector.append(sid, [{"role": "user", "content": "Look it up."}, call_turn("call_h"),
                           {"role": "user", "content": "Hello?"}])
    [heal] = log_of(inspector, sid)
    assert (heal["rule"], heal["positions"]) == ("MEM-3", [2])
    page.login("alice")
    open_log(page, sid)
    page.page.reload()
    mark = page.page.wait_for_selector('#row-2 .badge.repair[data-kind="heal"]')
    text = mark.text_content() or ""
    assert "healed" in text and "call_h" in text and stamp(heal["at"]) in text and "MEM-3" in text
    assert page.page.locator("#conversation .badge.repair").count() == 1
    item = page.page.locator("#repair-log-list li")
    assert item.count() == 1
    said = item.text_content() or ""
    assert item.get_attribute("data-kind") == "heal"
    for part in (stamp(heal["at"]), "healed", "MEM-3", "× 1", "call_h", "#2"):
        assert part in said, part
    assert "1 repair logged" in (page.page.text_content("#count-logged") or "")


def test_mem_10_a_replacement_is_marked_on_its_row_after_a_reload(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("logged replacement")
    inspector.append(sid, [{"role": "user", "content": "Look it up."}, call_turn("call_r"),
                           {"role": "user", "content": "Hello?"}])
    # the late result replaces the placeholder before the page is ever opened
    inspector.append(sid, [{"role": "tool", "tool_call_id": "call_r", "content": "found it, late"}])
    replaced, heal = log_of(inspector, sid)
    assert (replaced["rule"], replaced["positions"], heal["rule"]) == ("MEM-10", [2], "MEM-3")
    page.login("alice")
    open_log(page, sid)
    page.page.reload()
    mark = page.page.wait_for_selector('#row-2 .badge.repair[data-kind="replace"]')
    assert (mark.text_content() or "").startswith(
        f"replaced a placeholder for call call_r at {stamp(replaced['at'])}"
    )
    healed = page.page.locator('#row-2 .badge.repair[data-kind="heal"]').text_content() or ""
    assert "a placeholder for call call_r stood here until its result came" in healed
    assert stamp(heal["at"]) in healed
    assert page.page.locator(".msg.healed").count() == 0  # the row is the real result now
    assert "found it, late" in (page.page.text_content("#row-2") or "")
    kinds = page.page.locator("#repair-log-list li").evaluate_all("items => items.map(i => i.dataset.kind)")
    assert kinds == ["replace", "heal"]  # newest first
    page.page.locator("#repair-log-list li").first.locator('a[data-row="2"]').click()
    assert page.page.locator("#row-2").is_visible()
    page.page.locator("#row-2").scroll_into_view_if_needed()
    page.shot("repair-marks")


def test_mem_1_a_duplicate_refused_beside_a_new_row_is_in_the_timeline_with_its_count(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("logged duplicates")
    results = [{"role": "tool", "tool_call_id": cid, "content": f"result {cid}"} for cid in ("d1", "d2")]
    inspector.append(sid, [{"role": "user", "content": "Both, please."}, call_turn("d1", "d2"), *results])
    # a retry re-delivers both results with a new turn: the results are refused (MEM-1)
    inspector.append(sid, [*results, {"role": "user", "content": "And now?"}])
    [duplicate] = log_of(inspector, sid)
    assert (duplicate["rule"], duplicate["count"], duplicate["call_ids"]) == ("MEM-1", 2, ["d1", "d2"])
    page.login("alice")
    open_log(page, sid)
    item = page.page.locator('#repair-log-list li[data-kind="duplicate"]')
    said = item.text_content() or ""
    for part in (stamp(duplicate["at"]), "duplicate refused", "MEM-1", "× 2", "calls: d1, d2", "rows: none"):
        assert part in said, part
    assert page.page.locator("#conversation .badge.repair").count() == 0  # it wrote no row
    assert page.page.locator("#conversation .msg").count() == 5


def test_the_timeline_pages_older_entries_with_before(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("many heals")
    heals = LOG_PAGE + 5
    inspector.append(sid, [{"role": "user", "content": "start"}, call_turn("c0")])
    for i in range(heals):  # each turn heals the call before it: one MEM-3 entry per append
        inspector.append(sid, [{"role": "user", "content": f"turn {i}"}, call_turn(f"c{i + 1}")])
    assert len(log_of(inspector, sid, limit=1000)) == heals
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/repairs" in r.url else None)
    page.login("alice")
    open_log(page, sid)
    seqs = "items => items.map(i => Number(i.dataset.seq))"
    items = page.page.locator("#repair-log-list li")
    assert items.evaluate_all(seqs) == list(range(heals, heals - LOG_PAGE, -1))
    assert page.page.locator("#conversation .badge.repair").count() == heals  # every mark, every page
    older = page.page.locator("#repair-older")
    assert older.is_enabled()
    older.scroll_into_view_if_needed()
    page.shot("repair-timeline")
    older.click()
    page.page.wait_for_function(f"() => document.querySelectorAll('#repair-log-list li').length === {heals}")
    assert items.evaluate_all(seqs) == list(range(heals, 0, -1))
    assert any(f"before={heals - LOG_PAGE + 1}" in url for url in asked), asked
    assert page.page.locator("#repair-older").is_disabled()


def test_a_mark_for_a_row_outside_the_rows_shown_is_not_drawn_on_another_row(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("a heal long ago")
    inspector.append(sid, [{"role": "user", "content": "old question"}, call_turn("c_old"),
                           {"role": "user", "content": "never mind"}])  # the placeholder is #2
    filler = [{"role": "assistant" if i % 2 == 0 else "user", "content": f"message {i}"} for i in range(SHOWN)]
    for start in range(0, SHOWN, 1000):
        inspector.append(sid, filler[start : start + 1000])
    inspector.append(sid, [call_turn("c_new"), {"role": "user", "content": "and this one?"}])
    new, old = log_of(inspector, sid)
    assert (old["positions"], new["positions"]) == ([2], [SHOWN + 5])
    page.login("alice")
    open_log(page, sid)
    assert page.page.locator("#conversation .badge.repair").count() == 1
    assert "c_new" in (page.page.text_content(f"#row-{SHOWN + 5} .badge.repair") or "")
    listed = page.page.locator(f'#repair-log-list li[data-seq="{old["seq"]}"]')
    assert "#2 (not among the rows shown)" in (listed.text_content() or "")
    assert listed.locator("a").count() == 0


def test_a_poll_reads_the_whole_log_only_when_it_or_the_rows_changed(page: Page) -> None:
    inspector = page.inspector
    sid = inspector.session("quiet log")
    inspector.append(sid, [{"role": "user", "content": "nothing to repair"}])
    whole: list[str] = []
    probes: list[str] = []
    page.on("request", lambda r: (whole if "limit=1000" in r.url else probes).append(r.url)
                 if "/repairs" in r.url else None)
    page.login("alice")
    open_log(page, sid)
    assert page.page.locator("#repair-log-empty").is_visible()
    page.page.wait_for_timeout(3500)  # two polls (app.js's POLL_MS is 1.5 s)
    assert len(whole) == 1 and len(probes) >= 2, (whole, probes)
    inspector.append(sid, [call_turn("c_live"), {"role": "user", "content": "still there?"}])
    page.page.wait_for_selector('#row-2 .badge.repair[data-kind="heal"]')
    assert len(whole) == 2
    assert page.page.locator("#repair-log-list li").count() == 1


def test_entries_of_every_kind_are_listed_as_text_and_only_rows_there_now_are_marked(page: Page) -> None:
    """The kinds the log is growing (evict, compact, refuse…) and an unknown one, served in place of the log."""
    inspector = page.inspector
    sid = inspector.session("kinds")
    inspector.append(sid, [{"role": "user", "content": "Look it up."}, call_turn("c_k"),
                           {"role": "user", "content": "Hello?"}])  # the placeholder is #2
    at = time.time()
    entries = [
        {"seq": 5, "at": at, "rule": "window", "kind": "evict", "call_ids": ["c_gone"], "count": 2,
         "positions": [0, 1]},
        {"seq": 4, "at": at, "rule": "compaction", "call_ids": [], "count": 3, "positions": [1],
         "archived": [1, 3]},  # no kind: the rule's
        {"seq": 3, "at": at, "rule": XSS, "kind": "teleport", "call_ids": [XSS], "count": 1, "positions": [2]},
        {"seq": 2, "at": at, "rule": "buffer_full", "call_ids": [], "count": 1, "positions": []},
        {"seq": 1, "at": at, "rule": "MEM-3", "kind": "heal", "call_ids": ["c_k"], "count": 1, "positions": [2]},
    ]

    def log(route: Any) -> None:
        limit = int(parse_qs(urlparse(route.request.url).query)["limit"][0])
        body = {"repairs": entries[:limit], "next_before": None, "resolved_scope_id": sid}
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.page.route("**/repairs?*", log)
    page.login("alice")
    open_log(page, sid)
    page.page.wait_for_selector('#repair-log-list li[data-seq="1"]')
    # only the heal is drawn: the eviction's rows and the compaction's are others now, the unknown kind's unknown
    assert page.page.locator("#conversation .badge.repair").count() == 1
    assert page.page.locator('#row-2 .badge.repair[data-kind="heal"]').count() == 1
    item = {n: page.page.locator(f'#repair-log-list li[data-seq="{n}"]') for n in range(1, 6)}
    assert [item[n].get_attribute("data-kind") for n in range(5, 0, -1)] == ["evict", "compact", "teleport", "", "heal"]
    evicted = item[5].text_content() or ""
    assert "evicted by the window" in evicted and "window" in evicted and "× 2" in evicted
    assert "rows (where they were, before this change): #0, #1" in evicted
    assert item[5].locator("a").count() == 0 and item[4].locator("a").count() == 0
    assert "compacted" in (item[4].text_content() or "") and "archived as 1–3" in (item[4].text_content() or "")
    unknown = item[3].text_content() or ""
    assert "teleport" in unknown and unknown.count(XSS) == 2  # its rule and its call id, as text
    assert item[2].locator("strong").text_content() == "buffer_full"
    injected = page.page.evaluate("() => [window.__xss ?? null, document.querySelectorAll('img[src=\"x\"]').length]")
    assert injected == [None, 0]
    assert page.dialogs == []
