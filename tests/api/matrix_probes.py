"""The probes of the authorization matrix: one or more per route of the OpenAPI document, and what each may answer.

A probe names its route (method, OpenAPI path), what it targets (a session, a
memory scope, nothing) and the ``flowmem.access`` action the route needs; the
expected answer of every (caller, target) comes from ``flowmem.access.decide``
(``expect``), never from what the server answered before. An allowed write runs
on a disposable copy of the target (``Aim.fresh``), so the stored resources stay
as they were and every refusal can be checked to have changed nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flowmem.access import decide
from tests.api.matrix_world import (
    ANONYMOUS,
    FACT_KEY,
    GLOBAL,
    KEEP_TOKENS,
    OWNERS,
    RECORD_KEY,
    SESSION_KEY,
    SHARED_BUFFER,
    SHARED_RECORD,
    USER_KEY,
    World,
    principal,
    turns,
)

MISSING = "missing"  # a session id that names no session
FAKE_PLAN = "1." + "0" * 64  # well formed, names no rows


@dataclass(frozen=True)
class Owned:
    """A session as ``decide`` sees it: its owner."""

    owner: str | None


@dataclass
class Aim:
    """What one request targets: a scope, whose data, the session (or key) it names."""

    scope: str  # "session", "user", "global", or "none"
    owner: str  # a session's owner (or MISSING), the caller for "user", GLOBAL
    sid: str | None = None
    buffer: str = SESSION_KEY
    record: str = FACT_KEY
    plan: str = FAKE_PLAN
    fresh: bool = False

    def params(self) -> dict[str, str]:
        """The query that names the scope id (``session_id`` for a session scope)."""
        return {"session_id": self.sid} if self.scope == "session" and self.sid else {}


@dataclass(frozen=True)
class Expect:
    """What a probe must answer: its status, the error code, the markers and texts its body holds."""

    status: int
    code: str | None = None
    marks: frozenset[str] = frozenset()  # whose secret markers the body may (and must) hold
    refused: str | None = None  # a neutral answer's ``refused`` code

    @property
    def allowed(self) -> bool:
        """True when the call does what it asks (a 2xx that is not a neutral refusal)."""
        return self.status < 300 and self.refused is None


Request = tuple[str, str, dict[str, Any]]
Build = Callable[[World, str, Aim], Request]


@dataclass(frozen=True)
class Probe:
    """One kind of request to one route, and what its answer must be, whoever sends it."""

    method: str
    path: str  # the OpenAPI path
    target: str  # "session" (a session id), "scoped" (a memory scope), "open", "authed", "create", "list", "erase", "metrics"
    build: Build
    action: str = "view"
    ok: int = 200
    shows: bool = True  # an allowed answer holds the owner's marker
    creates: bool = False  # a write to a session id that names no session creates it
    variant: str = ""
    scopes: tuple[str, ...] = ("session", "user", "global")
    check: Callable[[World, str, Aim, Any], str | None] | None = field(default=None, compare=False)

    @property
    def writes(self) -> bool:
        """True when the probe changes what it targets."""
        return self.method != "GET"

    @property
    def label(self) -> str:
        """The probe's name in a failure."""
        return f"{self.method} {self.path}{' ' + self.variant if self.variant else ''}"


# --- requests -------------------------------------------------------------------------------
def _buffer(method: str, suffix: str = "", **extra: Any) -> Build:
    def build(world: World, caller: str, aim: Aim) -> Request:
        params = {**aim.params(), **extra.get("query", {})}
        body = extra.get("json")
        kwargs: dict[str, Any] = {"params": params}
        if callable(body):
            body = body(aim)
        if body is not None:
            kwargs["json"] = body
        return method, f"/v1/buffers/{aim.scope}/{aim.buffer}{suffix}", kwargs

    return build


def _record(method: str, suffix: str = "", **extra: Any) -> Build:
    def build(world: World, caller: str, aim: Aim) -> Request:
        kwargs: dict[str, Any] = {"params": {**aim.params(), **extra.get("query", {})}}
        if "json" in extra:
            kwargs["json"] = extra["json"]
        return method, f"/v1/memory/{aim.scope}/{aim.record}{suffix}", kwargs

    return build


