# Generated from src/flowmem/client/aio_scoped.py by scripts/async_to_sync.py: do not edit.
# Change aio_scoped.py, then run `python scripts/async_to_sync.py` (`make lint` fails while this file is stale).
"""What the sync client's calls share: ``call``, and the plan of a memory protocol call (``Client`` inherits it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from flowmem.client import calls
from flowmem.client.base import WHOAMI_KEY
from flowmem.client.calls import Call, Where
from flowmem.client.scoping import check_user, no_session_yet, plan, session_id_of
from flowmem.errors import NotFoundError
from flowmem.limits import check_idempotency_key
from flowmem.scope import ExecutionContext, Refusal

T = TypeVar("T")
R = TypeVar("R")


class ScopedCalls:
    """The client's ``call`` (``Client`` defines it), the user it acts as, a memory call's plan."""

    _user: str | None

    if TYPE_CHECKING:

        def call(self, call: Call[T], *, idempotency_key: str | None = None) -> T: ...

    def user_id(self) -> str:
        """The user id the token acts as (``""`` for a service token); asked once, then kept."""
        if self._user is None:
            read = self.call(calls.load_buffer("user", WHOAMI_KEY, Where(), last=0))
            self._user = read.resolved_scope_id
        return self._user

    def _plan(
        self,
        operation: str,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        idempotency_key: str | None = None,
    ) -> Where | Refusal:
        if idempotency_key is not None:  # refused before the user look-up is sent
            check_idempotency_key(idempotency_key)
        target = plan(operation, scope, key, context)
        if isinstance(target, Refusal):
            return target
        if target.user_id is not None:
            check_user(target.user_id, self.user_id())
        return target.where

    def _memory(
        self,
        operation: str,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        build: Callable[[Where], Call[T]],
        neutral: Callable[..., R],
        absent: Callable[[str], R] | None = None,
        idempotency_key: str | None = None,
    ) -> T | R:
        """A memory protocol call: its scope planned, then ``build(where)`` sent.

        A refusal sends nothing and returns ``neutral(refusal=…)`` (MEM-7, MEM-14). With
        ``absent``, a ``session`` scope whose session no write has created yet answers
        ``absent(session_id)``, as the service answers it (nothing found, nothing
        removed), where the server answers 404.
        """
        where = self._plan(operation, scope, key, context, idempotency_key)
        if isinstance(where, Refusal):
            return neutral(refusal=where)
        try:
            return self.call(build(where), idempotency_key=idempotency_key)
        except NotFoundError:
            if absent is None or not no_session_yet(scope):
                raise
            return absent(session_id_of(where))
