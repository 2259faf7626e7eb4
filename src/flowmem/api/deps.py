"""FastAPI dependencies: the services of the app and the authenticated principal."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from flowmem.access import Principal
from flowmem.auth import authenticate, bearer_token
from flowmem.errors import InvalidInputError
from flowmem.service import MemoryService
from flowmem.sessions import SessionService
from flowmem.store.base import Store

_bearer = HTTPBearer(auto_error=False, description="An API token: `flowmem token create`.")
_BEARER = Security(_bearer)


@dataclass(frozen=True)
class Services:
    """What the routes use: the store, the memory service and the session service."""

    store: Store
    memory: MemoryService
    sessions: SessionService


def get_services(request: Request) -> Services:
    """Return the app's services."""
    services: Services = request.app.state.services
    return services


def current_principal(
    request: Request,
    _credentials: HTTPAuthorizationCredentials | None = _BEARER,
) -> Principal:
    """Authenticate the ``Authorization: Bearer`` token; 401 when missing, unknown or revoked."""
    token = bearer_token(request.headers.get("authorization"))
    principal = authenticate(get_services(request).store, token)
    request.state.token_id = principal.token_id
    return principal


def single_query_values(request: Request) -> None:
    """Refuse a query parameter given twice: every parameter of this API is a single value."""
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key in seen:
            raise InvalidInputError(
                f"query parameter {key!r} is given more than once", field=f"query.{key}"
            )
        seen.add(key)


PRINCIPAL = Depends(current_principal)
SERVICES = Depends(get_services)
