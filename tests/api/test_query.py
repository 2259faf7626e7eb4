"""An unknown query parameter is 422 ``unknown_query_parameter``, naming what the route takes (decision 0047)."""

from __future__ import annotations

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from flowmem.api import create_app
from flowmem.api.query import KnownQueryRoute, known_query
from flowmem.store import MemoryStore
from tests.api.helpers import Api, snapshot

ROW = {"role": "user", "content": "hi"}


def test_a_typo_of_session_id_is_refused_and_the_right_name_suggested(api: Api) -> None:
    sid = api.session("alice")
    api.call("POST", f"/v1/buffers/session/chat_history?session_id={sid}", json={"messages": ROW})
    for method, url, body in (
        ("GET", f"/v1/buffers/session/chat_history?sessionid={sid}", None),
        ("GET", f"/v1/memory/session/k?sessionid={sid}", None),
        ("POST", f"/v1/buffers/session/chat_history?sessionid={sid}", {"messages": ROW}),
        ("PUT", f"/v1/memory/session/k?sessionid={sid}", {"value": 1}),
        ("DELETE", f"/v1/buffers/session/chat_history/last?sessionid={sid}", None),
    ):
        before = snapshot(api)
        answer = api.call(method, url, json=body)
        assert answer.status_code == 422, (method, url, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "unknown_query_parameter"
        assert "'sessionid'" in error["message"] and "did you mean 'session_id'?" in error["message"]
        assert "session_id" in error["message"].split(" takes ")[1]
        assert error["details"][0]["field"] == "query.sessionid"
        assert snapshot(api) == before


@pytest.mark.parametrize(
    ("url", "name", "known"),
    [
        ("/v1/buffers/user/k?lsat=2", "lsat", "archived, before, execution_id, format, last, max_tokens, pipeline_id, session_id, workflow_id"),
        ("/v1/sessions?limt=5", "limt", "limit, offset"),
        ("/v1/memory/user/k?defualt=1", "defualt", "default, execution_id, pipeline_id, session_id, workflow_id"),
    ],
    ids=["buffer-load", "sessions-list", "record-read"],
)
def test_every_v1_route_names_the_parameters_it_takes(api: Api, url: str, name: str, known: str) -> None:
    answer = api.call("GET", url)
    assert answer.status_code == 422
    message = answer.json()["error"]["message"]
    assert message.startswith(f"unknown query parameter {name!r}") and message.endswith(f"takes {known}")


def test_a_route_without_query_parameters_says_so(api: Api) -> None:
    sid = api.session("alice")
    answer = api.call("GET", f"/v1/sessions/{sid}?verbose=1")
    assert answer.status_code == 422
    assert answer.json()["error"]["message"].endswith("takes no query parameters")


def test_known_parameters_and_the_health_probes_are_answered(api: Api) -> None:
    assert api.call("GET", "/v1/buffers/user/k?last=1&before=5&format=rows").status_code == 200
    assert api.call("GET", "/v1/sessions?limit=2&offset=0").status_code == 200
    assert api.call("GET", "/v1/memory/user/k?default=3").json()["value"] == 3
    assert api.call("GET", "/health?cache-buster=1", None).status_code == 200


def test_every_v1_route_checks_its_query() -> None:
    app = create_app(MemoryStore(), purge_interval=None)
    contexts = list(iter_route_contexts(app.routes))
    routes = [c.route for c in contexts if isinstance(c.route, APIRoute) and c.path.startswith("/v1")]
    assert routes and all(isinstance(r, KnownQueryRoute) for r in routes)
    # what a route takes is what its OpenAPI document says it takes
    spec = app.openapi()
    for route in routes:
        for method in route.methods or ():
            declared = {
                p["name"]
                for p in spec["paths"][route.path][method.lower()].get("parameters", [])
                if p["in"] == "query"
            }
            assert known_query(route) == declared, (method, route.path)
