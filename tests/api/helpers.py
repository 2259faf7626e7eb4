"""Shared helpers of the API tests: principals with tokens, and store snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient

from flowmem.auth import create_token, revoke_token
from flowmem.store import Address, Store

# name -> (user id, permissions)
PRINCIPALS: dict[str, tuple[str | None, set[str]]] = {
    "alice": ("alice", {"sessions:create"}),
    "bob": ("bob", {"sessions:create"}),
    "viewer": ("carol", {"sessions:view_any"}),
    "driver": ("dave", {"sessions:drive_any"}),
    "admin": ("root", {"admin"}),
    "service": (None, {"sessions:create"}),
    "shared": ("sam", {"memory:shared"}),
    "revoked": ("alice", {"sessions:create", "admin"}),
}


def make_tokens(store: Store) -> dict[str, str]:
    """Create one token per principal (the ``revoked`` one revoked)."""
    tokens: dict[str, str] = {}
    for name, (user, perms) in PRINCIPALS.items():
        token, record = create_token(store, user, perms, label=name)
        tokens[name] = token
        if name == "revoked":
            revoke_token(store, record.id)
    return tokens


@dataclass
class Api:
    """A TestClient with a token per principal."""

    client: TestClient
    store: Store
    tokens: dict[str, str]
    addresses: list[Address] = field(default_factory=list)

    def headers(self, who: str | None) -> dict[str, str]:
        """Authorization headers of a principal (none for ``None``)."""
        return {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}

    def call(self, method: str, url: str, who: str | None = "alice", **kwargs: Any) -> Any:
        """Send a request as ``who``."""
        headers = {**self.headers(who), **kwargs.pop("headers", {})}
        return self.client.request(method, url, headers=headers, **kwargs)

    def session(self, who: str = "alice", name: str = "chat") -> str:
        """Create a session as ``who``; return its id."""
        response = self.call("POST", "/v1/sessions", who, json={"name": name})
        assert response.status_code == 201, response.text
        sid: str = response.json()["id"]
        self.addresses.append(Address("session", sid, "chat_history"))
        return sid


def snapshot(api: Api, extra: list[Address] | None = None) -> dict[str, Any]:
    """Everything the store holds that the tests can touch, as plain data."""
    store = api.store
    sessions, _ = store.list_sessions(None, True, 10_000, 0)
    transcripts = {
        s.id: [(m.seq, m.row) for m in store.list_transcript(s.id, limit=10_000)[0]]
        for s in sessions
    }
    addresses = [*api.addresses, *(extra or [])]
    for scope, scope_id in [("user", "alice"), ("user", "root"), ("user", ""), ("global", "")]:
        for key in ("k", "chat_history", "last_turn"):
            addresses.append(Address(scope, scope_id, key))
    return {
        "sessions": sorted((s.id, s.owner, s.status, s.name) for s in sessions),
        "transcripts": transcripts,
        "tokens": sorted((t.id, t.revoked) for t in store.list_tokens()),
        "buffers": {a: store.load(a) for a in addresses},
        "records": {a: store.get_record(a, 0) for a in addresses},
    }
