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

import threading
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
    check_config_ids(conf)


def check_config_ids(conf: Mapping[str, Any]) -> None:
    """``check_config``'s checks of the namespace and checkpoint id (``CONFIG_IDS``), not the identities'."""
    for key, empty in CONFIG_IDS:
        if conf.get(key) is not None:
            check_name(conf[key], key, empty=empty)


def check_ids(values: Iterable[object], name: str, *, longest: int | None = 255) -> None:
    """Refuse any of ``values`` (checkpoint ids, task ids, run ids, channel names) the API would refuse."""
    for value in values:
        check_name(value, name, empty=True, longest=longest)


def owned_configurable(
    asked: Mapping[str, Any], thread: str, ns: str, checkpoint_id: str
) -> dict[str, Any]:
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


ABSENT = object()
"""``ResolvedThreads``' key of a config that names no ``user_id``."""


class ResolvedThreads:
    """The threads a saver's writes resolved, by the config's thread id and user id (decision 0212).

    What a write's thread resolves to (``check_config``'s checks of the two identities,
    ``resolve_scope``, the caller's ``ExecutionContext``) depends on these two ids and the
    saver's own context only, so a saver keeps it per (thread id, user id or ``ABSENT``),
    with the context it was made from, for ids that are exactly ``str`` (or a user id
    ``None``/absent): a hash and an equality that cannot be anyone's own. A refusal is
    never kept (each logs its one WARNING, MEM-7); the newest ``capacity`` are kept.
    """

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._found: dict[tuple[str, object], tuple[object, str, Any]] = {}
        self._lock = threading.Lock()  # ``keep``'s pruning iterates the dict

    @staticmethod
    def key(conf: Mapping[str, Any]) -> tuple[str, object] | None:
        """The key of a config's two ids, or None when they are not plain text to keep."""
        thread = conf.get("thread_id")
        user = conf.get(OWNER, ABSENT)
        if type(thread) is not str or not (user is ABSENT or user is None or type(user) is str):
            return None
        return (thread, user)

    def get(self, key: tuple[str, object], base: object) -> tuple[str, Any] | None:
        """The thread and context kept for ``key`` when made from the context ``base``, else None."""
        found = self._found.get(key)
        if found is None or found[0] is not base:
            return None
        return found[1], found[2]

    def keep(self, key: tuple[str, object], base: object, thread: str, context: Any) -> None:
        """Keep what ``key`` resolved to from ``base`` (the oldest dropped past ``capacity``)."""
        found = self._found
        with self._lock:
            found.pop(key, None)
            found[key] = (base, thread, context)
            while len(found) > self.capacity:
                found.pop(next(iter(found)), None)


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


__all__ = [
    "ABSENT",
    "CONFIG_IDS",
    "OWNER",
    "ResolvedThreads",
    "ThreadAccess",
    "check_config",
    "check_config_ids",
    "check_ids",
    "owned_configurable",
]
