"""From an execution context to an API request: the ``Memory`` protocol over HTTP.

The client resolves the scope against the context exactly as ``MemoryService`` does
(``flowmem.scope.resolve_scope``). A refusal is answered locally, with the same
neutral result and the same one WARNING (MEM-7), and nothing is sent. Otherwise
the resolved id becomes the query parameter the API takes:

- ``session``: ``?session_id=`` (the server checks the token may view or drive it;
  the session's owner is the memory's user, MEM-8);
- ``workflow`` / ``pipeline`` / ``execution``: ``?workflow_id=`` … (the token needs
  ``memory:shared``, as does ``global``);
- ``user``: the server takes the user from the token, never from the request. A
  context naming another user than the token's is refused by the client with
  ``AccessDeniedError`` (rule ``token_user``) before anything is sent: silently
  writing to the token's user instead would mix two users' memories
  (docs/decisions/0030).

A ``session`` the server does not know yet answers 404 to a read, a load, a
delete, a clear or a pop (decision 0032: only a write creates it). ``MemoryService``
answers those with the empty result (nothing written there yet), so the client
does too (``no_session_yet``): a LangChain history's or an Agents SDK session's
first read, before its first write, is the empty history over HTTP as in process.
A session the token may not view is also 404, and reads as empty as well: the
server does not say it exists (a write to it is refused, 404 as well).
"""

from __future__ import annotations

from dataclasses import dataclass

from flowmem.client.calls import Where
from flowmem.errors import AccessDeniedError
from flowmem.refusals import log_refusal
from flowmem.scope import ExecutionContext, Refusal, check_scope, resolve_scope

USER_RULE = "token_user"


@dataclass(frozen=True)
class Plan:
    """Where a protocol call goes: its query parameters, and the user it must be made as."""

    where: Where
    user_id: str | None = None


def no_session_yet(scope: str) -> bool:
    """Whether a 404 to a read-like call of ``scope`` means a session not written yet (empty)."""
    return check_scope(scope) == "session"


def session_id_of(where: Where) -> str:
    """The resolved id of a session-scope request (what the service reports)."""
    return where.session_id or ""


def plan(
    operation: str, scope: str, key: str, context: ExecutionContext | None
) -> Plan | Refusal:
    """Resolve ``scope`` against ``context``; a refusal is logged once (MEM-7) and returned."""
    name = check_scope(scope)
    resolved = resolve_scope(name, context)
    if isinstance(resolved, Refusal):
        log_refusal(operation, key, resolved, context, "nothing was sent to the server")
        return resolved
    if name == "user":
        return Plan(Where(), user_id=resolved)
    if name == "session":
        return Plan(Where(session_id=resolved))
    if name == "global":
        return Plan(Where())
    return Plan(Where(**{f"{name}_id": resolved}))


def check_user(wanted: str, token_user: str) -> None:
    """Refuse a ``user``-scope call for another user than the token's (AccessDeniedError)."""
    if wanted != token_user:
        acting = f"user {token_user!r}" if token_user else "no user (a service token)"
        raise AccessDeniedError(
            f"the execution context names user {wanted!r}, but this client's token acts as "
            f"{acting}: the server takes the user scope from the token, so use a token of "
            f"{wanted!r}",
            rule=USER_RULE,
        )


__all__ = ["USER_RULE", "Plan", "check_user", "plan"]
