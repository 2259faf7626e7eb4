"""The app factory: the routes built once per process and shared by every app, each app's own settings kept."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from fastapi.testclient import TestClient

from flowmem import metrics
from flowmem.api import create_app
from flowmem.api.app import ROUTERS
from flowmem.api.ratelimit import RateLimits
from flowmem.limits import Limits
from flowmem.store import Store, open_store
from tests.api.helpers import Api, make_tokens
from tests.api.transport import OneHopClient


def _api(**options: Any) -> tuple[TestClient, Api]:
    store: Store = open_store("memory://")
    client = OneHopClient(create_app(store, purge_interval=None, **options), raise_server_exceptions=False)
    return client, Api(client, store, make_tokens(store))


@pytest.fixture
def two_apps() -> Iterator[tuple[Api, Api]]:
    """Two apps in one process: ``small`` (small stored sizes, 2 requests per token) and ``plain``."""
    small_client, small = _api(limits=Limits(record_bytes=100), rate_limits=RateLimits(0.01, 2, 0, 0))
    plain_client, plain = _api(rate_limits=RateLimits.off())
    with small_client, plain_client:
        yield small, plain
    small.store.close()
    plain.store.close()


def test_every_app_serves_the_routers_route_objects_themselves() -> None:
    store = open_store("memory://")
    first = create_app(store, purge_interval=None)
    second = create_app(store, purge_interval=None, metrics=True)
    with OneHopClient(second):  # its lifespan's end uninstalls the metrics sink the app installed
        for router in ROUTERS:
            for route in router.routes:
                assert any(served is route for served in first.routes), route
                assert any(served is route for served in second.routes), route
    store.close()
    assert metrics.installed() is None


def test_a_new_apps_first_requests_build_no_pydantic_type_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    client, api = _api()
    built: list[object] = []
    original = pydantic.TypeAdapter.__init__

    def counted(self: pydantic.TypeAdapter[Any], *args: Any, **kwargs: Any) -> None:
        built.append(args[0] if args else kwargs.get("type"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(pydantic.TypeAdapter, "__init__", counted)
    with client:
        assert api.call("GET", "/v1/memory/user/k").status_code == 200  # the first router's
        assert api.call("GET", "/v1/sessions").status_code == 200
        assert api.call("GET", "/v1/nowhere").status_code == 404  # matched against every route
        assert api.call("DELETE", "/v1/sessions").status_code == 405  # every route's methods read
    api.store.close()
    assert built == []


def test_apps_with_different_settings_answer_each_by_its_own_after_sharing_the_routes(
    two_apps: tuple[Api, Api],
) -> None:
    small, plain = two_apps
    value = {"value": "z" * 200}
    # interleaved: each request goes through the same route objects, alternately for each app
    refused = small.call("PUT", "/v1/memory/user/r", json=value)
    assert (refused.status_code, refused.json()["error"]["code"]) == (413, "record_too_large")
    assert plain.call("PUT", "/v1/memory/user/r", json=value).status_code == 200
    assert small.call("GET", "/v1/memory/user/r").json()["found"] is False  # small's own store
    # small's token rate: its 2 requests are spent; plain has no rate limit
    over = small.call("GET", "/v1/memory/user/r")
    assert (over.status_code, over.json()["error"]["code"]) == (429, "rate_limited")
    for _ in range(5):
        assert plain.call("GET", "/v1/memory/user/r").json() == {
            "found": True,
            "value": "z" * 200,
            "resolved_scope_id": "alice",
        }
    # each app knows its own tokens only
    stranger = plain.call("GET", "/v1/memory/user/r", headers={"Authorization": f"Bearer {small.tokens['bob']}"})
    assert stranger.status_code == 401


class _Runner:
    """A ``TurnRunner`` that counts its ``close`` calls (``AgentRunner.close`` closes its models' HTTP clients)."""

    def __init__(self) -> None:
        self.closed = 0

    def start_turn(self, session: Any, content: str, *, wait: bool) -> dict[str, Any]:
        """Never called here."""
        raise NotImplementedError

    def stop(self, session: Any) -> bool:
        """Never called here."""
        raise NotImplementedError

    def close(self) -> None:
        """Count the call."""
        self.closed += 1


def test_the_runner_its_factory_built_is_closed_once_when_the_app_stops() -> None:
    store = open_store("memory://")
    built: list[_Runner] = []

    def factory(*_: Any) -> _Runner:
        built.append(_Runner())
        return built[-1]

    with OneHopClient(create_app(store, purge_interval=None, runner_factory=factory)) as client:
        assert client.get("/health").status_code == 200
        assert built[0].closed == 0  # open while the app serves
    store.close()
    assert [runner.closed for runner in built] == [1]


def test_a_runner_given_to_the_app_stays_open_when_it_stops() -> None:
    store = open_store("memory://")
    given = _Runner()
    with OneHopClient(create_app(store, purge_interval=None, runner=given)):
        pass
    store.close()
    assert given.closed == 0  # the caller's to close, as a store it gave
