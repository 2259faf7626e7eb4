"""Exactly-once writes under retries: the ``Idempotency-Key`` header (docs/decisions/0031).

Every write route accepts ``Idempotency-Key`` (1 to 255 printable ASCII
characters, else 422 ``invalid_idempotency_key``). The key belongs to the
principal: its user (``user:<id>``), or its token for a service principal
(``token:<id>``); two principals never see each other's keys. It is stored with a
fingerprint of the request (method, path, query, body) and the answer (status and
body), kept ``Limits.idempotency_seconds`` (default 24 h).

A repeat with the same key and fingerprint is answered the first answer, with
``Idempotent-Replayed: true``, and writes nothing; the same key with another
fingerprint is 422 ``idempotency_key_reused``.

Two ways to record the key:

- **fused** (``Keyed.fused``: append, buffer clear, record write and delete,
  session create): the store inserts the key with its answer inside the write's
  own transaction, so the write and its key commit together. A repeat's write
  finds the key taken when it inserts it (on PostgreSQL it waits for a first
  request still in flight), rolls back, and is answered from the stored key.
- **claimed** (``Keyed.claimed``: the routes whose work is several transactions or
  a model turn — session delete, turn, stop, reset, transcript edit and delete,
  user erase): the key is claimed in its own transaction first (a repeat meanwhile
  is 409 ``idempotency_key_in_flight``), the answer is recorded when the work is
  done, and a failed work releases the claim. A server that dies between the work
  and the answer leaves the claim: repeats are 409 until it expires (at most once).

A request that fails records nothing (a refused request changes nothing), so it
can be retried with the same key, unless the key was recorded meanwhile: then
its answer is the recorded one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import Request, Response

from flowmem import metrics
from flowmem.access import Principal
from flowmem.api.principal import PARSED_BODY
from flowmem.api.render import render
from flowmem.errors import (
    FlowmemError,
    IdempotencyKeyInFlightError,
    IdempotencyKeyInvalidError,
    IdempotencyKeyReusedError,
)
from flowmem.limits import IDEMPOTENCY_KEY_MAX, check_idempotency_key
from flowmem.results import REFUSED_KEY
from flowmem.store.base import Idempotency, Store, StoredAnswer, idempotency_owner

if TYPE_CHECKING:
    from flowmem.api.deps import Caller

HEADER = "idempotency-key"
REPLAYED = "Idempotent-Replayed"  # "true" on an answer repeated from a stored key
REFUSED_HEADER = "X-Flowmem-Refused"  # a refused scope's code, beside the neutral result (0047)
KEY_MAX = IDEMPOTENCY_KEY_MAX  # characters of a key


PARAMETER: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": KEY_MAX, "pattern": "^[ -~]+$"},
    "description": "Makes a retry of this write safe: a repeat with the same key and the same "
    "request within the retention window (24 h by default) is answered the first answer "
    "(`Idempotent-Replayed: true`) and writes nothing.",
}
OPENAPI: dict[str, Any] = {"parameters": [PARAMETER]}
"""``openapi_extra`` of a write route: the header, beside what FastAPI documents."""


@dataclass(frozen=True)
class Answer:
    """A keyed request's answer: its status, its JSON body text, and whether it is repeated."""

    status: int
    body: str
    replayed: bool = False
    refused: str | None = None  # the code of a refused scope (``X-Flowmem-Refused``)

    def response(self) -> Response:
        """The HTTP response (no body for 204; ``Idempotent-Replayed: true`` on a repeat)."""
        headers = {REPLAYED: "true"} if self.replayed else {}
        refused = self.refused
        if refused is None and self.replayed and f'"{REFUSED_KEY}"' in self.body:
            refused = json.loads(self.body).get(REFUSED_KEY)  # a stored refused answer
        if isinstance(refused, str):
            headers[REFUSED_HEADER] = refused
        if self.status == 204:
            return Response(status_code=204, headers=headers)
        content = self.body.encode("utf-8")
        return Response(content, self.status, headers=headers, media_type="application/json")


def fingerprint(request: Request) -> str:
    """Hash the request's method, path, query and JSON body (as parsed: spacing and key order do not count)."""
    document = request.scope.get(PARSED_BODY)
    body = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hashlib.sha256()
    for part in (request.method, request.url.path, request.url.query, body):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def _text(status: int, result: Any) -> str:
    """The JSON text of an answer with ``status`` (none for 204)."""
    return "" if status == 204 else render(result).decode("utf-8")


def _refused(result: Any) -> str | None:
    """The refusal code of a memory result (None for any other answer)."""
    refused = getattr(result, "refused", None)
    return refused if isinstance(refused, str) else None


