"""``tests/api/transport.py``'s one-hop transport answers as starlette's own (decision 0216).

An ASGI app that answers with what it was given (its scope, the request's body, the
messages ``receive`` gave it) and one that answers in chunks, fails before or after
its response starts, sends nothing, or reads ``receive`` once its response is done;
then flowmem's app. Each request is sent through both transports; the status, the
headers and the body (or the exception raised) must be the same.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from flowmem.api import create_app
from flowmem.api.ratelimit import RateLimits
from flowmem.store import open_store
from tests.api.helpers import make_tokens
from tests.api.transport import OneHopClient, OneHopTransport

Message = dict[str, Any]


class Boom(RuntimeError):
    """What the failing routes raise."""


async def probe_app(scope: Message, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    """An ASGI app whose answers tell what it was given (by path)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": f"{message['type']}.complete"})
            if message["type"] == "lifespan.shutdown":
                return
    path = scope["path"]
    if path == "/none":
        return
    if path == "/raise-before":
        raise Boom("before the start")
    if path == "/debug":  # what starlette's templates send before their response
        await send({"type": "http.response.debug", "info": {"template": "t", "context": {}}})
    received = [await receive()]
    seen = {k: v for k, v in scope.items() if k not in ("state", "extensions")}
    seen["extensions"] = sorted(scope["extensions"])
    seen["headers"] = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    seen = {k: (v.decode("latin-1") if isinstance(v, bytes) else v) for k, v in seen.items()}
    seen["received"] = [
        {k: (v.decode("latin-1") if isinstance(v, bytes) else v) for k, v in m.items()}
        for m in received
    ]
    answer = json.dumps(seen, sort_keys=True).encode()
    headers = [(b"content-type", b"application/json"), (b"x-twice", b"1"), (b"x-twice", b"2")]
    await send(
        {
            "type": "http.response.start",
            "status": 207 if path == "/echo" else 200,
            "headers": headers,
        }
    )
    if path == "/chunks":
        for part in (b"one,", b"two,", b""):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"three"})
        return
    await send({"type": "http.response.body", "body": answer})
    if path == "/raise-after":
        raise Boom("after the start")
    if path == "/listen":  # a disconnect once the response is complete, as a server says
        after = await receive()
        assert after == {"type": "http.disconnect"}, after


REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/echo", {}),
    ("GET", "/echo?q=%C3%A9t%C3%A9&q=2&empty=", {}),
    ("GET", "/a%20path/%E2%9C%93", {"params": {"x": "y z"}}),
    ("HEAD", "/echo", {}),
    ("POST", "/echo", {"json": {"a": [1, 2, "\u00e9"]}}),
    (
        "PUT",
        "/echo",
        {"content": b"\x00\xff" * 70_000, "headers": {"content-type": "application/octet-stream"}},
    ),
    (
        "DELETE",
        "/echo",
        {"headers": [("X-Many", "a"), ("X-Many", "b"), ("Authorization", "Bearer t")]},
    ),
    ("POST", "/chunks", {"content": b"body"}),
    ("GET", "/listen", {}),
    ("GET", "/raise-after", {}),
    ("GET", "/raise-before", {}),
    ("GET", "/none", {}),
]


def _outcome(client: TestClient, method: str, url: str, kwargs: dict[str, Any]) -> Any:
    """The status, headers and body of a request, or the type and text of what it raised."""
    try:
        response = client.request(method, url, **kwargs)
    except (Boom, AssertionError) as error:
        return ("raised", type(error).__name__, str(error))
    return (response.status_code, response.headers.multi_items(), response.content)


@pytest.mark.parametrize("entered", [True, False], ids=["entered", "not-entered"])
@pytest.mark.parametrize("raises", [True, False], ids=["raises", "answers-500"])
def test_one_hop_answers_every_request_as_starlettes_transport(entered: bool, raises: bool) -> None:
    given: dict[str, Any] = {"raise_server_exceptions": raises, "client": ("127.0.0.9", 7)}
    given["root_path"] = "/under" if entered else ""  # a root path the scope must carry
    plain = OneHopClient(probe_app, plain=True, **given)
    one_hop = OneHopClient(probe_app, plain=False, **given)
    assert isinstance(one_hop._transport, OneHopTransport)
    assert not isinstance(plain._transport, OneHopTransport)
    if entered:
        plain.__enter__()
        one_hop.__enter__()
    try:
        for method, url, kwargs in REQUESTS:
            expected = _outcome(plain, method, url, kwargs)
            assert _outcome(one_hop, method, url, kwargs) == expected, (method, url)
    finally:
        if entered:
            plain.__exit__(None, None, None)
            one_hop.__exit__(None, None, None)


def test_one_hop_answers_flowmems_app_as_starlettes_transport() -> None:
    store = open_store("memory://")
    tokens = make_tokens(store)
    app = create_app(store, rate_limits=RateLimits.off())
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/health", {}),
        ("HEAD", "/health", {}),
        ("GET", "/openapi.json", {}),
        ("GET", "/v1/sessions", {"headers": admin}),
        ("GET", "/v1/sessions", {}),
        ("GET", "/v1/sessions?limit=x", {"headers": admin}),
        (
            "POST",
            "/v1/sessions",
            {"headers": {**admin, "content-type": "application/json"}, "content": b"{"},
        ),
        ("PATCH", "/v1/sessions", {"headers": admin}),
        ("GET", "/nowhere", {"headers": admin}),
        ("GET", "/v1/buffers/user/k?user_id=root&last=2", {"headers": admin}),
    ]
    with (
        OneHopClient(app, raise_server_exceptions=False, plain=True) as plain,
        OneHopClient(app, raise_server_exceptions=False, plain=False) as one_hop,
    ):
        for method, url, kwargs in requests:
            expected = _outcome(plain, method, url, kwargs)
            assert _outcome(one_hop, method, url, kwargs) == expected, (method, url)
    store.close()


def test_one_hop_serves_threads_sharing_a_client() -> None:
    """Eight threads sending through one client (as the erasure race's writers) each get their own answer."""
    answers: dict[int, list[Any]] = {}
    with OneHopClient(probe_app, plain=False) as client:

        def send(number: int) -> None:
            answers[number] = [
                client.post("/echo", json={"n": number, "i": i}).json()["received"][0]["body"]
                for i in range(20)
            ]

        threads = [threading.Thread(target=send, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert answers == {
        n: [json.dumps({"n": n, "i": i}, separators=(",", ":")) for i in range(20)]
        for n in range(8)
    }


def test_one_hop_refuses_a_message_it_does_not_carry_where_starlettes_keeps_it() -> None:
    """A template's debug message: starlette's transport keeps it, the one-hop one says it cannot."""
    with OneHopClient(probe_app, plain=True) as plain:
        assert plain.get("/debug").extensions["http.response.debug"]["template"] == "t"
    with (
        OneHopClient(probe_app, plain=False) as one_hop,
        pytest.raises(NotImplementedError, match=r"'http\.response\.debug'"),
    ):
        one_hop.get("/debug")
