"""FastAPI dependencies: the authenticated principal (and with it the app's services)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from flowmem.access import Principal
from flowmem.api.principal import request_principal
from flowmem.api.services import Services
from flowmem.auth import bearer_token

T = TypeVar("T")

_bearer = HTTPBearer(auto_error=False, description="An API token: `flowmem token create`.")
_BEARER = Security(_bearer)


@dataclass(frozen=True)
class Caller:
    """A request's bearer token and the app's services.

    The request gate (``flowmem.api.gate``) has already looked the token up and
    left the principal in the request state; ``authenticate`` returns it. Without
    the gate (an app assembled otherwise) the token is looked up inside the same
    thread hop as the route's store work. A request refused by validation has
    passed the gate too, so an unauthenticated caller only ever sees 401.
    """

    request: Request
    token: str
    services: Services

    def authenticate(self) -> Principal:
        """The principal the request gate found, else look the token up (blocking).

        Raise AuthenticationError when the token is unknown or revoked.
        """
        return request_principal(self.request, self.token, self.services.store)

    async def in_store_thread(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Authenticate, then call ``func(principal, *args, **kwargs)`` in one store-pool thread."""

        def work() -> T:
            return func(self.authenticate(), *args, **kwargs)

        return await self.services.pool.in_thread(work)

    async def in_long_thread(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Like ``in_store_thread``, in the general thread pool (work that may wait long: a turn)."""

        def work() -> T:
            return func(self.authenticate(), *args, **kwargs)

        result = await run_in_threadpool(work)
        await self.services.pool.durable()
        return result


async def current_caller(
    request: Request,
    _credentials: HTTPAuthorizationCredentials | None = _BEARER,
) -> Caller:
    """Read the ``Authorization: Bearer`` header (401 when missing or malformed)."""
    token = bearer_token(request.headers.get("authorization"))
    return Caller(request, token, request.app.state.services)


CALLER = Depends(current_caller)
