"""The access table of ``flowmem.access.decide``: every principal × action × session cell."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from flowmem import access
from flowmem.access import ACTIONS, Decision, Principal, decide, owns


@dataclass(frozen=True)
class FakeSession:
    owner: str | None


OWNER = Principal("alice", frozenset({"sessions:create"}), "t-owner")
OTHER = Principal("bob", frozenset(), "t-other")
VIEW_ANY = Principal("carol", frozenset({"sessions:view_any"}), "t-view")
DRIVE_ANY = Principal("dave", frozenset({"sessions:drive_any"}), "t-drive")
ADMIN = Principal("root", frozenset({"admin"}), "t-admin")
SERVICE = Principal(None, frozenset({"sessions:create"}), "t-service")
SHARED = Principal(None, frozenset({"memory:shared"}), "t-shared")
METRICS = Principal(None, frozenset({"metrics:read"}), "t-metrics")
REVOKED = Principal("alice", frozenset({"admin", "sessions:create"}), "t-revoked", revoked=True)

PRINCIPALS = {
    "owner": OWNER,
    "other_user": OTHER,
    "view_any": VIEW_ANY,
    "drive_any": DRIVE_ANY,
    "admin": ADMIN,
    "service": SERVICE,
    "shared": SHARED,
    "metrics": METRICS,
    "revoked": REVOKED,
}


def session_for(kind: str, principal: Principal) -> FakeSession | None:
    """The four session kinds, relative to the caller."""
    if kind == "own":
        return FakeSession(principal.user_id)
    if kind == "another":
        return FakeSession("zed")
    if kind == "unowned":
        return FakeSession(None)
    return None


C, L, V, D, X, E, R, U, A, S, M = (
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
ALL = {C, L, V, D, X, E, R, U, A, S, M}

# principal -> session kind -> the set of allowed actions (every other action is denied).
EXPECTED: dict[str, dict[str, set[str]]] = {
    "owner": {"own": {C, L, V, D, X}, "another": {C}, "unowned": {C}, "missing": {C, L}},
    "other_user": {"own": {L, V, D, X}, "another": set(), "unowned": set(), "missing": {L}},
    # list_all and shared_memory judge no session, like create and erase_user
    "view_any": {
        "own": {L, V, D, X, A},
        "another": {L, V, A},
        "unowned": {L, V, A},
        "missing": {L, A},
    },
    "drive_any": {
        "own": {L, V, D, X, A},
        "another": {L, V, D, A},
        "unowned": {L, V, D, A},
        "missing": {L, A},
    },
    # erase_user judges no session: an admin may erase whatever the session kind
    "admin": {"own": ALL, "another": ALL, "unowned": ALL, "missing": {C, L, U, A, S, M}},
    # A service principal has no user id: the "own" session is an unowned one, and
    # matching one absent identity against another grants nothing (MEM-9).
    "service": {"own": {C}, "another": {C}, "unowned": {C}, "missing": {C, L}},
    "shared": {"own": {S}, "another": {S}, "unowned": {S}, "missing": {L, S}},
    # read_metrics judges no session: the metrics:read permission (or admin) alone
    "metrics": {"own": {M}, "another": {M}, "unowned": {M}, "missing": {L, M}},
    "revoked": {"own": set(), "another": set(), "unowned": set(), "missing": set()},
}

CELLS = [
    (p, kind, action)
    for p in PRINCIPALS
    for kind in ("own", "another", "unowned", "missing")
    for action in ACTIONS
]


def test_mem_9_table_covers_every_action() -> None:
    assert set(ACTIONS) == ALL


@pytest.mark.parametrize(("who", "kind", "action"), CELLS)
def test_mem_9_mem_15_access_table(who: str, kind: str, action: str) -> None:
    principal = PRINCIPALS[who]
    decision = decide(principal, action, session_for(kind, principal), hooks=[])
    expected = action in EXPECTED[who][kind]
    assert decision.allowed is expected, (who, kind, action, decision)
    assert decision.reason
    assert decision.rule


def test_mem_9_view_never_implies_drive() -> None:
    session = FakeSession("zed")
    assert decide(VIEW_ANY, "view", session, hooks=[]).allowed
    for action in ("drive", "delete_session", "edit_message", "delete_message"):
        decision = decide(VIEW_ANY, action, session, hooks=[])
        assert not decision.allowed
    assert decide(VIEW_ANY, "drive", session, hooks=[]).rule == "MEM-9"


@pytest.mark.parametrize(
    ("user_id", "owner"),
    [(None, None), ("0", "0"), ("", ""), (" ", " "), ("-1", "-1"), ("00", "00"), ("a b", "a b")],
)
def test_mem_9_absent_identities_never_match(user_id: str | None, owner: str | None) -> None:
    principal = Principal(user_id, frozenset({"sessions:create"}))
    session = FakeSession(owner)
    assert not owns(principal, session)
    for action in ("view", "drive", "delete_session"):
        assert not decide(principal, action, session, hooks=[]).allowed


def test_mem_9_ownership_needs_equal_real_ids() -> None:
    assert owns(Principal("42"), FakeSession("42"))
    assert owns(Principal("alice"), FakeSession("alice"))
    assert not owns(Principal("alice"), FakeSession("Alice"))
    assert not owns(Principal("alice"), None)


def test_mem_15_missing_session_is_denied() -> None:
    for principal in (OWNER, ADMIN, DRIVE_ANY):
        for action in ("view", "drive", "delete_session", "edit_message", "delete_message"):
            decision = decide(principal, action, None, hooks=[])
            assert not decision.allowed
            assert decision.rule == "MEM-15"


def test_mem_15_messages_editable_only_by_admin() -> None:
    own = FakeSession("alice")
    for action in ("edit_message", "delete_message"):
        assert not decide(OWNER, action, own, hooks=[]).allowed
        assert not decide(DRIVE_ANY, action, own, hooks=[]).allowed
        assert decide(ADMIN, action, own, hooks=[]).allowed


def test_mem_15_unknown_action_is_denied() -> None:
    assert not decide(ADMIN, "launch_missiles", FakeSession("root"), hooks=[]).allowed


def test_mem_15_hook_cannot_grant_a_denial() -> None:
    calls: list[str] = []

    def grant_everything(
        principal: Principal, action: str, session: object, decision: Decision
    ) -> Decision:
        calls.append(action)
        return Decision(True, "hook says yes", "hook")

    denied = decide(OTHER, "drive", FakeSession("zed"), hooks=[grant_everything])
    assert not denied.allowed
    allowed = decide(OWNER, "drive", FakeSession("alice"), hooks=[grant_everything])
    assert allowed.allowed
    assert allowed.rule == "MEM-9"  # the rules' decision stands, not the hook's


def test_mem_15_hook_may_deny() -> None:
    def no_driving(
        principal: Principal, action: str, session: object, decision: Decision
    ) -> Decision | None:
        if action == "drive":
            return Decision(False, "maintenance window", "hook:maintenance")
        return None

    decision = decide(OWNER, "drive", FakeSession("alice"), hooks=[no_driving])
    assert not decision.allowed
    assert decision.rule == "hook:maintenance"
    assert decide(OWNER, "view", FakeSession("alice"), hooks=[no_driving]).allowed


def test_mem_15_failing_hook_denies() -> None:
    def broken(principal: Principal, action: str, session: object, decision: Decision) -> None:
        raise RuntimeError("boom")

    decision = decide(ADMIN, "view", FakeSession("x"), hooks=[broken])
    assert not decision.allowed
    assert decision.rule == "MEM-15"


def test_mem_15_module_hooks_are_applied_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    def deny_all(
        principal: Principal, action: str, session: object, decision: Decision
    ) -> Decision:
        return Decision(False, "locked down", "hook:lockdown")

    monkeypatch.setattr(access, "HOOKS", [deny_all])
    assert not decide(ADMIN, "view", FakeSession("root")).allowed
    monkeypatch.setattr(access, "HOOKS", [])
    assert decide(ADMIN, "view", FakeSession("root")).allowed


def test_permissions_are_a_closed_list() -> None:
    assert {
        "sessions:create",
        "sessions:view_any",
        "sessions:drive_any",
        "metrics:read",
        "memory:shared",
        "admin",
    } == access.PERMISSIONS
    assert ADMIN.has("memory:shared")
    assert not OWNER.has("memory:shared")
