"""Principals and access decisions over sessions (pure; MEM-8, MEM-9, MEM-15).

One function, ``decide(principal, action, session)``, answers every access
question the session service and the HTTP API ask. It never does I/O, so the
whole table is tested cell by cell (``tests/test_access.py``).

The rules, in the order they are applied:

1. A revoked principal is denied everything.
2. ``create`` needs the ``sessions:create`` permission (or ``admin``); ``list``
   is open to every principal (the entries are filtered by ``view``);
   ``erase_user`` (delete everything stored for a user id) needs ``admin``;
   ``list_all`` (list every session, not only one's own) needs
   ``sessions:view_any``, ``sessions:drive_any`` or ``admin``, the permissions that
   let a principal view any session; ``shared_memory`` (use the shared memory
   scopes ``global``, ``workflow``, ``pipeline``, ``execution``) needs
   ``memory:shared`` (or ``admin``). These four judge no session.
3. Every other action needs a session: a missing session (None) is denied,
   since the ownership it would be judged against cannot be established (MEM-15).
4. Ownership needs a real id on both sides: a principal without a usable user id
   owns nothing, a session without a usable owner is owned by nobody (MEM-9).
5. ``view``: owner, ``sessions:view_any``, ``sessions:drive_any`` or ``admin``.
   ``drive`` (send a turn, stop, reset): owner, ``sessions:drive_any`` or
   ``admin`` — viewing never implies driving (MEM-9).
   ``delete_session``: owner or ``admin``.
   ``edit_message`` / ``delete_message``: ``admin`` only (MEM-15).
6. Extension hooks (``HOOKS``) run after the rules on every decision; each may
   return a denying ``Decision`` (or None to abstain). A hook can never turn a
   denial into a grant, and a hook that raises denies (MEM-15).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from flowmem.scope import usable_identity

# The closed list of permissions a token can carry (docs/access.md).
PERM_CREATE = "sessions:create"
PERM_VIEW_ANY = "sessions:view_any"
PERM_DRIVE_ANY = "sessions:drive_any"
PERM_SHARED = "memory:shared"
PERM_METRICS = "metrics:read"
PERM_ADMIN = "admin"
PERMISSIONS: frozenset[str] = frozenset(
    {PERM_CREATE, PERM_VIEW_ANY, PERM_DRIVE_ANY, PERM_SHARED, PERM_METRICS, PERM_ADMIN}
)

# The closed list of actions ``decide`` judges.
ACTIONS: tuple[str, ...] = (
    "create",
    "list",
    "view",
    "drive",
    "delete_session",
    "edit_message",
    "delete_message",
    "erase_user",
    "list_all",
    "shared_memory",
    "read_metrics",
)


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user id (None for a service principal) and its permissions."""

    user_id: str | None
    permissions: frozenset[str] = field(default_factory=frozenset)
    token_id: str | None = None
    revoked: bool = False

    @property
    def is_admin(self) -> bool:
        """True when the principal carries the ``admin`` permission."""
        return PERM_ADMIN in self.permissions

    def has(self, permission: str) -> bool:
        """True when the principal carries ``permission`` or is an admin."""
        return permission in self.permissions or self.is_admin

    @cached_property
    def identity(self) -> str | None:
        """The principal's usable user id, or None: an absent identity owns nothing (MEM-9).

        Computed once per principal, on first use; ``flowmem.auth.principal_of`` fills
        it in when it builds the principal of a token, so a request computes it once.
        """
        return real_id(self.user_id)


class SessionLike(Protocol):
    """What access needs of a session: its owner (a user id or None)."""

    @property
    def owner(self) -> str | None:
        """The owner's user id, or None for an unowned session."""
        ...


@dataclass(frozen=True)
class Decision:
    """The answer of ``decide``: allowed or not, why, and the rule that decided."""

    allowed: bool
    reason: str
    rule: str


Hook = Callable[[Principal, str, "SessionLike | None", Decision], "Decision | None"]

# Extension hooks: callables ``(principal, action, session, decision) -> Decision | None``.
# They run after the rules on every decision; they may deny, never grant (MEM-15).
HOOKS: list[Hook] = []


def real_id(value: object) -> str | None:
    """Return the user id's text when ``value`` is a usable identity, else None (MEM-9).

    The one rule is ``flowmem.scope.usable_identity`` (DESIGN.md §3, decision 0016).
    """
    return usable_identity(value)


def owns(principal: Principal, session: SessionLike | None) -> bool:
    """True only when both sides carry the same real identity.

    Implements MEM-9: a principal without a usable user id owns nothing, and a
    session without a usable owner is owned by nobody, so two absent identities
    never match.
    """
    if session is None:
        return False
    mine = principal.identity
    theirs = real_id(session.owner)
    return mine is not None and theirs is not None and mine == theirs


def _views_any(principal: Principal) -> bool:
    """True when ``principal`` may view every session, owned or not (MEM-9)."""
    return principal.has(PERM_VIEW_ANY) or principal.has(PERM_DRIVE_ANY)


