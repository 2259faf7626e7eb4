"""What the request gate leaves in a request for the routes: its parsed body and its principal."""

from __future__ import annotations

from starlette.requests import Request

from flowmem.access import Principal
from flowmem.auth import authenticate
from flowmem.store.base import Store

PARSED_BODY = "flowmem.body"  # scope key: the JSON document of an accepted, non-empty body
LARGE_BODY = "flowmem.large_body"  # scope key: True when that body is validated off the loop


def request_principal(request: Request, token: str, store: Store) -> Principal:
    """The principal the gate found for ``request``, else look ``token`` up in ``store`` (blocking).

    Without the gate (an app assembled otherwise) the lookup runs here, in the
    route's own store call, and its principal is left in the request state.
    Raise AuthenticationError when the token is unknown or revoked.
    """
    found = getattr(request.state, "principal", None)
    if isinstance(found, Principal):
        return found
    principal = authenticate(store, token)
    request.state.token_id = principal.token_id
    request.state.principal = principal
    return principal
