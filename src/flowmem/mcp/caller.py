"""Who a tool call acts as, and over what: a ``Caller`` (principal, services, a thread to run in).

Every tool acts as the caller's principal: the user a ``flowmem mcp`` process was
started for (stdio over a local database), or the Bearer token's principal of the
HTTP request that carried the call (``/mcp`` in ``flowmem serve``). Scope ids never
come from the tool's arguments but from the principal: a user's records are under
its own user id, a session is one the principal may view (read) or drive (write),
checked by ``flowmem.access.decide`` as over the REST API (MEM-8, MEM-9).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from flowmem.access import PERM_CREATE, Principal
from flowmem.errors import AuthenticationError, InvalidInputError
from flowmem.scope import ExecutionContext, usable_identity
from flowmem.service import MemoryService
from flowmem.sessions import SessionService, memory_context
from flowmem.store.base import WriteGuard

T = TypeVar("T")

NODE_ID = "mcp"
"""The node id a tool's writes are logged under (a refusal's WARNING names it)."""

Runner = Callable[[Callable[[], Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Services:
    """What the tools use: the memory service and the session service over one store."""

    memory: MemoryService
    sessions: SessionService


@dataclass(frozen=True)
class Caller:
    """One tool call's principal, the services it acts through and how store work is run.

    ``run(work)`` runs blocking store work off the event loop (a worker thread).
    """

    principal: Principal
    services: Services
    run: Runner

    async def call(self, work: Callable[[], T]) -> T:
        """Run ``work()`` (blocking store work) in a thread; its result."""
        result: T = await self.run(work)
        return result

    @property
    def user(self) -> str:
        """The principal's usable user id; AuthenticationError for a principal without one.

        The tools keep a user's own memory: a service token (no user) has none.
        """
        identity = self.principal.identity
        if identity is None:
            raise AuthenticationError(
                "this token has no user, and the memory tools keep a user's memory: "
                "use a token made with `flowmem token create --user NAME`"
            )
        return identity

    def user_context(self) -> ExecutionContext:
        """The context of a ``user``-scope call: the principal's own user id."""
        return ExecutionContext(user_id=self.user, node_id=NODE_ID)

    def session_read(self, session_id: str) -> ExecutionContext:
        """The context of a read of a session the principal may view (NotFoundError otherwise)."""
        session = self.services.sessions.load(self.principal, check_session_id(session_id), "view")
        return memory_context(session, NODE_ID)

    def session_write(self, session_id: str) -> tuple[ExecutionContext, WriteGuard]:
        """The context and guard of a write to a session: an unknown id creates it, owned by the user."""
        _ = self.user  # a session made by a tool has an owner
        return self.services.sessions.write_target(
            self.principal, check_session_id(session_id), create=True, node_id=NODE_ID
        )


    def session_drive(self, session_id: str) -> ExecutionContext:
        """The context of a change to an existing session the principal may drive (a delete): nothing is created."""
        context, _ = self.services.sessions.write_target(
            self.principal, check_session_id(session_id), create=False, node_id=NODE_ID
        )
        return context


def check_session_id(value: object) -> str:
    """A session id as text: a usable identity (1–255 characters, no whitespace), else InvalidInputError."""
    if not isinstance(value, str) or usable_identity(value) != value:
        raise InvalidInputError(
            f"session must be a session id (1-255 characters, no spaces), got {value!r}: "
            "list_sessions gives the ids of yours, or name a new one to start it",
            argument="session",
        )
    return value


def local_principal(user: str) -> Principal:
    """The principal of a ``flowmem mcp`` process over a local database: ``user``, who may create sessions."""
    identity = usable_identity(user)
    if identity is None:
        raise InvalidInputError(f"{user!r} is not a usable user id", argument="user")
    return Principal(identity, frozenset({PERM_CREATE}))
