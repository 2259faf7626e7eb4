"""The memory routes' target, read by hand: 422 details per bad field, 401 first, same OpenAPI."""

from __future__ import annotations

import pytest

from flowmem.api import create_app
from flowmem.api.fast.route import QUERY_IDS, TARGET_OPENAPI
from flowmem.store import MemoryStore
from tests.api.helpers import Api

MESSAGE = {"messages": {"role": "user", "content": "hi"}}


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/v1/buffers/team/notes", "path.scope"),
        ("/v1/memory/Session/notes", "path.scope"),
        (f"/v1/buffers/user/{'k' * 256}", "path.key"),
        (f"/v1/buffers/session/chat?session_id={'s' * 256}", "query.session_id"),
        (f"/v1/memory/workflow/k?workflow_id={'w' * 256}", "query.workflow_id"),
        (f"/v1/memory/pipeline/k?pipeline_id={'p' * 256}", "query.pipeline_id"),
        (f"/v1/buffers/execution/k?execution_id={'e' * 256}", "query.execution_id"),
    ],
)
def test_a_bad_target_field_is_422_naming_it(api: Api, url: str, field: str) -> None:
    for method, body in (("GET", None), ("POST", MESSAGE), ("DELETE", None)):
        if url.startswith("/v1/memory") and method == "POST":
            method, body = "PUT", {"value": 1}
        response = api.call(method, url, "admin", json=body)
        assert response.status_code == 422, (method, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_input"
        assert [d["field"] for d in error["details"]] == [field]


def test_every_bad_field_is_listed_at_once(api: Api) -> None:
    url = f"/v1/buffers/team/{'k' * 256}?session_id={'s' * 256}"
    details = api.call("POST", url, "admin", json=MESSAGE).json()["error"]["details"]
    assert [d["field"] for d in details] == ["path.scope", "path.key", "query.session_id"]


@pytest.mark.parametrize("who", [None, "revoked"])
def test_an_unauthenticated_caller_gets_401_before_any_422(api: Api, who: str | None) -> None:
    response = api.call("POST", "/v1/buffers/team/notes", who, json=MESSAGE)
    assert response.status_code == 401


def test_ids_at_their_length_limit_are_accepted(api: Api) -> None:
    query = "&".join(f"{name}={'x' * limit}" for name, limit, _ in QUERY_IDS[1:])
    response = api.call(
        "PUT", f"/v1/memory/workflow/{'k' * 255}?{query}", "shared", json={"value": 1}
    )
    assert response.status_code == 200, response.text


def test_openapi_declares_the_target_parameters_and_the_token_on_every_memory_route() -> None:
    spec = create_app(MemoryStore()).openapi()
    names = [p["name"] for p in TARGET_OPENAPI["parameters"]]
    assert names == ["scope", "key", "session_id", "workflow_id", "pipeline_id", "execution_id"]
    for path in ("/v1/buffers/{scope}/{key}", "/v1/memory/{scope}/{key}"):
        for method, operation in spec["paths"][path].items():
            declared = [p["name"] for p in operation["parameters"]]
            assert set(names) <= set(declared), (method, path)
            assert operation["security"] == [{"HTTPBearer": []}]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
