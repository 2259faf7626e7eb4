"""``DirectRoute``: a FastAPI route that reads its request itself, for the hottest routes.

FastAPI documents a route from its endpoint's signature and, per request, solves
that signature again (dependencies, body, response model). On an append that
solving cost about as much CPU as the store work itself (decision 0007). A
``DirectRoute`` keeps the endpoint and its signature as the contract (the OpenAPI
document is generated from them as before) but handles a request in one plain
function, through FastAPI's documented extension point (a custom ``APIRoute``
whose ``get_route_handler`` returns the handler):

- the one dependency (``memory_call``: bearer token, 401; path and query, 422)
  is called directly;
- the body, when the endpoint takes one, is the JSON document the body
  gate already parsed (``gate.PARSED_BODY``; ``json.loads``, as FastAPI parses
  it), validated by its pydantic model as FastAPI validates it (in a thread for
  a large body, ``gate.LARGE_BODY``); errors keep FastAPI's shape and wording,
  with the location under ``body``;
- the endpoint's dict result is written as compact JSON, as FastAPI's own
  ``JSONResponse`` would, without validating it again against the response model
  (a test checks the two agree, and schemathesis checks every response).

An endpoint whose signature has anything else (a query parameter, a second
dependency) is handled by FastAPI as usual.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.params import Depends
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from flowmem.api.gate import LARGE_BODY, PARSED_BODY

_UNPARSED = object()
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def _body_model(annotation: Any) -> type[BaseModel] | None:
    """Return ``annotation`` when it is a pydantic model class (a JSON body), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _takes_only_request(dependency: Callable[..., Any]) -> bool:
    """True for an async dependency whose one parameter is the ``Request``."""
    if not inspect.iscoroutinefunction(dependency):
        return False
    parameters = list(inspect.signature(dependency, eval_str=True).parameters.values())
    return len(parameters) == 1 and parameters[0].annotation is Request


def _plan(endpoint: Callable[..., Any]) -> tuple[str, Callable[..., Any], str | None, Any] | None:
    """Return (dependency parameter, its callable, body parameter, body model), or None.

    None when the endpoint's signature is anything other than one ``Depends``
    parameter and at most one pydantic-model body parameter.
    """
    if not inspect.iscoroutinefunction(endpoint):
        return None
    dependency: tuple[str, Callable[..., Any]] | None = None
    body: tuple[str, type[BaseModel]] | None = None
    for name, parameter in inspect.signature(endpoint, eval_str=True).parameters.items():
        model = _body_model(parameter.annotation)
        if isinstance(parameter.default, Depends) and dependency is None:
            call = parameter.default.dependency
            if call is None or not _takes_only_request(call):
                return None
            dependency = (name, call)
        elif model is not None and body is None and parameter.default is inspect.Parameter.empty:
            body = (name, model)
        else:
            return None
    if dependency is None:
        return None
    return (*dependency, *(body if body is not None else (None, None)))


def _validate(model: type[BaseModel], document: Any) -> BaseModel:
    return model.model_validate(document, from_attributes=True)


def _body_errors(error: ValidationError) -> list[dict[str, Any]]:
    """Return pydantic's errors the way FastAPI reports a body: located under ``body``."""
    return [{**item, "loc": ("body", *item["loc"])} for item in error.errors(include_url=False)]


async def _document(request: Request) -> Any:
    """Return the request's JSON body: as the body middleware parsed it, else parsed here.

    A missing or unreadable body is a 422 under ``body``, as FastAPI reports it.
    """
    document = request.scope.get(PARSED_BODY, _UNPARSED)
    if document is _UNPARSED:
        raw = await request.body()
        if not raw:
            missing = {"type": "missing", "loc": ("body",), "msg": "Field required"}
            raise RequestValidationError([{**missing, "input": None}])
        try:
            document = json.loads(raw)
        except json.JSONDecodeError as exc:  # as FastAPI reports it
            invalid = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error"}
            raise RequestValidationError(
                [{**invalid, "input": {}, "ctx": {"error": exc.msg}}]
            ) from None
    return document


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def render(content: Any) -> bytes:
    """Encode a result exactly as FastAPI's ``JSONResponse`` does (one encoder, built once)."""
    return _ENCODER.encode(content).encode("utf-8")


def direct_handler(endpoint: Callable[..., Any], status_code: int = 200) -> Handler | None:
    """Return a request handler calling ``endpoint`` directly, or None when its signature does not fit."""
    plan = _plan(endpoint)
    if plan is None:
        return None
    dependency_name, dependency, body_name, model = plan

    async def handler(request: Request) -> Response:
        values: dict[str, Any] = {dependency_name: await dependency(request)}
        if body_name is not None:
            document = await _document(request)
            try:
                if request.scope.get(LARGE_BODY):  # off the loop, as the gate parsed it
                    values[body_name] = await run_in_threadpool(_validate, model, document)
                else:
                    values[body_name] = model.model_validate(document, from_attributes=True)
            except ValidationError as exc:
                raise RequestValidationError(_body_errors(exc), body=document) from None
        result = await endpoint(**values)
        if isinstance(result, Response):
            return result
        return Response(render(result), status_code, media_type="application/json")

    return handler


class DirectRoute(APIRoute):
    """An ``APIRoute`` handled by ``direct_handler`` when its endpoint fits (else FastAPI's own)."""

    def get_route_handler(self) -> Handler:
        """Return the direct handler for this endpoint, or FastAPI's when it does not fit."""
        handler = direct_handler(self.endpoint, self.status_code or 200)
        return handler if handler is not None else super().get_route_handler()


__all__ = ["DirectRoute", "direct_handler", "render"]
