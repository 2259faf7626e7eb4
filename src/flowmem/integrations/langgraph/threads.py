"""Who may act on a LangGraph thread, and the ids a ``FlowmemSaver`` is handed (decisions 0107, 0109).

A thread is a flowmem session. Its caller is the one a write is claimed for: the
config's ``user_id``, else the saver's context user; ``delete_thread``, ``copy_thread``
and ``prune`` take no config, so theirs is the context user. A caller with a usable
user id may do what ``flowmem.access.decide`` lets that principal do over HTTP (no
permissions travel in process): view, drive or delete its own threads, never another
user's nor an unowned one (MEM-9, MEM-15). A caller without a user acts only on the
threads nobody owns: the ones its writes may claim.

Every id a saver is handed is first checked as the HTTP API checks ids
(``flowmem.service.checks.check_name``: at most 255 code points, no NUL, text UTF-8 can
encode), so a bad one is a typed error on every backend, never a driver's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flowmem.errors import AccessDeniedError
from flowmem.scope import usable_identity
from flowmem.service import MemoryService
from flowmem.service.checks import check_id_text, check_name
from flowmem.service.session_access import judge_session

OWNER = "user_id"
"""The configurable key naming the thread's owner (LangGraph's convention)."""
CONFIG_IDS = (("checkpoint_ns", True), ("checkpoint_id", False))
"""The configurable's text ids beside thread and user: (key, may be empty)."""


def check_config(conf: Mapping[str, Any], context_user: object) -> None:
    """Refuse a config whose ids the HTTP API would refuse (``InvalidInputError``, ``InvalidTextError``).

    The thread id and the caller's user id (the config's, else ``context_user``) are
    identities: text that cannot be an id is refused here, a well-formed id that is
    not usable is left to MEM-9 and MEM-13. The namespace may be empty; a checkpoint id
    named is at most 255 code points too.
    """
    check_id_text(conf.get("thread_id"), "thread_id")
    check_id_text(conf.get("user_id", context_user), "user_id")
    for key, empty in CONFIG_IDS:
        if conf.get(key) is not None:
            check_name(conf[key], key, empty=empty)


def check_ids(values: Iterable[object], name: str, *, longest: int | None = 255) -> None:
    """Refuse any of ``values`` (checkpoint ids, task ids, run ids, channel names) the API would refuse."""
    for value in values:
        check_name(value, name, empty=True, longest=longest)


def owned_configurable(asked: Mapping[str, Any], thread: str, ns: str, checkpoint_id: str) -> dict[str, Any]:
    """A checkpoint's configurable, with the ``user_id`` of the config that asked for it.

    The owner a caller named travels with the configs it reads, so a replay or a fork
    of them writes as the same caller (never as the thread's owner: a caller who names
    nobody, or another user, gets nothing more than it asked with).
    """
    configurable: dict[str, Any] = {
        "thread_id": thread,
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint_id,
    }
    if asked.get(OWNER) is not None:
        configurable[OWNER] = asked[OWNER]
    return configurable


class ThreadAccess:
    """The access decisions of one saver's threads (``flowmem.service.session_access``), one session lookup each."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory

    def viewable(self, thread: str, user: object) -> bool:
        """True when a caller whose user is ``user`` may read ``thread`` (decision 0107).

        A caller with a user reads what ``flowmem.access.decide`` lets it view: its own
        sessions, never another user's nor an unowned one (MEM-9), nor one that does not
        exist (MEM-15). A caller without a user reads only threads nobody owns.
        """
        return judge_session(self.memory, thread, user, "view").allowed

    def acts(self, thread: str, action: str, user: object, operation: str) -> bool:
        """Whether a thread operation acts on ``thread``: True, False (nothing there), or AccessDeniedError.

        ``action`` is what ``flowmem.access.decide`` judges (``delete_session``,
        ``drive``, ``view``). A thread whose session does not exist holds nothing a
        caller with a user may touch (False: skipped, as LangGraph's savers skip an
        unknown thread); for a caller without a user it is unowned and acted on (the
        rows of a thread written before sessions were, decision 0040). A thread another
        user owns, or an owned one for a caller without a user, raises
        ``AccessDeniedError`` naming the rule (decision 0109): nothing is changed.
        """
        verdict = judge_session(self.memory, thread, user, action)
        identity = usable_identity(user)
        if not verdict.exists:
            return identity is None
        if verdict.allowed:
            return True
        raise AccessDeniedError(
            f"LangGraph {operation} refused: thread {thread!r} is a session the saver's user "
            f"({identity or 'none'}) may not {action.replace('_session', '')} ({verdict.reason}); nothing "
            "was changed. Build the saver with the owner's ExecutionContext(user_id=...)",
            rule=verdict.rule,
            thread_id=thread,
        )


__all__ = ["CONFIG_IDS", "OWNER", "ThreadAccess", "check_config", "check_ids", "owned_configurable"]
