"""What the two clients do, as steps: each request, retry and multi-call operation written once.

A client method is declared as the work it asks for (``flowmem.client.methods``): a
``Call``, a ``Planned`` memory protocol call, or a generator of those that gets each
one's answer back (``compact``: plan, summarize, apply, again when stale). ``expand``
spells any work as steps, a generator that yields

- a ``base.Request`` and gets back its ``httpx.Response`` (or the ``httpx.TransportError``),
- a ``Wait`` and gets nothing back once the client has slept,
- an ``Awaited`` and gets back its value awaited (the sync client gives the value back as is),

and returns the result. Nothing here sends or sleeps: ``AsyncClient`` and the
generated ``Client`` only perform the steps (their ``_run``), each with its own
httpx client and sleep, so the retry policy, the scope planning and the
compaction loop exist once (sans I/O, as h11 and psycopg write their protocols).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from flowmem.client import calls
from flowmem.client.base import (
    WHOAMI_KEY,
    Refused,
    Request,
    Settings,
    explained,
    read_answer,
    request_of,
    unreachable,
    wait_after,
)
from flowmem.client.calls import Call, Where
from flowmem.client.scoping import check_user, no_session_yet, plan, session_id_of
from flowmem.errors import NotFoundError
from flowmem.limits import check_idempotency_key
from flowmem.scope import ExecutionContext, Refusal

T = TypeVar("T")

Steps = Generator[Any, Any, T]
"""Steps (or work) that end with a ``T``: each thing yielded is answered by what is sent back."""


@dataclass(frozen=True)
class Wait:
    """Sleep ``seconds`` before the next attempt."""

    seconds: float


@dataclass(frozen=True)
class Awaited:
    """An awaitable a caller's function returned (``compact``'s summary): the async client awaits it."""

    value: Any


@dataclass(frozen=True)
class Done(Generic[T]):
    """Steps that have ended, with their result."""

    value: T


def advance(steps: Steps[T], outcome: Any = None) -> Request | Wait | Awaited | Done[T]:
    """The next step of ``steps`` once ``outcome`` (that of the step before) is sent in, or ``Done``."""
    try:
        return steps.send(outcome)  # type: ignore[no-any-return]
    except StopIteration as done:
        return Done(done.value)


def exchange(call: Call[T], settings: Settings) -> Steps[T]:
    """``call`` sent, and sent again under the retry policy: its answer, or its error raised.

    A write carries ``call.idempotency_key`` (checked before anything is sent), else a
    fresh random key; every retry of it carries the same key.
    """
    request = request_of(call, call.idempotency_key)
    attempt = 0
    while True:
        attempt += 1
        outcome = yield request
        if isinstance(outcome, httpx.TransportError):
            wait = wait_after(settings.retry, attempt, outcome)
            if wait is None:
                raise unreachable(outcome, attempt, settings, request) from outcome
        else:
            answer = read_answer(call, outcome)
            if not isinstance(answer, Refused):
                return answer
            wait = wait_after(settings.retry, attempt, answer)
            if wait is None:
                raise explained(answer.error, settings, request)
        yield Wait(wait)


class Identity:
    """The user a client's token acts as (``""`` for a service token): asked once, then kept."""

    def __init__(self) -> None:
        self.user: str | None = None

    def steps(self, settings: Settings) -> Steps[str]:
        """The user id: a zero-row read of the token's own ``user`` buffer the first time."""
        if self.user is None:
            read = yield from exchange(calls.load_buffer("user", WHOAMI_KEY, Where(), last=0), settings)
            self.user = read.resolved_scope_id
        return self.user


@dataclass(frozen=True)
class Planned(Generic[T]):
    """A memory protocol call (``read``, ``append``, ``compaction_plan`` …): its scope planned first.

    ``build`` makes the call from where the scope resolved to; ``neutral`` the result of
    a refusal (``neutral(refusal=…)``, MEM-7, MEM-14); with ``absent``, a ``session``
    scope whose session no write has created yet answers ``absent(session_id)``, as
    the service answers it (nothing found, nothing removed), where the server answers
    404.
    """

    operation: str
    scope: str
    key: str
    context: ExecutionContext | None
    build: Callable[[Where], Call[T]]
    neutral: Callable[..., T]
    absent: Callable[[str], T] | None = None
    idempotency_key: str | None = None


def planned_steps(planned: Planned[T], settings: Settings, identity: Identity) -> Steps[T]:
    """``planned`` as steps: a refusal sends nothing; a ``user`` scope is checked against the token's user."""
    if planned.idempotency_key is not None:  # refused before the user look-up is sent
        check_idempotency_key(planned.idempotency_key)
    target = plan(planned.operation, planned.scope, planned.key, planned.context)
    if isinstance(target, Refusal):
        return planned.neutral(refusal=target)
    if target.user_id is not None:
        check_user(target.user_id, (yield from identity.steps(settings)))
    call = planned.build(target.where).keyed(planned.idempotency_key)
    try:
        return (yield from exchange(call, settings))
    except NotFoundError:
        if planned.absent is None or not no_session_yet(planned.scope):
            raise
        return planned.absent(session_id_of(target.where))


Work = Call[T] | Planned[T] | Steps[T]
"""What a declared client method asks for: one call, one planned call, or steps of those."""


def expand(work: Work[T], settings: Settings, identity: Identity) -> Steps[T]:
    """``work`` as requests and waits; each call a generator of work yields is answered (or raised) back in it."""
    if isinstance(work, Call):
        return (yield from exchange(work, settings))
    if isinstance(work, Planned):
        return (yield from planned_steps(work, settings, identity))
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            item = work.send(reply) if error is None else work.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = (yield item) if isinstance(item, Awaited) else (yield from expand(item, settings, identity))
        except Exception as exc:  # the work's own try/except decides (a stale compaction plan)
            error = exc


@dataclass(frozen=True)
class Pages(Generic[T]):
    """A listing read a page at a time: the first page's call, and the next one's from a page (None: done)."""

    first: Call[Any]
    after: Callable[[Any], Call[Any] | None]


__all__ = [
    "Awaited",
    "Done",
    "Identity",
    "Pages",
    "Planned",
    "Steps",
    "Wait",
    "Work",
    "advance",
    "exchange",
    "expand",
    "planned_steps",
]
