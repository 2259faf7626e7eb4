"""What an in-process caller may do to a session, and deleting one as it (decisions 0107, 0109, 0115).

A framework adapter acts on a session (a LangGraph thread, an ADK session) for a caller
named by a user id or by nobody, with no permissions (none travel in process). The
rule is ``flowmem.access.decide``'s, as over HTTP, for a caller with a usable user id;
a caller without one acts only on sessions nobody owns, or on none (MEM-9). The session
id is checked as the API checks ids (``check_id_text``) before the store is asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowmem.access import Principal, decide
from flowmem.errors import AccessDeniedError
from flowmem.scope import usable_identity
from flowmem.service.checks import check_id_text

if TYPE_CHECKING:
    from flowmem.service import MemoryService

NO_IDENTITY = "an absent identity owns nothing, and this session has an owner"
"""The reason a caller without a user may not act on an owned session (MEM-9)."""


@dataclass(frozen=True)
class SessionVerdict:
    """Whether a session exists, and whether the caller may do the action on it (why, which rule)."""

    exists: bool
    allowed: bool
    reason: str
    rule: str


def judge_session(memory: MemoryService, session_id: str, user: object, action: str) -> SessionVerdict:
    """Whether a caller whose user is ``user`` may do ``action`` on the session ``session_id``.

    Implements MEM-9 for in-process callers: with a usable user id, what
    ``flowmem.access.decide`` answers for that principal (a session that does not
    exist is refused, MEM-15); without one, any action on a session that does not
    exist or that nobody owns, none on an owned one.
    """
    check_id_text(session_id, "session_id")
    record = memory.store.get_session(session_id)
    identity = usable_identity(user)
    if identity is None:
        if record is None or usable_identity(record.owner) is None:
            return SessionVerdict(record is not None, True, "nobody owns the session", "MEM-9")
        return SessionVerdict(True, False, NO_IDENTITY, "MEM-9")
    decision = decide(Principal(identity), action, record)
    return SessionVerdict(record is not None, decision.allowed, decision.reason, decision.rule)


def delete_session(memory: MemoryService, session_id: str, user: object) -> bool:
    """Delete a session with everything stored for it, as ``user`` may (MEM-9); True when it existed.

    A session that does not exist changes nothing (False). One ``user`` may not delete
    raises ``AccessDeniedError`` naming the rule, nothing deleted. ConflictError while
    the session runs a turn (``Store.delete_session``).
    """
    verdict = judge_session(memory, session_id, user, "delete_session")
    if not verdict.exists:
        return False
    if not verdict.allowed:
        raise AccessDeniedError(
            f"session {session_id!r} may not be deleted by user {usable_identity(user) or 'none'} "
            f"({verdict.reason}); nothing was deleted. Act as the session's owner",
            rule=verdict.rule,
        )
    return memory.store.delete_session(session_id)