@dataclass(frozen=True)
class Keyed:
    """A write request that carries an ``Idempotency-Key``, and how to answer it once."""

    key: str
    fingerprint: str
    store: Store
    retention: int  # seconds; 0: kept until the owner is erased
    clock: Callable[[], float]

    @classmethod
    def of(cls, request: Request) -> Keyed | None:
        """The request's key (None without the header); IdempotencyKeyInvalidError (422) when unusable."""
        values = request.headers.getlist(HEADER)
        if not values:
            return None
        if len(values) > 1:
            raise IdempotencyKeyInvalidError(
                "send one Idempotency-Key header", field="Idempotency-Key"
            )
        services = request.app.state.services
        memory = services.memory
        return cls(
            check_idempotency_key(values[0]),
            fingerprint(request),
            services.store,
            memory.limits.idempotency_seconds,
            memory.clock,
        )

    def idempotency(
        self, principal: Principal, render: Callable[[Any], Any], status: int
    ) -> Idempotency:
        """The key as a store records it, for ``principal``, answering ``render(result)`` with ``status``."""
        now = float(self.clock())
        return Idempotency(
            owner=idempotency_owner(principal.identity, principal.token_id),
            key=self.key,
            fingerprint=self.fingerprint,
            expires_at=now + self.retention if self.retention else None,
            answer=lambda result: (status, _text(status, render(result))),
        )

    def _repeat(self, stored: StoredAnswer) -> Answer:
        """The answer to a repeat of a stored key: the first answer, 422 or 409."""
        if stored.fingerprint != self.fingerprint:
            raise IdempotencyKeyReusedError(
                "this Idempotency-Key was used for a different request", field="Idempotency-Key"
            )
        if stored.status == 0:
            raise IdempotencyKeyInFlightError(
                "the first request with this Idempotency-Key is not answered yet; retry later"
            )
        metrics.idempotent_replay()
        return Answer(stored.status, stored.body, replayed=True)

    def _stored(self, owner: str) -> StoredAnswer | None:
        return self.store.get_idempotency(owner, self.key, float(self.clock()))

    def fused(
        self,
        principal: Principal,
        write: Callable[[Idempotency], Any],
        render: Callable[[Any], Any],
        status: int = 200,
    ) -> Answer:
        """Run ``write(idempotency)``, whose store write records the key in its transaction.

        A repeat (the key taken: IdempotencyKeyInFlightError from the store, or any
        error of a write the first request changed the ground for) is answered from
        the stored key. An expired key found in the way is deleted and the write
        runs once more.
        """
        idem = self.idempotency(principal, render, status)
        for _ in range(2):
            try:
                result = write(idem)
            except IdempotencyKeyInFlightError:
                stored = self._stored(idem.owner)
                if stored is None:
                    continue  # it expired (now deleted) or its claim was released: once more
                return self._repeat(stored)
            except FlowmemError:
                stored = self._stored(idem.owner)
                if stored is None:
                    raise
                return self._repeat(stored)
            return Answer(status, _text(status, render(result)), refused=_refused(result))
        raise IdempotencyKeyInFlightError("this Idempotency-Key is in use; retry later")

    def claimed(
        self,
        principal: Principal,
        work: Callable[[], Any],
        render: Callable[[Any], Any],
        status: Callable[[Any], int] | int = 200,
    ) -> Answer:
        """Claim the key, run ``work()``, record its answer; a failed work releases the claim."""
        idem = self.idempotency(principal, render, 0)
        found = self.store.claim_idempotency(idem, float(self.clock()))
        if found is not None:
            return self._repeat(found)
        try:
            result = work()
        except BaseException:
            self.store.release_idempotency(idem.owner, self.key)
            raise
        code = status(result) if callable(status) else status
        answer = Answer(code, _text(code, render(result)), refused=_refused(result))
        self.store.answer_idempotency(idem.owner, self.key, answer.status, answer.body)
        return answer


async def claimed_once(
    caller: Caller,
    work: Callable[[Principal], Any],
    render: Callable[[Any], Any] = lambda result: result,
    status: Callable[[Any], int] | int = 200,
    *,
    long: bool = False,
) -> Any:
    """Run a write whose work is not one store transaction: ``render(result)`` of ``work``.

    With an ``Idempotency-Key`` the work runs at most once for the key
    (``Keyed.claimed``) and the answer is the ``Response`` of its ``Answer``, with
    ``status``. ``long``: in the general thread pool (a turn may wait for a
    model), else in a store thread.
    """
    run = caller.in_long_thread if long else caller.in_store_thread
    keyed = Keyed.of(caller.request)
    if keyed is None:
        return render(await run(work))

    def job(principal: Principal) -> Answer:
        return keyed.claimed(principal, lambda: work(principal), render, status)

    answer: Answer = await run(job)
    return answer.response()


__all__ = [
    "HEADER",
    "KEY_MAX",
    "OPENAPI",
    "PARAMETER",
    "REFUSED_HEADER",
    "REPLAYED",
    "Answer",
    "Keyed",
    "claimed_once",
    "fingerprint",
]
