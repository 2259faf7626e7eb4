"""The error handlers are a pure table: an error maps to its status and code, no I/O."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.requests import Request

from flowmem.api.errors import install_error_handlers
from flowmem.errors import (
    AccessDeniedError,
    ConflictError,
    FlowmemError,
    InvalidInputError,
    NotFoundError,
)


def _bare_request() -> tuple[FastAPI, Request]:
    """A request off the open paths with no token, no principal and no store behind it.

    A handler that looked the token up would answer 401 or fail on the missing store;
    the request gate is what answers 401 to such a request, before any route.
    """
    app = FastAPI()
    install_error_handlers(app)
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/buffers/user/k",
        "headers": [],
        "query_string": b"",
        "app": app,
    }
    return app, Request(scope)


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (InvalidInputError("bad key", field="path.key"), 422, "invalid_input"),
        (AccessDeniedError("no", rule="MEM-9"), 403, "forbidden"),
        (NotFoundError("no such session"), 404, "not_found"),
        (ConflictError("running"), 409, "conflict"),
    ],
)
def test_error_handler_maps_an_error_without_authenticating(
    error: FlowmemError, status: int, code: str
) -> None:
    app, request = _bare_request()
    response = asyncio.run(app.exception_handlers[FlowmemError](request, error))
    assert response.status_code == status
    assert json.loads(bytes(response.body))["error"]["code"] == code


def test_validation_handler_maps_to_422_without_authenticating() -> None:
    app, request = _bare_request()
    error = RequestValidationError([{"loc": ("query", "limit"), "msg": "not an integer"}])
    response = asyncio.run(app.exception_handlers[RequestValidationError](request, error))
    assert response.status_code == 422
    body = json.loads(bytes(response.body))["error"]
    assert body["code"] == "invalid_input"
    assert body["details"] == [{"field": "query.limit", "message": "not an integer"}]
