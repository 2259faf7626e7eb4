"""The client's errors say what to do: the URL tried, the environment variable read, the fix.

Against a real ``flowmem serve`` on loopback (one for the module), through both clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flowmem.client import AsyncClient, Client, RetryPolicy, ServerUnreachableError
from flowmem.errors import AuthenticationError, ConfigurationError, NotFoundError
from flowmem.scope import ExecutionContext
from tests.client.conftest import Server, serve
from tests.served import free_port

ONCE = RetryPolicy.never()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real ``flowmem serve`` on a SQLite file."""
    cwd: Path = tmp_path_factory.mktemp("advice")
    with serve(f"sqlite:///{cwd}/flowmem.db", cwd) as server:
        yield server


@pytest.fixture(autouse=True)
def no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither ``$FLOWMEM_URL`` nor ``$FLOWMEM_TOKEN`` unless a test sets it."""
    monkeypatch.delenv("FLOWMEM_URL", raising=False)
    monkeypatch.delenv("FLOWMEM_TOKEN", raising=False)


def _async_raises(make: AsyncClient, call: str, *args: object) -> BaseException:
    """The error ``make.<call>(*args)`` raises (the client closed after)."""

    async def run() -> BaseException:
        async with make as client:
            try:
                await getattr(client, call)(*args)
            except Exception as error:
                return error
        raise AssertionError(f"{call} raised nothing")

    return asyncio.run(run())


def test_an_unreachable_server_names_the_url_it_tried() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, "fm_x", retry=ONCE) as client, pytest.raises(ServerUnreachableError) as raised:
        client.list_sessions()
    said = str(raised.value)
    assert f"{url}/v1/sessions" in said
    assert "Connect" in said and "flowmem serve" in said and "FLOWMEM_URL" in said
    assert raised.value.details["url"] == f"{url}/v1/sessions"
    error = _async_raises(AsyncClient(url, "fm_x", retry=ONCE), "list_sessions")
    assert isinstance(error, ServerUnreachableError) and f"{url}/v1/sessions" in str(error)


def test_an_unreachable_url_from_the_environment_says_it_came_from_flowmem_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("FLOWMEM_URL", url)
    with Client(token="fm_x", retry=ONCE) as client, pytest.raises(ServerUnreachableError) as raised:
        client.health()
    assert f"{url} (from $FLOWMEM_URL)" in str(raised.value)


def test_the_default_url_says_it_is_the_default() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    # a refusing transport: something may listen on the default port of this machine
    refusing = httpx.MockTransport(refuse)
    with Client(token="fm_x", retry=ONCE, transport=refusing) as client, pytest.raises(
        ServerUnreachableError
    ) as raised:
        client.health()
    said = str(raised.value)
    assert "http://127.0.0.1:8765" in said and "default" in said and "$FLOWMEM_URL" in said


def test_a_missing_token_names_flowmem_token_and_how_to_make_one(running: Server) -> None:
    with Client(running.url, retry=ONCE) as client, pytest.raises(AuthenticationError) as raised:
        client.list_sessions()
    said = str(raised.value)
    assert "missing Authorization: Bearer token" in said  # the server's words, kept
    assert "$FLOWMEM_TOKEN" in said and "token=" in said
    assert "flowmem token create --user" in said
    assert raised.value.code == "unauthenticated" and raised.value.details["http_status"] == 401
    error = _async_raises(AsyncClient(running.url, retry=ONCE), "list_sessions")
    assert isinstance(error, AuthenticationError) and "$FLOWMEM_TOKEN" in str(error)


def test_a_refused_token_from_the_environment_says_where_it_came_from(
    running: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_TOKEN", "fm_not_a_token")
    with Client(running.url, retry=ONCE) as client, pytest.raises(AuthenticationError) as raised:
        client.list_sessions()
    said = str(raised.value)
    assert "invalid token" in said and "from $FLOWMEM_TOKEN" in said
    assert running.url in said and "flowmem token create" in said


def test_a_base_url_ending_in_v1_says_to_drop_it(running: Server) -> None:
    wrong = running.url + "/v1"
    with Client(wrong, running.tokens["alice"], retry=ONCE) as client:
        with pytest.raises(ConfigurationError) as raised:
            client.list_sessions()
        said = str(raised.value)
        assert "ends in /v1" in said and f"base_url={running.url!r}" in said
        assert f"{wrong}/v1/sessions" in said
        assert raised.value.details["http_status"] == 404
        # not swallowed as "no such buffer yet" by the Memory protocol's reads
        context = ExecutionContext(session_id="s-1", user_id="alice")
        with pytest.raises(ConfigurationError, match="ends in /v1"):
            client.load("session", "chat_history", context)
        with pytest.raises(ConfigurationError, match="ends in /v1"):
            client.health()
    error = _async_raises(AsyncClient(wrong + "/", running.tokens["alice"], retry=ONCE), "list_sessions")
    assert isinstance(error, ConfigurationError) and "ends in /v1" in str(error)


def test_a_v1_base_url_from_the_environment_says_to_fix_flowmem_url(
    running: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_URL", running.url + "/v1")
    with Client(token=running.tokens["alice"], retry=ONCE) as client, pytest.raises(
        ConfigurationError
    ) as raised:
        client.list_sessions()
    assert f"FLOWMEM_URL={running.url}" in str(raised.value)


def test_a_missing_session_on_the_right_url_is_still_not_found(running: Server) -> None:
    client = Client(running.url, running.tokens["alice"], retry=ONCE)
    with client, pytest.raises(NotFoundError) as raised:
        client.get_session("00000000-0000-0000-0000-000000000000")
    assert type(raised.value) is NotFoundError
    assert str(raised.value) == "no such session"