def _vector_search(world: World, caller: str, aim: Aim) -> Request:
    return "POST", f"/v1/search/{aim.scope}", {"params": aim.params(), "json": {"space": VECTOR_SPACE, "vector": [1.0, 0.0]}}


def _session(method: str, suffix: str = "", **kwargs: Any) -> Build:
    def build(world: World, caller: str, aim: Aim) -> Request:
        return method, f"/v1/sessions/{aim.sid}{suffix}", dict(kwargs)

    return build


def _fixed(method: str, url: str, **kwargs: Any) -> Build:
    def build(world: World, caller: str, aim: Aim) -> Request:
        return method, url, dict(kwargs)

    return build


def _erase(world: World, caller: str, aim: Aim) -> Request:
    return "DELETE", f"/v1/users/{aim.owner}", {}


def _listing(world: World, caller: str, aim: Aim) -> Request:
    return "GET", f"/v1/memory/{aim.scope}", {"params": aim.params()}


# --- checks of an allowed answer beyond its markers ----------------------------------------------
def _access_is_decide(world: World, caller: str, aim: Aim, body: Any) -> str | None:
    """``GET …/access`` answers exactly what ``decide`` says for this caller and session."""
    session = Owned(None if aim.owner == "nobody" else aim.owner)
    who = principal(caller)
    want = {
        name: decide(who, action, session).allowed
        for name, action in (("view", "view"), ("drive", "drive"), ("delete", "delete_session"), ("edit_messages", "edit_message"))
    }  # fmt: skip
    return None if body == want else f"access {body} but decide says {want}"


def _lists_the_record(world: World, caller: str, aim: Aim, body: Any) -> str | None:
    """A listing of a scope the caller may read holds its record's key."""
    keys = [entry["key"] for entry in body["data"]]
    return None if aim.record in keys else f"the listing {keys} misses {aim.record!r}"


def _lists_what_decide_lets_view(world: World, caller: str, aim: Aim, body: Any) -> str | None:
    """``GET /v1/sessions`` lists the stored sessions the caller may view, and only sessions it may view."""
    who = principal(caller)
    listed = {entry["id"]: entry["owner"] for entry in body["data"]}
    wrong = [sid for sid, owner in listed.items() if not decide(who, "view", Owned(owner)).allowed]
    if wrong:
        return f"lists sessions it may not view: {wrong}"
    for owner, sid in world.sessions.items():
        visible = decide(who, "view", Owned(None if owner == "nobody" else owner)).allowed
        if (sid in listed) != visible:
            return f"{owner}'s session listed: {sid in listed}, may view: {visible}"
    return None


def _erased_the_user(world: World, caller: str, aim: Aim, body: Any) -> str | None:
    """An erasure names the user and counts the buffer it held."""
    return None if body["user_id"] == aim.owner and body["buffers"] >= 1 else f"erased {body}"


