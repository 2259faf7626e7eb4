"""FastAPI dependencies: the services of the app and the authenticated principal."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from flowmem.access import Principal
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


PRINCIPAL = Depends(current_principal)
SERVICES = Depends(get_services)
