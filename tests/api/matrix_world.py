"""What the authorization matrix probes (``test_authorization_matrix.py``): principals, their data, snapshots.

Every principal kind ``flowmem.access`` knows has a token: two owners, a viewer
(``sessions:view_any``), a driver (``sessions:drive_any``), an admin, a service
principal (no user), a shared-memory service, a metrics reader, a revoked token,
and no token at all. Three sessions (alice's, bob's, one nobody owns) each hold a
transcript, a session buffer whose oldest rows a compaction archived, a session
record and (alice's, bob's) LangGraph checkpoints; every user has a ``user``
buffer and record, and the shared scope a buffer and a record. Each owner's data
carries its own secret marker, so a body that holds another owner's marker is a leak.
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from flowmem.access import Principal
from flowmem.auth import create_token, revoke_token
from flowmem.store import Address, Store
from flowmem.store.checkpoints import CheckpointFilter, checkpoints_of
from tests.api.langgraph_thread import write_thread

ANONYMOUS = "anonymous"
# name -> (user id, permissions); ``anonymous`` sends no token
PRINCIPALS: dict[str, tuple[str | None, frozenset[str]]] = {
    "alice": ("alice", frozenset({"sessions:create"})),
    "bob": ("bob", frozenset({"sessions:create"})),
    "viewer": ("carol", frozenset({"sessions:view_any"})),
    "driver": ("dave", frozenset({"sessions:drive_any"})),
    "admin": ("root", frozenset({"admin"})),
    "service": (None, frozenset({"sessions:create"})),
    "shared": (None, frozenset({"memory:shared"})),
    "metrics": ("mia", frozenset({"metrics:read"})),
    "revoked": ("alice", frozenset({"sessions:create", "admin"})),
}
CALLERS = (*PRINCIPALS, ANONYMOUS)
OWNERS = ("alice", "bob", "nobody")  # the sessions' owners: two users and no one
NOBODY_MAKER = "service"  # makes the unowned session (a service principal owns nothing)
GLOBAL = "global"  # the marker's name of the shared scope's data
USER_KEY, RECORD_KEY, SESSION_KEY, FACT_KEY = "notes", "pref", "chat", "fact"
SHARED_BUFFER, SHARED_RECORD = "board", "motd"


KEEP_TOKENS = 8  # a compaction plan keeps the last row ("ok") and archives the rest


def turns(mark: str, n: int) -> list[dict[str, str]]:
    """``n`` rows holding ``mark`` (user, assistant, …), then a short user row a plan keeps."""
    rows = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"row {k} {mark}"} for k in range(n)]
    return [*rows, {"role": "user", "content": "ok"}]


def principal(name: str) -> Principal:
    """The ``flowmem.access`` principal a caller's token names (``revoked`` revoked)."""
    user, perms = PRINCIPALS[name]
    return Principal(user, perms, revoked=name == "revoked")


def driver_of(owner: str) -> str:
    """Who writes an owner's session data at setup: the owner, the admin for nobody's."""
    return "admin" if owner == "nobody" else owner