# --- the probes --------------------------------------------------------------------------------
BUFFER = "/v1/buffers/{scope}/{key}"
MEMORY = "/v1/memory/{scope}/{key}"
SESSION = "/v1/sessions/{session_id}"
EDIT = {"role": "user", "content": "edited"}
VECTOR_SPACE = {"name": "matrix", "dims": 2}
VECTORS = {"value": "written", "space": VECTOR_SPACE, "vectors": [{"field": "$", "vector": [1.0, 0.0]}]}
PROBES: tuple[Probe, ...] = (
    Probe("GET", "/health", "open", _fixed("GET", "/health"), shows=False),
    Probe("GET", "/health/store", "open", _fixed("GET", "/health/store"), shows=False),
    Probe("GET", "/metrics", "metrics", _fixed("GET", "/metrics"), action="read_metrics", shows=False),
    Probe("POST", "/v1/normalize", "authed", _fixed("POST", "/v1/normalize", json={"messages": [EDIT]}), shows=False),
    Probe("POST", "/v1/check", "authed", _fixed("POST", "/v1/check", json={"messages": [EDIT]}), shows=False),
    Probe("GET", BUFFER, "scoped", _buffer("GET")),
    Probe("GET", BUFFER, "scoped", _buffer("GET", query={"last": 2}), variant="last=2"),
    Probe("GET", BUFFER, "scoped", _buffer("GET", query={"max_tokens": 100_000}), variant="window"),
    Probe("GET", BUFFER, "scoped", _buffer("GET", query={"archived": "true"}), variant="archived"),
    Probe("GET", BUFFER, "scoped", _buffer("GET", query={"format": "openai"}), variant="format=openai"),
    Probe("GET", BUFFER + "/compact/plan", "scoped", _buffer("GET", "/compact/plan", query={"keep_tokens": KEEP_TOKENS})),
    # the seeded buffers were never repaired: an empty log (tests/api/routes/test_repairs.py shows entries)
    Probe("GET", BUFFER + "/repairs", "scoped", _buffer("GET", "/repairs"), shows=False),
    Probe("GET", MEMORY, "scoped", _record("GET")),
    Probe("GET", "/v1/memory/{scope}", "scoped", _listing, shows=False, check=_lists_the_record),
    Probe("GET", "/v1/sessions", "list", _fixed("GET", "/v1/sessions", params={"limit": 100}), action="list", check=_lists_what_decide_lets_view),
    Probe("GET", SESSION, "session", _session("GET")),
    Probe("GET", SESSION + "/messages", "session", _session("GET", "/messages")),
    Probe("GET", SESSION + "/access", "session", _session("GET", "/access"), shows=False, check=_access_is_decide),
    Probe("GET", SESSION + "/checkpoints", "session", _session("GET", "/checkpoints")),
    Probe("POST", BUFFER, "scoped", _buffer("POST", json={"messages": EDIT}), action="drive", shows=False, creates=True),
    Probe("DELETE", BUFFER, "scoped", _buffer("DELETE"), action="drive", shows=False),
    Probe("DELETE", BUFFER + "/last", "scoped", _buffer("DELETE", "/last"), action="drive", shows=False),
    Probe("POST", BUFFER + "/compact", "scoped", _buffer("POST", "/compact", json=lambda aim: {"plan": aim.plan, "summary": "s"}), action="drive", shows=False),
    Probe("POST", BUFFER + "/compact/replace", "scoped", _buffer("POST", "/compact/replace", json={"messages": [EDIT]}), action="drive", shows=False),
    Probe("PUT", MEMORY, "scoped", _record("PUT", json={"value": "written"}), action="drive", shows=False, creates=True),
    Probe("DELETE", MEMORY, "scoped", _record("DELETE"), action="drive", shows=False),
    # vectors: the user and shared scopes only (a session's scope is 422, tests/api/routes/test_vectors.py)
    Probe("PUT", MEMORY + "/vectors", "scoped", _record("PUT", suffix="/vectors", json=VECTORS), action="drive", shows=False, scopes=("user", "global")),
    Probe("POST", "/v1/search/{scope}", "scoped", _vector_search, shows=False, scopes=("user", "global")),
    Probe("POST", "/v1/sessions", "create", _fixed("POST", "/v1/sessions", json={"name": "new"}), action="create", ok=201, shows=False),
    Probe("DELETE", SESSION, "session", _session("DELETE"), action="delete_session", ok=204, shows=False),
    Probe("POST", SESSION + "/turns", "session", _session("POST", "/turns", json={"content": "hi"}), action="drive", ok=202, shows=False),
    Probe("POST", SESSION + "/stop", "session", _session("POST", "/stop"), action="drive", shows=False),
    Probe("POST", SESSION + "/reset", "session", _session("POST", "/reset"), action="drive", shows=False),
    Probe("PATCH", SESSION + "/messages/{seq}", "session", _session("PATCH", "/messages/1", json=EDIT), action="edit_message", shows=False),
    Probe("DELETE", SESSION + "/messages/{seq}", "session", _session("DELETE", "/messages/1"), action="delete_message", ok=204, shows=False),
    Probe("DELETE", "/v1/users/{user_id}", "erase", _erase, action="erase_user", shows=False, check=_erased_the_user),
)  # fmt: skip


