"""What ``install_ui`` serves, without a browser: the redirect, the policy, the files, offline docs."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from flowmem.api import create_app
from flowmem.auth import create_token
from flowmem.store import open_store
from flowmem.ui import CSP, DOCS_FILES, STATIC, UI_FILES


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """The app over a memory store; no token is made: every page here is open."""
    store = open_store("memory://")
    with TestClient(create_app(store)) as test_client:
        yield test_client
    store.close()


def test_root_redirects_to_the_inspector(client: TestClient) -> None:
    answer = client.get("/", follow_redirects=False)
    assert answer.status_code == 307
    assert answer.headers["location"] == "/ui"


def test_the_page_and_its_files_carry_the_policy(client: TestClient) -> None:
    for path in ["/ui", *(f"/ui/static/{name}" for name in UI_FILES)]:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "'unsafe-inline'" not in CSP and "'unsafe-eval'" not in CSP


def test_the_page_has_no_inline_script_or_style(client: TestClient) -> None:
    page = client.get("/ui").text
    assert re.findall(r"<script\b[^>]*>", page) == [
        '<script src="/ui/static/repairs.js" defer>',
        '<script src="/ui/static/app.js" defer>',
    ]
    assert "<style" not in page and " style=" not in page
    assert not re.search(r"\son[a-z]+\s*=", page)  # no event handler attribute


def test_the_scripts_never_write_markup(client: TestClient) -> None:
    scripts = sorted(STATIC.glob("*.js"))
    assert [path.name for path in scripts] == ["app.js", "repairs.js"]
    assert {path.name for path in scripts} <= set(UI_FILES)  # every script shipped is served
    for path in scripts:
        script = path.read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in script, (path.name, sink)


def test_only_the_listed_files_are_served(client: TestClient) -> None:
    for path in ["/ui/static/index.html", "/ui/static/__init__.py", "/docs/static/index.html"]:
        assert client.get(path).status_code == 404, path
    assert client.get("/ui/static/..%2F__init__.py").status_code == 404


def test_docs_load_swagger_ui_from_the_server(client: TestClient) -> None:
    page = client.get("/docs").text
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(src.startswith("/docs/static/") for src in sources), sources
    for name, media in DOCS_FILES.items():
        answer = client.get(f"/docs/static/{name}")
        assert answer.status_code == 200
        assert answer.headers["content-type"].split(";")[0] == media.split(";")[0]


def test_there_is_no_redoc_page_loading_a_cdn_script(client: TestClient) -> None:
    """Issue 38 §4: FastAPI's /redoc loaded an unpinned CDN script and Google Fonts (decision 0105)."""
    answer = client.get("/redoc")
    assert answer.status_code == 401  # not an open path: like any other unknown path
    assert "cdn" not in answer.text and "fonts.googleapis" not in answer.text
    store = open_store("memory://")
    token = create_token(store, "root", {"admin"})[0]
    with TestClient(create_app(store)) as authed:
        answer = authed.get("/redoc", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "not_found"
    store.close()


def test_the_new_pages_are_not_in_the_api_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/", "/ui", "/docs"} & set(paths)
