"""``DirectRoute`` answers every request exactly as FastAPI's own handling of the same endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from flowmem.api import create_app
from flowmem.api.fast.route import DirectRoute, direct_handler, memory_call, render
from flowmem.api.models import BufferAppend
from flowmem.api.routes import memory
from flowmem.store import open_store
from tests.api.helpers import Api, make_tokens
from tests.api.transport import OneHopClient

DIRECT = {("POST", "/v1/buffers/{scope}/{key}"), ("DELETE", "/v1/buffers/{scope}/{key}")}
DIRECT |= {("PUT", "/v1/memory/{scope}/{key}"), ("DELETE", "/v1/memory/{scope}/{key}")}
DIRECT |= {("DELETE", "/v1/buffers/{scope}/{key}/last")}


def _fastapi_router() -> APIRouter:
    """The memory router rebuilt with FastAPI's own ``APIRoute`` (the reference)."""
    reference = APIRouter(prefix="/v1", tags=["memory"])
    for route in memory.router.routes:
        assert isinstance(route, APIRoute)
        reference.add_api_route(
            route.path.removeprefix("/v1"),
            route.endpoint,
            methods=sorted(route.methods or ()),
            response_model=route.response_model,
            response_model_exclude_unset=route.response_model_exclude_unset,
            responses=route.responses,
            openapi_extra=route.openapi_extra,
            route_class_override=APIRoute,
        )
    return reference


@pytest.fixture
def pair() -> Iterator[tuple[Api, Api]]:
    """The real app (direct routes) and the same app with FastAPI's routes, each on its own store."""
    real_store, reference_store = open_store("memory://"), open_store("memory://")
    real_app = create_app(real_store)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory, "router", _fastapi_router())
        reference_app = create_app(reference_store)
    with (
        OneHopClient(real_app, raise_server_exceptions=False) as real,
        OneHopClient(reference_app, raise_server_exceptions=False) as reference,
    ):
        yield (
            Api(real, real_store, make_tokens(real_store)),
            Api(reference, reference_store, make_tokens(reference_store)),
        )


def test_the_routes_without_query_parameters_are_handled_directly() -> None:
    handled = {
        (method, route.path)
        for route in memory.router.routes
        if isinstance(route, APIRoute) and direct_handler(route.endpoint) is not None
        for method in route.methods or ()
    }
    assert handled == DIRECT


CALL = Depends(memory_call)
LAST = Query(0)
OTHER = Depends(lambda: 1)


def test_an_endpoint_with_anything_else_keeps_fastapis_handling() -> None:
    async def with_query(call: Any = CALL, last: int = LAST) -> dict[str, Any]:
        return {}

    async def two_bodies(a: BufferAppend, b: BufferAppend) -> dict[str, Any]:
        return {}

    def not_async(call: Any = CALL) -> dict[str, Any]:
        return {}

    async def other_dependency(call: Any = OTHER) -> dict[str, Any]:
        return {}

    for endpoint in (with_query, two_bodies, not_async, other_dependency):
        assert direct_handler(endpoint) is None, endpoint.__name__


def test_render_writes_what_jsonresponse_writes() -> None:
    content = {"messages": [{"role": "user", "content": "héllo ✓ \u2028"}], "count": 1, "x": 1.5}
    assert render(content) == JSONResponse(content).body


def test_a_route_class_that_does_not_fit_falls_back_to_fastapi() -> None:
    router = APIRouter(route_class=DirectRoute)

    @router.get("/x")
    async def endpoint(request: Request, n: int = 1) -> dict[str, int]:
        return {"n": n}

    app = FastAPI()
    app.include_router(router)
    with OneHopClient(app) as client:
        assert client.get("/x?n=3").json() == {"n": 3}
        assert client.get("/x?n=a").status_code == 422


def _same(real: Api, reference: Api, method: str, url: str, **kwargs: Any) -> int:
    """Send one request to both apps; the statuses and bodies must be equal; return the status."""
    answers = [api.call(method, url, "alice", **kwargs) for api in (real, reference)]
    (got, want) = answers
    assert got.status_code == want.status_code, (got.text, want.text)
    assert got.headers["content-type"] == want.headers["content-type"]
    assert _untimed(got.json()) == _untimed(want.json())
    return int(got.status_code)


def _untimed(answer: Any) -> Any:
    """Drop the append time flowmem stamps on each message (the two apps ran a moment apart)."""
    if isinstance(answer, dict) and isinstance(answer.get("messages"), list):
        rows = [{k: v for k, v in row.items() if k != "timestamp"} for row in answer["messages"]]
        return {**answer, "messages": rows}
    return answer


