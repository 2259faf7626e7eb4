"""Fixtures of the browser tests: a real ``flowmem serve`` on loopback and Debian's Chromium.

One server per test module, one browser for the package (starting either costs about
a second, decision 0206), and one tab the package's tests take in turn (decision 0215):
a new context and page cost Chromium ~0.8 s of CPU (a renderer process started and its
page set up), a navigation in the tab a test leaves ~0.2 s. Each test starts on
``about:blank`` with the tab's storage, cookies, routes and listeners as a new page has
them (``reset_tab``), every request that does not go to the server's loopback address
blocked and recorded (``Page.outside``); ``$FLOWMEM_UI_FRESH_TAB=1`` gives each test a
context of its own instead (the plain path). Chromium is the system's (``apt-get install
chromium``: Playwright's own download cannot be reached here). Without it the tests are
skipped, or fail when ``CI`` is set.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowmem.store import open_store
from tests.api.helpers import make_tokens
from tests.served import flowmem_serve

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
TIMEOUT_MS = 10_000
SCREENSHOTS_ENV = "FLOWMEM_UI_SCREENSHOTS"
"""A directory: the tests save the main views there as PNG (docs/images/ is made so)."""
FRESH_TAB_ENV = "FLOWMEM_UI_FRESH_TAB"
"""Set to 1: each test gets a context and page of its own, not the package's tab (decision 0215)."""
VIEWPORT = {"width": 1180, "height": 860}


def chromium_path() -> str | None:
    """The system's Chromium, or None."""
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


@dataclass
class Inspector:
    """The server under test: its URL, a token per principal, its database URL, the seeded ids."""

    url: str
    tokens: dict[str, str]
    database: str
    logs: list[Path] = field(default_factory=list)
    """The server's stdout and stderr files (its request log, with ``--access-log``)."""
    ids: dict[str, str] = field(default_factory=dict)
    created: list[tuple[str, str]] = field(default_factory=list)
    """The sessions a test made (id, owner): the ``page`` fixture deletes them after the test."""

    def call(self, method: str, path: str, who: str = "alice", **kwargs: Any) -> httpx.Response:
        """Send a request to the server as ``who``."""
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, self.url + path, headers=headers, timeout=10, **kwargs)

    def session(self, name: str, who: str = "alice") -> str:
        """Create a session as ``who``; its id."""
        answer = self.call("POST", "/v1/sessions", who, json={"name": name})
        assert answer.status_code == 201, answer.text
        sid: str = answer.json()["id"]
        self.created.append((sid, who))
        return sid

    def forget_created(self) -> None:
        """Delete the sessions made since the seed, so the next test sees the seeded server.

        The server lives for a module, and ``--dist worksteal`` may run a module's
        tests out of their order in one worker (a stolen batch before tests it ran).
        """
        while self.created:
            sid, who = self.created.pop()
            answer = self.call("DELETE", f"/v1/sessions/{sid}", who)
            assert answer.status_code == 204, answer.text

    def append(self, session_id: str, messages: list[dict[str, Any]], who: str = "alice") -> None:
        """Append rows to a session's conversation buffer as ``who``."""
        answer = self.call(
            "POST",
            "/v1/buffers/session/chat_history",
            who,
            params={"session_id": session_id},
            json={"messages": messages},
        )
        assert answer.status_code == 200, answer.text


def png(width: int = 48, height: int = 32) -> str:
    """A small gradient PNG, base64 (an image part's data)."""
    raw = b"".join(
        b"\x00" + b"".join(bytes((x * 5, y * 7, 160)) for x in range(width)) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
    data += chunk(b"IEND", b"")
    return base64.b64encode(data).decode()


XSS = '<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=2</script>'


def seed(inspector: Inspector) -> None:
    """Sessions the tests look at: one with a healed call and media, one full of markup."""
    healed = inspector.session("weather in Lisbon")
    inspector.append(
        healed,
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Lisbon?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"tool_call_id": "call_1", "name": "weather", "args": {"city": "Lisbon"}}
                ],
            },
        ],
    )
    # the next user turn comes before the result: flowmem heals call_1 (MEM-3)
    inspector.append(
        healed,
        [
            {"role": "user", "content": "Still there? Here is the map.", "timestamp": 1700000100},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "provider": "anthropic", "text": "The tool was cut off.",
                     "signature": "c2ln"},
                    {"type": "text", "text": "The weather call was interrupted; here is the map back."},
                    {"type": "image", "data": png(), "media_type": "image/png"},
                    {"type": "file", "file_id": "file_9", "filename": "lisbon.pdf",
                     "media_type": "application/pdf"},
                ],
            },
        ],
    )
    inspector.ids["healed"] = healed
    markup = inspector.session(XSS)
    inspector.append(
        markup,
        [
            {"role": "user", "content": XSS},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"tool_call_id": "call_x", "name": XSS, "args": {"q": XSS}}],
            },
            {"role": "tool", "tool_call_id": "call_x", "content": XSS},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": XSS},
                    {"type": "file", "file_id": "f1", "filename": XSS, "media_type": "text/html"},
                    {"type": "image", "url": "javascript:alert(1)"},
                ],
            },
        ],
    )
    inspector.ids["markup"] = markup


