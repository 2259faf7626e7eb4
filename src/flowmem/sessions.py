"""The session service: sessions with owners, their transcripts, and driving them.

Every operation asks ``flowmem.access.decide`` before it changes anything:

- A session the caller may not *view* is reported as not found (``NotFoundError``,
  HTTP 404), never as forbidden, so session ids do not leak. A session the caller
  may view but not act on raises ``AccessDeniedError`` (HTTP 403).
- Creating a session needs ``sessions:create`` (tokens carry it by default); the
  caller's user id becomes the owner, and a service principal (no user id)
  creates an unowned session (MEM-9).
- A turn runs with the session's OWNER as the context user, or none for an
  unowned session — never the caller (MEM-8).

``TurnRunner`` is the contract with the agent runtime; with no runner, sending a
turn records the user row in the transcript and the session's conversation
buffer (scope ``session``, key ``chat_history``) and completes at once.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from flowmem import metrics
from flowmem.access import Principal, decide
from flowmem.core import Message, check_storable, storable_text, to_row
from flowmem.errors import (
    AccessDeniedError,
    ConflictError,
    InvalidInputError,
    MetadataTooLargeError,
    NotFoundError,
    PayloadTooLargeError,
    TooManySessionsError,
)
from flowmem.limits import raise_hint
from flowmem.scope import ExecutionContext, stored_spellings, usable_identity
from flowmem.service import check_size
from flowmem.service.conversation import DEFAULT_BUFFER, Conversation
from flowmem.store.base import (
    SESSION_SCOPE,
    Erasure,
    Idempotency,
    SessionClaim,
    SessionRecord,
    Store,
    TranscriptMessage,
    WriteGuard,
)

if TYPE_CHECKING:
    from flowmem.service import MemoryService

BUFFER_SCOPE = SESSION_SCOPE
BUFFER_KEY = "chat_history"
MAX_NAME_LENGTH = 200
_METADATA_HINT = raise_hint("session_metadata_bytes")  # how a refusal says to raise the limit
MAX_AGENT_LENGTH = 200
MAX_TURN_CHARS = 1_000_000


class TurnRunner(Protocol):
    """What the agent runtime implements to run a model turn for a session.

    ``start_turn`` records the user turn, runs the model and moves the session's
    status idle → running → completed/failed; it raises ``ConflictError`` when a
    turn is already running. It returns at least ``{"turn_id", "status"}``;
    ``wait=True`` returns only when the turn has finished. ``stop`` asks a running
    turn to stop and returns whether one was running.
    """

    def start_turn(self, session: SessionRecord, content: str, *, wait: bool) -> dict[str, Any]:
        """Start (or, with ``wait``, run to the end) a turn with the user's ``content``."""
        ...

    def stop(self, session: SessionRecord) -> bool:
        """Stop the session's running turn; True when one was running."""
        ...


def memory_context(session: SessionRecord, node_id: Any = None) -> ExecutionContext:
    """Return the execution context a session's turn (or node ``node_id``) runs under.

    Implements MEM-8. The user is the session's owner when that owner is a real
    user, otherwise nobody — never the caller driving the turn. The one place this
    rule is built: the agent runtime's ``turn_context`` extends this context.
    """
    return ExecutionContext(
        session_id=session.id, user_id=usable_identity(session.owner), node_id=node_id
    )


def session_dict(session: SessionRecord, conversation: Conversation | None = None) -> dict[str, Any]:
    """Return a session as the plain JSON object the API serves, with where its conversation is.

    ``conversation`` None: a session with no buffer yet (just created), ``chat_history``.
    """
    found = conversation or Conversation(DEFAULT_BUFFER, 0, "default")
    return {
        "id": session.id,
        "name": session.name,
        "owner": session.owner,
        "status": session.status,
        "agent": session.agent,
        "metadata": dict(session.metadata),
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "conversation": found.to_dict(),
    }


