"""``GET /v1/buffers/...`` of a large buffer, answered page by page (issue 24 §3).

The streamed answer is byte for byte the answer the whole read gave, on memory,
SQLite and PostgreSQL; a write between two pages cuts it short instead of mixing two
states of the buffer; and quotas refuse with their code over HTTP.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from flowmem.api import create_app
from flowmem.api.paged import whole
from flowmem.api.ratelimit import RateLimits
from flowmem.limits import Limits
from flowmem.scope import ExecutionContext
from flowmem.store import Address, open_store
from tests.api.helpers import Api, make_tokens
from tests.api.transport import OneHopClient

ROWS = [{"role": "user", "content": f"row {n} " + "é✓\u2028\\\"" * 40} for n in range(1500)]


def _fill(api: Api) -> None:
    for start in range(0, len(ROWS), 500):
        answer = api.call("POST", "/v1/buffers/user/big", json={"messages": ROWS[start : start + 500]})
        assert answer.status_code == 200, answer.text


def _unpaged(api: Api, **query: Any) -> bytes:
    """The answer as the whole read wrote it (``load_text``: every row at once)."""
    memory = api.client.app.state.services.memory  # type: ignore[attr-defined]
    text = memory.load_text("user", "big", ExecutionContext(user_id="alice"), **query)
    return whole(text)


def test_a_streamed_read_is_byte_identical_to_the_whole_answer(any_api: Api) -> None:
    _fill(any_api)
    streamed = any_api.call("GET", "/v1/buffers/user/big")
    assert streamed.status_code == 200 and "content-length" not in streamed.headers  # paged
    assert streamed.content == _unpaged(any_api)
    assert [m["content"] for m in json.loads(streamed.content)["messages"]] == [
        r["content"] for r in ROWS
    ]
    page = any_api.call("GET", "/v1/buffers/user/big?last=1000").content
    assert page == _unpaged(any_api, last=1000)
    cursor = json.loads(page)["next_before"]
    older = any_api.call("GET", f"/v1/buffers/user/big?last=700&before={cursor}").content
    assert older == _unpaged(any_api, last=700, before=cursor)
    small = any_api.call("GET", "/v1/buffers/user/big?last=3")
    assert int(small.headers["content-length"]) == len(small.content)  # one page: its length
    assert small.content == _unpaged(any_api, last=3)


def test_a_write_between_two_pages_cuts_the_answer_short(
    any_api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    _fill(any_api)
    memory = any_api.client.app.state.services.memory  # type: ignore[attr-defined]
    next_page = memory.next_page
    calls: list[int] = []

    def written_meanwhile(paged: Any, after: int) -> Any:
        if not calls:  # another client appends between the first and the second page
            any_api.store.append(Address("user", "alice", "big"), [{"role": "user", "content": "new"}])
        calls.append(after)
        return next_page(paged, after)

    memory.next_page = written_meanwhile
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        answer = any_api.call("GET", "/v1/buffers/user/big")
    assert calls and answer.status_code == 200
    with pytest.raises(ValueError):
        json.loads(answer.content)  # no complete document: nobody takes it for the buffer
    assert len(answer.content) < len(_unpaged(any_api))
    assert "buffer read cut short" in caplog.text
    memory.next_page = next_page
    again = any_api.call("GET", "/v1/buffers/user/big")  # read again: the new state, whole
    assert json.loads(again.content)["count"] == len(ROWS) + 1


def test_a_provider_format_read_of_many_pages_has_every_row(any_api: Api) -> None:
    _fill(any_api)
    answer = any_api.call("GET", "/v1/buffers/user/big?format=openai").json()
    assert len(answer["messages"]) == answer["count"] == len(ROWS)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_quota_refusal_over_http_is_409_quota_exceeded(backend: str, tmp_path: Path) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/q.db"
    store = open_store(url)
    tokens = make_tokens(store)
    limits = Limits(user_buffers=1, user_records=1, user_bytes=10_000)
    app = create_app(store, limits=limits, rate_limits=RateLimits.off())
    with OneHopClient(app, raise_server_exceptions=False) as client:
        api = Api(client, store, tokens)
        row = {"messages": {"role": "user", "content": "hi"}}
        assert api.call("POST", "/v1/buffers/user/one", json=row).status_code == 200
        refused = api.call("POST", "/v1/buffers/user/two", json=row)
        assert refused.status_code == 409
        error = refused.json()["error"]
        assert error["code"] == "quota_exceeded" and "--max-user-buffers" in error["message"]
        assert api.call("GET", "/v1/buffers/user/two").json()["count"] == 0
        assert api.call("PUT", "/v1/memory/user/a", json={"value": 1}).status_code == 200
        refused = api.call("PUT", "/v1/memory/user/b", json={"value": 1})
        assert refused.json()["error"]["code"] == "quota_exceeded"
        big = {"messages": {"role": "user", "content": "x" * 20_000}}
        refused = api.call("POST", "/v1/buffers/user/one", json=big)
        assert (refused.status_code, refused.json()["error"]["code"]) == (409, "quota_exceeded")
        assert "--max-user-bytes" in refused.json()["error"]["message"]
        assert api.call("POST", "/v1/buffers/user/one", json=row, who="bob").status_code == 200
    store.close()