GOOD = {"role": "user", "content": "hi"}
CASES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/buffers/user/k", {"messages": GOOD}),
    ("POST", "/v1/buffers/user/k", {"messages": [GOOD, GOOD], "max_messages": 3}),
    ("POST", "/v1/buffers/user/k", {"messages": GOOD, "return_messages": False}),
    ("POST", "/v1/buffers/user/k", {"messages": {"role": "robot", "content": "x"}}),
    ("POST", "/v1/buffers/user/k", {"messages": "hi"}),
    ("POST", "/v1/buffers/user/k", {"messages": GOOD, "max_messages": -1}),
    ("POST", "/v1/buffers/user/k", {"messages": GOOD, "max_messages": 1.0}),
    ("POST", "/v1/buffers/user/k", {"messages": GOOD, "extra": 1}),
    ("POST", "/v1/buffers/user/k", {}),
    ("POST", "/v1/buffers/user/k", []),
    ("POST", "/v1/buffers/user/k", None),
    ("POST", "/v1/buffers/team/k", {"messages": GOOD}),
    ("POST", "/v1/buffers/global/k", {"messages": GOOD}),
    ("DELETE", "/v1/buffers/user/k", None),
    ("PUT", "/v1/memory/user/k", {"value": {"a": [1, 2]}, "ttl": 5}),
    ("PUT", "/v1/memory/user/k", {"value": 1, "ttl": 0}),
    ("PUT", "/v1/memory/user/k", {"ttl": "soon"}),
    ("PUT", "/v1/memory/user/k", None),
    ("DELETE", "/v1/memory/user/k", None),
    ("DELETE", "/v1/memory/user/k", None),
]


def test_fixed_requests_get_the_same_answers(pair: tuple[Api, Api]) -> None:
    real, reference = pair
    for method, url, body in CASES:
        _same(real, reference, method, url, json=body)
    _same(real, reference, "POST", "/v1/buffers/user/k", content=b"")
    _same(real, reference, "POST", "/v1/buffers/user/k", content=b'{"messages": NaN}')
    for api in pair:
        assert (
            api.call("POST", "/v1/buffers/user/k", None, json={"messages": GOOD}).status_code == 401
        )
        revoked = api.call("POST", "/v1/buffers/user/k", "revoked", json={"messages": 1})
        assert revoked.status_code == 401


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]), "content": JSON}
)
APPEND = st.fixed_dictionaries(
    {"messages": MESSAGE | st.lists(MESSAGE, max_size=3) | JSON},
    optional={"max_messages": JSON | st.integers(0, 5), "return_messages": JSON | st.booleans()},
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=APPEND | JSON)
def test_any_append_body_gets_the_same_answer_from_both(pair: tuple[Api, Api], body: Any) -> None:
    real, reference = pair
    answer = _same(
        real,
        reference,
        "POST",
        "/v1/buffers/user/k",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    event(
        f"status {answer}"
    )  # both successes and refusals are drawn (--hypothesis-show-statistics)


async def _client_name(request: Request) -> str:
    return request.headers.get("x-name", "nobody")


NAME = Depends(_client_name)


def test_without_the_body_middleware_the_route_parses_the_body_itself() -> None:
    router = APIRouter(route_class=DirectRoute)

    @router.post("/echo")
    async def echo(body: BufferAppend, name: str = NAME) -> dict[str, Any]:
        return {"name": name, "max": body.max_messages}

    assert direct_handler(echo) is not None
    app = FastAPI()
    app.include_router(router)
    with OneHopClient(app) as client:
        sent = {"messages": GOOD, "max_messages": 2}
        answer = client.post("/echo", json=sent, headers={"x-name": "ann"})
        assert answer.json() == {"name": "ann", "max": 2}
        assert client.post("/echo", content=b"").json()["detail"][0]["loc"] == ["body"]
        unreadable = client.post(
            "/echo", content=b"{", headers={"content-type": "application/json"}
        )
        assert unreadable.status_code == 422
        assert unreadable.json()["detail"][0]["type"] == "json_invalid"
        bad = client.post("/echo", json={"messages": GOOD, "max_messages": -1})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "max_messages"]


def test_each_operation_is_its_own_member_and_calls_a_method_of_the_memory_service() -> None:
    """LOAD_ALL was an alias of WINDOW (one value): a check on one was a check on both (issue 39 §5)."""
    from flowmem.api.fast.route import Operation
    from flowmem.service import MemoryService

    names = list(Operation.__members__)
    assert len(names) == len(Operation)  # no member is another's alias
    assert Operation.LOAD_ALL is not Operation.WINDOW
    for operation in Operation:
        assert callable(getattr(MemoryService, operation.method)), operation
    assert Operation.WINDOW.method == Operation.LOAD_ALL.method == "load"