def _allow(reason: str, rule: str) -> Decision:
    return Decision(True, reason, rule)


def _deny(reason: str, rule: str) -> Decision:
    return Decision(False, reason, rule)


def _may(granted: bool, allow: tuple[str, str], deny: tuple[str, str]) -> Decision:
    return _allow(*allow) if granted else _deny(*deny)


def _create(principal: Principal) -> Decision:
    return _may(
        principal.has(PERM_CREATE),
        ("the principal may create sessions", "MEM-9"),
        ("creating a session needs the sessions:create permission", "MEM-9"),
    )


def _erase_user(principal: Principal) -> Decision:
    return _may(
        principal.is_admin,
        ("the principal is an admin", "admin"),
        ("erasing a user's data needs admin", "admin"),
    )


def _list_all(principal: Principal) -> Decision:
    return _may(
        _views_any(principal),
        ("the principal may view any session", "MEM-9"),
        ("listing every session needs sessions:view_any, sessions:drive_any or admin", "MEM-9"),
    )


def _shared_memory(principal: Principal) -> Decision:
    return _may(
        principal.has(PERM_SHARED),
        ("the principal may use the shared scopes", "access"),
        (
            "the shared scopes (global, workflow, pipeline, execution) need the "
            f"{PERM_SHARED} permission",
            "access",
        ),
    )


def _read_metrics(principal: Principal) -> Decision:
    return _may(
        principal.has(PERM_METRICS),
        ("the principal may read the server's metrics", "access"),
        (f"the metrics need the {PERM_METRICS} permission", "access"),
    )


_WITHOUT_SESSION: dict[str, Callable[[Principal], Decision]] = {
    "create": _create,
    "erase_user": _erase_user,
    "list_all": _list_all,
    "shared_memory": _shared_memory,
    "read_metrics": _read_metrics,
}


def _owner_or(mine: bool, granted: bool, allowed: str, denied: str) -> Decision:
    """A session's owner may (MEM-9); anyone else when ``granted`` (``allowed``), else not (``denied``)."""
    if mine:
        return _allow("the principal owns the session", "MEM-9")
    return _may(granted, (allowed, "MEM-9"), (denied, "MEM-9"))


def _view(principal: Principal, mine: bool) -> Decision:
    return _owner_or(
        mine,
        _views_any(principal),
        "the principal may view any session",
        "the principal neither owns nor may view this session",
    )


def _drive(principal: Principal, mine: bool) -> Decision:
    return _owner_or(
        mine,
        principal.has(PERM_DRIVE_ANY),
        "the principal may drive any session",
        "driving a session needs ownership or sessions:drive_any",
    )


def _delete_session(principal: Principal, mine: bool) -> Decision:
    return _owner_or(
        mine, principal.is_admin, "the principal is an admin", "deleting a session needs ownership or admin"
    )


def _edit(principal: Principal, mine: bool) -> Decision:
    return _may(
        principal.is_admin,
        ("the principal is an admin", "MEM-15"),
        ("a session message is editable only at the administrative tier", "MEM-15"),
    )


_ON_SESSION: dict[str, Callable[[Principal, bool], Decision]] = {
    "view": _view,
    "drive": _drive,
    "delete_session": _delete_session,
    "edit_message": _edit,
    "delete_message": _edit,
}


def _rules(principal: Principal, action: str, session: SessionLike | None) -> Decision:
    """The access rules without hooks.

    Implements MEM-9 (view never implies drive; ownership needs a real id on both
    sides) and MEM-15 (a missing session is denied; messages are editable and
    deletable only at the administrative tier).
    """
    if principal.revoked:
        return _deny("the token is revoked", "auth")
    if action not in ACTIONS:
        return _deny(f"unknown action {action!r}", "MEM-15")
    if action in _WITHOUT_SESSION:
        return _WITHOUT_SESSION[action](principal)
    if action == "list":
        if session is None:
            return _allow("listing is open; entries are filtered by view", "MEM-9")
        action = "view"
    if session is None:
        return _deny("the session cannot be loaded", "MEM-15")
    return _ON_SESSION[action](principal, owns(principal, session))


def decide(
    principal: Principal,
    action: str,
    session: SessionLike | None,
    hooks: Iterable[Hook] | None = None,
) -> Decision:
    """Decide whether ``principal`` may do ``action`` on ``session``.

    Implements MEM-9 and MEM-15: the rules decide first; each extension hook (the
    module's ``HOOKS`` unless ``hooks`` is given) may then deny an allowed action.
    A denial is final — a hook that returns a grant is ignored, and a hook that
    raises denies.
    """
    decision = _rules(principal, action, session)
    if not decision.allowed:
        return decision
    for hook in HOOKS if hooks is None else hooks:
        try:
            verdict = hook(principal, action, session, decision)
        except Exception as exc:  # a broken hook fails closed
            return _deny(f"an access hook failed: {type(exc).__name__}", "MEM-15")
        if verdict is not None and not verdict.allowed:
            return verdict
    return decision