@pytest.fixture(scope="package")
def chromium() -> str:
    """The system Chromium's path (skipped without one, failed when ``CI`` is set)."""
    path = chromium_path()
    if path is None:
        message = "no Chromium: apt-get install chromium"
        if os.environ.get("CI"):
            pytest.fail(message + " (required when CI is set)")
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspector]:
    """``flowmem serve`` over a fresh SQLite file, with a token per test principal and seeded sessions."""
    root = tmp_path_factory.mktemp("ui")
    database = f"sqlite:///{root}/ui.db"
    store = open_store(database)
    tokens = make_tokens(store)
    store.close()
    with flowmem_serve(["--database", database, "--access-log"], root) as served:
        found = Inspector(served.url, tokens, database, [served.out, served.err])
        seed(found)
        found.created.clear()  # the seed stays for the module
        yield found


@pytest.fixture(scope="package")
def browser(chromium: str) -> Iterator[Any]:
    """One headless Chromium for the browser tests a worker runs in a row (decision 0206).

    Package-scoped, not session-scoped: while Playwright's sync API is started, the
    test's thread cannot run ``asyncio.run`` (the adapters' APIs), so the browser
    stops when the worker leaves tests/ui. Each test still has its own context.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True)
        yield launched
        launched.close()


def new_tab(browser: Any) -> tuple[Any, Any]:
    """A new context and its page, as every test had one before decision 0215."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    return context, context.new_page()


def reset_tab(
    context: Any, page: Any, origin: str, listeners: list[tuple[str, Callable[..., Any]]]
) -> None:
    """Leave ``page`` as a new page of ``context`` is: on about:blank, no other page, route, listener or cookie, ``origin``'s storage empty.

    A tab keeps each origin's ``sessionStorage`` (the inspector's token) across
    navigations, and only a document of the origin can clear it: the tab goes there
    first unless it is there. ``listeners`` are those a test added (``Page.on``).
    """
    for other in context.pages:
        if other is not page:
            other.close()
    page.unroute_all(behavior="ignoreErrors")
    while listeners:
        event, handler = listeners.pop()
        page.remove_listener(event, handler)
    if not page.url.startswith(origin + "/"):
        page.goto(origin + "/health")
    page.evaluate("() => { sessionStorage.clear(); localStorage.clear(); }")
    page.goto("about:blank")
    context.clear_cookies()


@pytest.fixture(scope="package")
def tab(browser: Any) -> Iterator[dict[str, Any]]:
    """The package's context and page (``context``, ``page``; empty until a test needs them), closed at its end."""
    held: dict[str, Any] = {}
    yield held
    if held:
        held["context"].close()


@dataclass
class Page:
    """A page in its own context, the requests it made off the loopback server, its dialogs."""

    page: Any
    outside: list[str]
    dialogs: list[str]
    inspector: Inspector
    listeners: list[tuple[str, Callable[..., Any]]] = field(default_factory=list)
    """What ``on`` added: the fixture removes them after the test (the tab outlives it)."""

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        """Listen to the page's ``event`` for this test only (``page.page.on`` would outlive it)."""
        self.page.on(event, handler)
        self.listeners.append((event, handler))

    def login(self, who: str = "alice") -> None:
        """Open /, log in with ``who``'s token, wait for the sessions list."""
        self.page.goto(self.inspector.url + "/")
        self.page.fill("#token", self.inspector.tokens[who])
        self.page.click("#login-form button")
        self.page.wait_for_selector("#sessions")

    def shot(self, name: str) -> None:
        """Save the visible page as ``name``.png when ``$FLOWMEM_UI_SCREENSHOTS`` names a directory.

        With Pillow installed the image is reduced to a 64-colour palette (a few
        tens of KiB for docs/images/).
        """
        target = os.environ.get(SCREENSHOTS_ENV)
        if not target:
            return
        path = Path(target) / f"{name}.png"
        self.page.screenshot(path=str(path))
        try:
            from PIL import Image
        except ImportError:
            return
        with Image.open(path) as image:
            small = image.convert("RGB").quantize(64)
        small.save(path, optimize=True)


@pytest.fixture
def page(browser: Any, tab: dict[str, Any], inspector: Inspector) -> Iterator[Page]:
    """The package's tab, as new (a context of its own with ``$FLOWMEM_UI_FRESH_TAB``); every request off the server's origin is blocked and recorded."""
    fresh = os.environ.get(FRESH_TAB_ENV) == "1"
    if fresh:
        context, opened = new_tab(browser)
    else:
        if not tab:
            tab["context"], tab["page"] = new_tab(browser)
        context, opened = tab["context"], tab["page"]
    outside: list[str] = []
    dialogs: list[str] = []

    def blocked(route: Any) -> None:
        outside.append(route.request.url)
        route.abort()

    # only the requests off the server's origin are intercepted (Playwright's driver
    # matches the pattern): a request to the server is no longer paused and sent to this
    # process to be let go (decision 0206)
    pattern = re.compile(f"^(?!{re.escape(inspector.url + '/')}|data:)")
    context.route(pattern, blocked)

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    found = Page(opened, outside, dialogs, inspector)
    found.on("dialog", dismiss)
    try:
        yield found
    finally:
        if fresh:
            context.close()
        else:
            try:
                reset_tab(context, opened, inspector.url, found.listeners)
                context.unroute(pattern, blocked)
            except Exception:  # a tab that cannot be reset is replaced (the next test opens one)
                tab.clear()
                context.close()
                raise
        inspector.forget_created()
