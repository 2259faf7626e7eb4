"""FastAPI dependencies: the services of the app and the authenticated principal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from flowmem.access import Principal
from flowmem.api.pool import StorePool
from flowmem.auth import authenticate, bearer_token
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
    pool: StorePool


async def get_services(request: Request) -> Services:
    """Return the app's services (async: no thread hop for a plain lookup)."""
    services: Services = request.app.state.services
    return services


async def current_principal(
    request: Request,
    _credentials: HTTPAuthorizationCredentials | None = _BEARER,
) -> Principal:
    """Authenticate the ``Authorization: Bearer`` token; 401 when missing, unknown or revoked.

    Runs before the body is validated, so an unauthenticated request learns nothing
    more than 401; the store lookup runs in the thread pool.
    """
    token = bearer_token(request.headers.get("authorization"))
    services: Services = request.app.state.services
    principal = await services.pool.run(authenticate, services.store, token)
    request.state.token_id = principal.token_id
    return principal


class Caller(NamedTuple):
    """The authenticated principal and the app's services, from one dependency."""

    principal: Principal
    services: Services


async def current_caller(
    request: Request,
    _credentials: HTTPAuthorizationCredentials | None = _BEARER,
) -> Caller:
    """Authenticate the caller (see ``current_principal``) and hand over the services."""
    principal = await current_principal(request, _credentials)
    return Caller(principal, request.app.state.services)


PRINCIPAL = Depends(current_principal)
SERVICES = Depends(get_services)
CALLER = Depends(current_caller)
