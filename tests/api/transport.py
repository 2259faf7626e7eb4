"""The API tests' in-process client: starlette's ``TestClient`` whose request crosses to the app's loop once.

starlette's transport drives each request from the test's thread through the client's
blocking portal message by message: eight calls into the event loop's thread a request
(making the events, the body stream and the cancel scope, starting the app, waiting for
the start, each body chunk), each a thread hand-over and a wake-up of the loop, ~1 ms of
CPU a request beside the app's own 0.3-1 ms (decision 0216). ``OneHopTransport`` builds
the same ASGI scope and sends the whole exchange into the loop as one coroutine: the app
gets the same scope, the same request body and, once its response is complete, the same
``http.disconnect``; the caller gets the same status, headers and body, or the app's
exception when ``raise_server_exceptions`` is set, an empty 500 when no response started.
Its responses are read whole, which every flowmem route's are (none streams); a
``http.response.debug`` or trailers message (templates, trailers: flowmem sends neither)
is refused with ``NotImplementedError`` rather than dropped.
``tests/api/test_transport.py`` proves it answers as the plain transport does;
``FLOWMEM_TEST_PLAIN_TRANSPORT=1`` runs every test on starlette's own transport.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

import anyio
from starlette.testclient import (
    TestClient,
    _TestClientTransport,
    httpx,  # the httpx starlette's TestClient is built on
)

PLAIN = os.environ.get("FLOWMEM_TEST_PLAIN_TRANSPORT", "") not in ("", "0")


class OneHopTransport(_TestClientTransport):
    """starlette's test transport, each HTTP request sent into the app's loop as one call."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Answer ``request`` from the app: the scope starlette builds, one portal call."""
        url = request.url
        if url.scheme not in ("http", "https"):  # a websocket: starlette's own session
            return super().handle_request(request)
        port = url.port if url.port is not None else {"http": 80, "https": 443}[url.scheme]
        if "host" in request.headers:
            headers: list[tuple[bytes, bytes]] = []
        else:  # pragma: no cover - httpx always sets it
            headers = [(b"host", url.netloc)]
        headers += [
            (key.lower().encode(), value.encode()) for key, value in request.headers.multi_items()
        ]
        scope: dict[str, Any] = {
            "type": "http",
            "http_version": "1.1",
            "method": request.method,
            "path": unquote(url.path),
            "raw_path": url.raw_path.split(b"?", 1)[0],
            "root_path": self.root_path,
            "scheme": url.scheme,
            "query_string": url.query.decode(encoding="ascii").encode(),
            "headers": headers,
            "client": self.client,
            "server": [url.raw_host.decode(encoding="ascii"), port],
            "extensions": {"http.response.debug": {}, "http.response.trailers": {}},
            "state": self.app_state.copy(),
        }
        body = request.read()
        start: dict[str, Any] = {}
        chunks: list[bytes] = []
        failure: list[BaseException] = []

        async def exchange() -> None:
            """Run the app on the request; keep its response's start and body."""
            complete = anyio.Event()
            request_complete = False

            async def receive() -> dict[str, Any]:
                nonlocal request_complete
                if request_complete:  # as starlette: a disconnect once the response is done
                    await complete.wait()
                    return {"type": "http.disconnect"}
                request_complete = True
                return {"type": "http.request", "body": body}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    assert not start, 'Received multiple "http.response.start" messages.'
                    start.update(message)
                elif message["type"] == "http.response.body":
                    assert start, 'Received "http.response.body" without "http.response.start".'
                    assert not complete.is_set(), (
                        'Received "http.response.body" after response completed.'
                    )
                    if request.method != "HEAD":
                        chunks.append(bytes(message.get("body", b"")))
                    if not message.get("more_body", False):
                        complete.set()
                else:  # a template's debug info, trailers: loud, not silently dropped
                    raise NotImplementedError(
                        f"OneHopTransport does not carry {message['type']!r} messages: use plain=True"
                    )

            try:
                await self.app(scope, receive, send)
            except BaseException as error:  # handed back to the caller's thread below
                failure.append(error)

        with self.portal_factory() as portal:
            portal.call(exchange)
        if failure and self.raise_server_exceptions:
            raise failure[0]
        if not start:
            if self.raise_server_exceptions:
                raise AssertionError("TestClient did not receive any response.")
            return httpx.Response(500, headers=[], stream=httpx.ByteStream(b""), request=request)
        return httpx.Response(
            start["status"],
            headers=[(key.decode(), value.decode()) for key, value in start.get("headers", [])],
            stream=httpx.ByteStream(b"".join(chunks)),
            request=request,
        )


class OneHopClient(TestClient):
    """starlette's ``TestClient`` over ``OneHopTransport`` (its own transport with ``FLOWMEM_TEST_PLAIN_TRANSPORT=1``)."""

    __test__ = False

    def __init__(self, app: Any, *args: Any, plain: bool = PLAIN, **kwargs: Any) -> None:
        """The client of ``TestClient(app, ...)``; ``plain`` keeps starlette's transport."""
        super().__init__(app, *args, **kwargs)
        if not plain:
            given: _TestClientTransport = self._transport  # type: ignore[assignment]
            self._transport = OneHopTransport(
                self.app,
                portal_factory=self._portal_factory,
                raise_server_exceptions=given.raise_server_exceptions,
                root_path=given.root_path,
                client=given.client,
                app_state=self.app_state,
            )
