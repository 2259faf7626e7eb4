"""Unknown query parameters are refused: 422 ``unknown_query_parameter`` (decision 0047).

FastAPI ignores a query parameter a route does not declare, so a typo such as
``?sessionid=`` (for ``session_id``) was answered as if it were absent: for a
``session``-scope read, the neutral empty result. Every ``/v1`` route is a
``KnownQueryRoute`` (the health probes are not: a probe's cache-busting query
must not fail them): the parameters it takes are those of its signature (and of
its dependencies) and those its ``openapi_extra`` declares (the memory routes'
scope ids, read by hand in ``flowmem.api.fast.route``); any other name is refused
before the endpoint runs, with the names the route takes and the closest one.
A refused request changes nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from flowmem.errors import UnknownQueryParameterError

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def _dependant_names(dependant: Dependant) -> Iterable[str]:
    for param in dependant.query_params:
        yield param.alias
    for sub in dependant.dependencies:
        yield from _dependant_names(sub)


def known_query(route: APIRoute) -> frozenset[str]:
    """The query parameters ``route`` takes: its signature's, its dependencies', its ``openapi_extra``'s."""
    names = set(_dependant_names(route.dependant))
    for parameter in (route.openapi_extra or {}).get("parameters", ()):
        if parameter.get("in") == "query":
            names.add(str(parameter["name"]))
    return frozenset(names)


def unknown_query_error(name: str, known: frozenset[str], where: str) -> UnknownQueryParameterError:
    """The refusal of ``name``: what the route takes, and the closest known name."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    takes = ", ".join(sorted(known)) if known else "no query parameters"
    return UnknownQueryParameterError(
        f"unknown query parameter {name!r}{hint}: {where} takes {takes}",
        field=f"query.{name}",
        parameter=name,
        known=sorted(known),
    )


def check_query(request: Request, known: frozenset[str], where: str) -> None:
    """Raise ``UnknownQueryParameterError`` (422) for the first query name ``known`` lacks."""
    if not request.scope.get("query_string"):
        return
    for name in request.query_params:
        if name not in known:
            raise unknown_query_error(name, known, where)


def route_name(route: APIRoute) -> str:
    """``GET /v1/sessions``: how a refusal names the route."""
    return f"{sorted(route.methods)[0]} {route.path}" if route.methods else route.path


def checking_query(route: APIRoute, handler: Handler) -> Handler:
    """Wrap a route's request handler so that an unknown query parameter is refused first."""
    known, where = known_query(route), route_name(route)

    async def checked(request: Request) -> Response:
        if request.scope.get("query_string"):
            check_query(request, known, where)
        return await handler(request)

    return checked


class KnownQueryRoute(APIRoute):
    """An ``APIRoute`` that refuses a query parameter it does not declare (422)."""

    def get_route_handler(self) -> Handler:
        """FastAPI's handler, behind the query check."""
        return checking_query(self, super().get_route_handler())


__all__ = [
    "KnownQueryRoute",
    "check_query",
    "checking_query",
    "known_query",
    "route_name",
    "unknown_query_error",
]