# --- what each answer must be -------------------------------------------------------------------
def expect(probe: Probe, caller: str, aim: Aim) -> Expect:
    """The answer ``flowmem.access.decide`` calls for when ``caller`` sends ``probe`` at ``aim``."""
    if probe.target == "open":
        return Expect(200)
    if caller in (ANONYMOUS, "revoked"):
        return Expect(401, "unauthenticated")
    who = principal(caller)
    shown = frozenset({aim.owner}) if probe.shows else frozenset()
    if probe.target == "authed":
        return Expect(probe.ok)
    if probe.target in ("create", "erase", "metrics"):
        granted = decide(who, probe.action, None).allowed
        return Expect(probe.ok) if granted else Expect(403, "forbidden")
    if probe.target == "list":
        return Expect(200, marks=frozenset(o for o in OWNERS if decide(who, "view", _owned(o)).allowed))
    if aim.scope == "user":
        return Expect(200, refused="no_user_id") if who.identity is None else Expect(probe.ok, marks=shown)
    if aim.scope == "global":
        granted = decide(who, "shared_memory", None).allowed
        return Expect(probe.ok, marks=shown) if granted else Expect(403, "forbidden")
    if aim.owner == MISSING:
        if not probe.creates:
            return Expect(404, "not_found")
        return Expect(probe.ok) if decide(who, "create", None).allowed else Expect(403, "forbidden")
    session = _owned(aim.owner)
    if not decide(who, "view", session).allowed:
        return Expect(404, "not_found")  # a session one may not view is not found (ids do not leak)
    if not decide(who, probe.action, session).allowed:
        return Expect(403, "forbidden")
    shows = probe.shows and not (probe.path.endswith("/checkpoints") and aim.owner == "nobody")
    return Expect(probe.ok, marks=shown if shows else frozenset())


def _owned(owner: str) -> Owned:
    return Owned(None if owner == "nobody" else owner)


def aims(world: World, probe: Probe, caller: str) -> list[Aim]:
    """What ``caller`` sends ``probe`` at: each owner's session and a missing one, each scope, or nothing."""
    if probe.target in ("open", "authed", "create", "list", "metrics"):
        return [Aim("none", "")]
    if probe.target == "erase":
        return [Aim("none", "alice")]
    found = []
    scopes = probe.scopes if probe.target == "scoped" else ("session",)
    for scope in scopes:
        if scope == "session":
            found += [Aim("session", o, world.sessions[o], plan=world.plans[o]) for o in OWNERS]
            found.append(Aim("session", MISSING, str(uuid.uuid4())))
        elif scope == "user":
            found.append(Aim("user", caller, buffer=USER_KEY, record=RECORD_KEY))
        else:
            found.append(Aim("global", GLOBAL, buffer=SHARED_BUFFER, record=SHARED_RECORD, plan=world.plans[GLOBAL]))
    return found


def disposable(world: World, probe: Probe, caller: str, aim: Aim) -> Aim:
    """The target of an allowed write: a copy of ``aim`` made for this call alone."""
    if aim.owner == MISSING:
        return Aim("session", MISSING, str(uuid.uuid4()))
    if probe.target == "erase":
        return Aim("none", world.disposable_user())
    if probe.target != "session" and aim.scope == "none":
        return aim
    if aim.scope == "session":
        sid = world.new_session(aim.owner)
        return Aim("session", aim.owner, sid, plan=world.plan(aim.owner, sid), fresh=True)
    key = world.unique("scratch")  # a key of the caller's own (or the shared) scope
    world.ok(caller, "POST", f"/v1/buffers/{aim.scope}/{key}", json={"messages": turns("x", 2)})
    world.ok(caller, "PUT", f"/v1/memory/{aim.scope}/{key}", json={"value": "x"})
    plan = world.ok(caller, "GET", f"/v1/buffers/{aim.scope}/{key}/compact/plan", params={"keep_tokens": KEEP_TOKENS})["plan"]
    return Aim(aim.scope, aim.owner, buffer=key, record=key, plan=plan, fresh=True)