def transcript_dict(item: TranscriptMessage) -> dict[str, Any]:
    """Return a transcript row as the plain JSON object the API serves."""
    return {"seq": item.seq, **item.row}


def canonical_session_id(value: object) -> str:
    """Return a session id's text; NotFoundError when it is not a usable identity.

    A session id is any usable identity (``flowmem.scope.usable_identity``, DESIGN.md
    §3), like the ``session`` scope id that names it (docs/decisions/0032): the
    UUIDs ``POST /v1/sessions`` makes and the ids adapters and hosts choose
    (``"s-weather"``). An id that is not usable names no session, so it is reported
    like a missing one.
    """
    text = usable_identity(value) if isinstance(value, str) else None
    if text is None:
        raise NotFoundError("no such session")
    return text


def _uuid_spelling(text: str) -> str | None:
    """The canonical UUID text of another spelling of a UUID (upper case, braces…), or None."""
    if len(text) > 64:
        return None
    try:
        canonical = str(uuid.UUID(text))
    except ValueError:
        return None
    return None if canonical == text else canonical


@dataclass(frozen=True)
class SessionPage:
    """A page of sessions and the total under the same filter."""

    sessions: list[SessionRecord]
    total: int


def _check_name(name: object) -> str:
    if name is None:
        return ""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or "\x00" in name:
        raise InvalidInputError(
            f"name must be text of at most {MAX_NAME_LENGTH} characters, without NUL",
            field="name",
        )
    check_storable(name, "name")
    return name


def _check_agent(agent: object) -> str | None:
    if agent is None:
        return None
    if not isinstance(agent, str) or not 1 <= len(agent) <= MAX_AGENT_LENGTH or "\x00" in agent:
        raise InvalidInputError(
            f"agent must be text of 1-{MAX_AGENT_LENGTH} characters, without NUL", field="agent"
        )
    check_storable(agent, "agent")
    return agent