@dataclass
class World:
    """A served database filled with every owner's data, and the tokens that reach it."""

    http: httpx.Client
    store: Store
    tokens: dict[str, str]
    marks: dict[str, str] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)  # owner -> session id
    plans: dict[str, str] = field(default_factory=dict)  # owner -> a plan of its chat buffer
    probes: int = 0
    _names: itertools.count[int] = field(default_factory=itertools.count)

    def call(self, who: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """Send one request as ``who`` (no Authorization header for ``anonymous``)."""
        headers = dict(kwargs.pop("headers", {}))
        if who != ANONYMOUS:
            headers["Authorization"] = f"Bearer {self.tokens[who]}"
        return self.http.request(method, url, headers=headers, **kwargs)

    def ok(self, who: str, method: str, url: str, **kwargs: Any) -> Any:
        """Send a setup request that must succeed; return its JSON (None when empty)."""
        answer = self.call(who, method, url, **kwargs)
        assert answer.status_code < 300, f"{method} {url} as {who}: {answer.status_code} {answer.text}"
        return answer.json() if answer.content else None

    def mark(self, name: str) -> str:
        """The secret marker of ``name``'s data (an owner, a user principal or ``global``)."""
        if name not in self.marks:
            self.marks[name] = f"SECRET-{name}-{uuid.uuid4().hex[:10]}"
        return self.marks[name]

    def unique(self, stem: str) -> str:
        """A name no other call of this run used."""
        return f"{stem}-{next(self._names)}"

    def new_session(self, owner: str, *, thread: bool = False) -> str:
        """A session of ``owner`` holding its marker everywhere; return its id."""
        mark = self.mark(owner)
        maker = NOBODY_MAKER if owner == "nobody" else owner
        sid: str = self.ok(maker, "POST", "/v1/sessions", json={"name": f"name {mark}", "metadata": {"m": mark}})["id"]
        driver = driver_of(owner)
        self.ok(driver, "POST", f"/v1/sessions/{sid}/turns", params={"wait": True}, json={"content": f"turn {mark}"})
        where = {"session_id": sid}
        self.ok(driver, "POST", f"/v1/buffers/session/{SESSION_KEY}", params=where, json={"messages": turns(mark, 4)})
        self.ok(driver, "PUT", f"/v1/memory/session/{FACT_KEY}", params=where, json={"value": {"fact": mark}})
        if thread:
            write_thread(self.store, sid, owner, [f"checkpoint {mark}"])
        return sid

    def plan(self, owner: str, sid: str) -> str:
        """A valid compaction plan of the session's chat buffer (made by its driver)."""
        answer = self.ok(
            driver_of(owner), "GET", f"/v1/buffers/session/{SESSION_KEY}/compact/plan",
            params={"session_id": sid, "keep_tokens": KEEP_TOKENS},
        )  # fmt: skip
        plan: str = answer["plan"]
        return plan

    def fill(self) -> None:
        """Store every owner's data (the matrix's resources)."""
        for owner in OWNERS:
            sid = self.new_session(owner, thread=owner != "nobody")
            self.sessions[owner] = sid
            where = {"session_id": sid}
            summary = {"plan": self.plan(owner, sid), "summary": f"summary {self.mark(owner)}"}
            self.ok(driver_of(owner), "POST", f"/v1/buffers/session/{SESSION_KEY}/compact", params=where, json=summary)
            self.ok(driver_of(owner), "POST", f"/v1/buffers/session/{SESSION_KEY}", params=where,
                    json={"messages": turns(self.mark(owner), 3)})  # fmt: skip
            self.plans[owner] = self.plan(owner, sid)
        for name, (user, _) in PRINCIPALS.items():
            if user is None or name == "revoked":
                continue
            mark = self.mark(name)
            self.ok(name, "POST", f"/v1/buffers/user/{USER_KEY}", json={"messages": turns(mark, 2)})
            self.ok(name, "PUT", f"/v1/memory/user/{RECORD_KEY}", json={"value": mark})
        mark = self.mark(GLOBAL)
        self.ok("shared", "POST", f"/v1/buffers/global/{SHARED_BUFFER}", json={"messages": turns(mark, 2)})
        self.ok("shared", "PUT", f"/v1/memory/global/{SHARED_RECORD}", json={"value": mark})
        plan = self.ok("shared", "GET", f"/v1/buffers/global/{SHARED_BUFFER}/compact/plan", params={"keep_tokens": KEEP_TOKENS})
        self.plans[GLOBAL] = plan["plan"]

    def disposable_user(self) -> str:
        """A user with a token and data of its own, for an erasure that may succeed."""
        user = self.unique("zed")
        token, _ = create_token(self.store, user, {"sessions:create"}, label=user)
        self.tokens[user] = token
        self.ok(user, "POST", f"/v1/buffers/user/{USER_KEY}", json={"messages": {"role": "user", "content": "z"}})
        return user

    def snapshot(self) -> dict[str, Any]:
        """Everything the probes could change, read from the store itself (not over HTTP)."""
        store, now = self.store, time.time()
        tokens = [t for t in store.list_tokens() if t.label in PRINCIPALS]  # not the erasures' users
        found: dict[str, Any] = {"tokens": sorted((t.id, t.user_id, t.revoked) for t in tokens)}
        saver = checkpoints_of(store)
        for owner, sid in self.sessions.items():
            session = store.get_session(sid)
            chat = Address("session", sid, SESSION_KEY)
            found[owner] = {
                "session": None if session is None else (session.owner, session.status, session.name, session.metadata),
                "transcript": [(m.seq, m.row) for m in store.list_transcript(sid, limit=1000)[0]],
                "chat": store.load(chat),
                "archive": store.archive.read(chat),  # type: ignore[attr-defined]
                "fact": store.get_record(Address("session", sid, FACT_KEY), now),
                "checkpoints": [c.checkpoint_id for c in saver.list_checkpoints(CheckpointFilter(sid, None, None, None))],
            }
        for user, _ in PRINCIPALS.values():
            if user is not None:
                found[f"user:{user}"] = (
                    store.load(Address("user", user, USER_KEY)),
                    store.get_record(Address("user", user, RECORD_KEY), now),
                )
        found[GLOBAL] = (
            store.load(Address("global", "", SHARED_BUFFER)),
            store.get_record(Address("global", "", SHARED_RECORD), now),
        )
        return found


def make_tokens(store: Store) -> dict[str, str]:
    """One token per principal of ``PRINCIPALS`` (``revoked`` revoked)."""
    tokens: dict[str, str] = {}
    for name, (user, perms) in PRINCIPALS.items():
        token, record = create_token(store, user, perms, label=name)
        tokens[name] = token
        if name == "revoked":
            revoke_token(store, record.id)
    return tokens