def _check_metadata(metadata: object, limit: int) -> dict[str, Any]:
    """Return the metadata as a plain dict; MetadataTooLargeError past ``limit`` bytes of JSON."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError("metadata must be an object", field="metadata")
    try:
        text = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"metadata is not JSON: {exc}", field="metadata") from exc
    if not storable_text(text):
        check_storable(metadata, "metadata")  # raises InvalidTextError naming the field
    check_size(text, limit, MetadataTooLargeError, "metadata", _METADATA_HINT, field="metadata")
    return dict(json.loads(text))


def _check_content(content: object) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInputError("content must be non-empty text", field="content")
    if len(content) > MAX_TURN_CHARS:
        raise PayloadTooLargeError(
            f"content is longer than {MAX_TURN_CHARS} characters", field="content"
        )
    check_storable(content, "content")
    return content


def erase_user_data(store: Store, user_id: object) -> tuple[str | None, Erasure]:
    """Delete every session ``user_id`` owns, its ``user`` scope and its tokens, at once.

    Returns the user id's text (None when it is not a usable identity) and what the
    store deleted (``Store.erase_user``, docs/decisions/0010), summed over every
    spelling the id's data may be stored under (``stored_spellings``, decision 0016:
    a spelling stored before NFC normalization, or a placeholder such as ``"None"``
    accepted before it was refused). An id with no such spelling owns nothing (MEM-9):
    the store is not touched and the answer is ``(None, Erasure())``. ConflictError,
    with nothing deleted, while one of the user's sessions is running a turn.
    """
    total = Erasure()
    for spelling in stored_spellings(user_id):
        erased = store.erase_user(spelling)
        total = Erasure(*(a + b for a, b in zip(astuple(total), astuple(erased), strict=True)))
    return usable_identity(user_id), total


@dataclass(eq=False)
class SessionService:
    """Sessions, transcripts and turns, each operation checked by ``access.decide`` first."""

    store: Store
    memory: MemoryService
    runner: TurnRunner | None = None
    clock: Callable[[], float] = time.time

    # --- loading and deciding ---------------------------------------------------
    def load(self, principal: Principal, session_id: object, action: str = "view") -> SessionRecord:
        """Return the session if ``principal`` may do ``action`` on it.

        Implements MEM-15: a session that cannot be loaded is denied (404). One the
        caller may not view is also 404 (ids do not leak); one it may view but not
        act on is ``AccessDeniedError`` (403).
        """
        session = self._find(session_id)
        if not decide(principal, "view", session).allowed or session is None:
            raise NotFoundError("no such session")
        return self._check(principal, session, action)

    def _find(self, session_id: object) -> SessionRecord | None:
        """Return the session named ``session_id`` (NotFoundError for an unusable id), or None.

        The id is read exactly (decision 0016); a UUID spelled otherwise than
        canonically (upper case…) that names no session is also looked up in its
        canonical spelling, the one ``POST /v1/sessions`` made.
        """
        text = canonical_session_id(session_id)
        session = self.store.get_session(text)
        other = _uuid_spelling(text) if session is None else None
        return self.store.get_session(other) if other is not None else session

    def _check(self, principal: Principal, session: SessionRecord, action: str) -> SessionRecord:
        """Return ``session`` when ``principal`` (who may view it) may do ``action``; else 403."""
        if action != "view":
            decision = decide(principal, action, session)
            if not decision.allowed:
                raise AccessDeniedError(decision.reason, rule=decision.rule)
        return session

    def write_target(
        self,
        principal: Principal,
        session_id: object,
        *,
        create: bool,
        node_id: Any = None,
    ) -> tuple[ExecutionContext, WriteGuard]:
        """Return the context and guard of ``principal``'s write to a ``session`` scope.

        An existing session must be one the caller may drive (404 / 403 as ``load``);
        the write runs as its owner (MEM-8) and its guard requires, in the write's
        transaction, the caller's token and the session with that same owner (not
        deleted, nor deleted and made again by someone else: decision 0014, 0032).
        With ``create``, an id that names no session is claimed: the caller needs
        ``sessions:create`` (403), and the write creates the session, owned by the
        caller (nobody for a service principal, MEM-9), atomically with its first
        row, within ``limits.sessions_per_user`` (TooManySessionsError). Without
        ``create`` (a delete, a clear) it is NotFoundError: nothing is created.
        """
        return self.write_target_for(
            principal, session_id, self._find(session_id), create=create, node_id=node_id
        )

    def find(self, session_id: object) -> SessionRecord | None:
        """Return the session named ``session_id``, or None (NotFoundError for an unusable id)."""
        return self._find(session_id)

    def write_target_for(
        self,
        principal: Principal,
        session_id: object,
        session: SessionRecord | None,
        *,
        create: bool,
        node_id: Any = None,
    ) -> tuple[ExecutionContext, WriteGuard]:
        """``write_target`` with the session ``session_id`` names already looked up (``find``).

        ``session`` may be an earlier lookup: the guard names its owner and creation
        time, so a write to a session deleted since (or made again) is refused in
        its transaction (decision 0034).
        """
        if session is not None:
            if not decide(principal, "view", session).allowed:
                raise NotFoundError("no such session")
            session = self._check(principal, session, "drive")
            claim = SessionClaim(owner=session.owner, created_at=session.created_at)
            return memory_context(session, node_id), WriteGuard(
                principal.token_id, session.id, claim
            )
        if not create:
            raise NotFoundError("no such session")
        decision = decide(principal, "create", None)
        if not decision.allowed:
            raise AccessDeniedError(decision.reason, rule=decision.rule)
        text = canonical_session_id(session_id)
        owner = principal.identity
        # conceal: a session another user made since the lookup is 404, as if it
        # had been found then (the loser of a first-write race learns nothing)
        claim = SessionClaim(
            owner=owner,
            create=True,
            limit=self.memory.limits.sessions_per_user,
            created_at=float(self.clock()),
            conceal=True,
        )
        context = ExecutionContext(session_id=text, user_id=owner, node_id=node_id)
        return context, WriteGuard(principal.token_id, text, claim)

    # --- users ---------------------------------------------------------------------
    def erase_user(self, principal: Principal, user_id: object) -> tuple[str | None, Erasure]:
        """Delete everything stored for ``user_id``; admin only (``erase_user_data``)."""
        decision = decide(principal, "erase_user", None)
        if not decision.allowed:
            raise AccessDeniedError(decision.reason, rule=decision.rule)
        return erase_user_data(self.store, user_id)

    # --- sessions ------------------------------------------------------------------
    def create(
        self,
        principal: Principal,
        name: object = "",
        agent: object = None,
        metadata: object = None,
        *,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> SessionRecord:
        """Create a session owned by the caller (unowned for a service principal; MEM-9).

        ``idempotency``: a key recorded with the session (its answer made from the ``SessionRecord``).

        ``guard``: what must hold when the session is stored (the HTTP API passes the
        caller's token, so an erasure racing the creation leaves no session behind).
        Refuses metadata over ``limits.session_metadata_bytes`` (MetadataTooLargeError)
        and a session past the owner's ``limits.sessions_per_user``
        (TooManySessionsError); nothing is created then.
        """
        decision = decide(principal, "create", None)
        if not decision.allowed:
            raise AccessDeniedError(decision.reason, rule=decision.rule)
        limits = self.memory.limits
        checked = _check_metadata(metadata, limits.session_metadata_bytes)
        self._check_session_quota(principal.identity, limits.sessions_per_user)
        now = self.clock()
        record = SessionRecord(
            id=str(uuid.uuid4()),
            name=_check_name(name),
            owner=principal.identity,
            status="idle",
            agent=_check_agent(agent),
            metadata=checked,
            created_at=now,
            updated_at=now,
        )
        if idempotency is None:
            return self.store.create_session(record, guard)
        return self.store.create_session(record, guard, idempotency=idempotency)

    def _check_session_quota(self, owner: str | None, limit: int) -> None:
        """Refuse a new session for ``owner`` once they own ``limit`` (unowned ones are not counted).

        The count is read before the insert, so concurrent creations by one owner
        may pass the limit by the number of them in flight.
        """
        if not limit or owner is None:
            return
        _, owned = self.store.list_sessions(owner, False, 0, 0)
        if owned >= limit:
            raise TooManySessionsError(
                f"this user owns {owned} sessions, the limit is {limit}: delete some first",
                limit=limit,
            )

    def list_sessions(self, principal: Principal, limit: int = 20, offset: int = 0) -> SessionPage:
        """Return the sessions the caller may view, newest first, and their total."""
        decision = decide(principal, "list", None)
        if not decision.allowed:
            raise AccessDeniedError(decision.reason, rule=decision.rule)
        include_all = decide(principal, "list_all", None).allowed
        owner = principal.identity
        if not include_all and owner is None:
            return SessionPage([], 0)  # an absent identity owns nothing (MEM-9)
        page, total = self.store.list_sessions(owner, include_all, limit, offset)
        visible = [s for s in page if decide(principal, "view", s).allowed]
        return SessionPage(visible, total)

    def get(self, principal: Principal, session_id: object) -> SessionRecord:
        """Return one session the caller may view."""
        return self.load(principal, session_id, "view")

    def delete(self, principal: Principal, session_id: object) -> None:
        """Delete a session with its transcript and its whole session scope (owner or admin).

        The store deletes them in one transaction: the conversation buffer, every
        other buffer and memory record under ``session`` for this session, and the
        runtime's lease and call journal. It refuses (ConflictError) a session
        running a turn, checked in that transaction, so a turn cannot start between
        the check and the delete. NotFoundError when another delete came first.
        """
        session = self.load(principal, session_id, "delete_session")
        if not self.store.delete_session(session.id):
            raise NotFoundError("no such session")

    # --- transcript ----------------------------------------------------------------
    def messages(
        self,
        principal: Principal,
        session_id: object,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> tuple[list[TranscriptMessage], bool]:
        """Return a page of the transcript by sequence cursor, and whether more exist."""
        session = self.load(principal, session_id, "view")
        return self.store.list_transcript(session.id, since, before, limit, newest_first)

    def edit_message(
        self, principal: Principal, session_id: object, seq: int, message: object
    ) -> TranscriptMessage:
        """Replace one transcript row. Implements MEM-15: the administrative tier only."""
        session = self.load(principal, session_id, "edit_message")
        row = to_row(message, int(self.clock()))
        check_storable(row, "message")
        if not self.store.edit_transcript(session.id, seq, row):
            raise NotFoundError(f"no message {seq} in this session")
        return TranscriptMessage(session.id, seq, row)

    def delete_message(self, principal: Principal, session_id: object, seq: int) -> None:
        """Delete one transcript row. Implements MEM-15: the administrative tier only."""
        session = self.load(principal, session_id, "delete_message")
        if not self.store.delete_transcript(session.id, seq):
            raise NotFoundError(f"no message {seq} in this session")

    # --- driving (MEM-8, MEM-9) -----------------------------------------------------
    def send_turn(
        self,
        principal: Principal,
        session_id: object,
        content: object,
        *,
        wait: bool = False,
        guard: WriteGuard | None = None,
    ) -> dict[str, Any]:
        """Send a user turn to a session; a drive action (MEM-9) run as the owner (MEM-8).

        With a runner, the runtime records the turn and runs the model. Without one,
        the user row is appended to the session's conversation buffer under the
        owner's identity and to the transcript, and the turn completes at once;
        each write checks, inside its transaction, that the session still exists,
        and ``guard``'s token (the HTTP API passes the caller's) is still valid: a
        turn that loses against a delete or an erasure is refused (NotFoundError,
        AuthenticationError; docs/decisions/0014).
        """
        session = self.load(principal, session_id, "drive")
        text = _check_content(content)
        if self.runner is not None:
            return self.runner.start_turn(session, text, wait=wait)
        if session.status == "running":
            raise ConflictError("a turn is already running in this session")
        row: Message = to_row({"role": "user", "content": text}, int(self.clock()))
        # the session, still owned by its owner (not deleted and made again: decision 0032)
        claim = SessionClaim(owner=session.owner, created_at=session.created_at)
        guard = WriteGuard(None if guard is None else guard.token_id, session.id, claim)
        self.memory.append(
            BUFFER_SCOPE,
            BUFFER_KEY,
            [row],
            memory_context(session),
            return_messages=False,
            guard=guard,
        )
        item = self.store.add_transcript(session.id, row, guard)
        self.store.set_session_status(session.id, "completed")
        metrics.turn_ended("completed", "recorded")
        return {"turn_id": str(uuid.uuid4()), "status": "completed", "seq": item.seq}

    def stop(self, principal: Principal, session_id: object) -> dict[str, Any]:
        """Stop the session's running turn (a drive action); report whether one was running."""
        session = self.load(principal, session_id, "drive")
        stopped = self.runner.stop(session) if self.runner is not None else False
        current = self.store.get_session(session.id)
        return {"stopped": stopped, "status": (current or session).status}

    def reset(self, principal: Principal, session_id: object) -> dict[str, Any]:
        """Clear the session's conversation buffer (a drive action); the transcript stays."""
        session = self.load(principal, session_id, "drive")
        if session.status == "running":
            raise ConflictError("the session is running a turn; stop it first")
        result = self.memory.clear(BUFFER_SCOPE, BUFFER_KEY, memory_context(session))
        return {"reset": bool(result.success), "status": session.status}
