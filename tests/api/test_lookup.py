"""The token and session lookups a worker remembers (decision 0034), and when it forgets them.

Two apps over one store stand for two ``flowmem serve`` workers over one database:
each has its own caches, as each worker process has.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flowmem.api import create_app
from flowmem.api.app import app_from_env
from flowmem.api.lookup import LookupCache
from flowmem.auth import authenticate, create_token, revoke_token
from flowmem.errors import ConfigurationError, NotFoundError
from flowmem.sessions import SessionService
from flowmem.store import Address, Store, open_store
from flowmem.store.base import WriteGuard
from tests.api.transport import OneHopClient
from tests.migrated import migrated_sqlite_url

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TTL = 0.5  # the token cache's lifetime in these tests (seconds)
CHAT = "/v1/buffers/session/chat_history"


class Counting:
    """Wraps a store: counts token and session lookups, passes everything through."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.lookups = {"token_by_hash": 0, "get_session": 0}

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if name in self.lookups:

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.lookups[name] += 1
                return attribute(*args, **kwargs)

            return counted
        return attribute


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store on each backend that two workers can share."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_store_url")  # migrated already, no rows
    else:
        url = migrated_sqlite_url(tmp_path / "cache.db")  # migrated once per process
    opened: Store = open_store(url)
    yield opened
    opened.close()


class Worker:
    """One app (a worker) with a token per name."""

    def __init__(self, client: TestClient, tokens: dict[str, str]) -> None:
        self.client, self.tokens = client, tokens

    def call(self, method: str, url: str, who: str = "alice", **kwargs: Any) -> Any:
        """Send a request as ``who``."""
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return self.client.request(method, url, headers=headers, **kwargs)

    def append(self, sid: str, content: str, who: str = "alice") -> Any:
        """Append one user message to session ``sid``'s conversation."""
        body = {"messages": {"role": "user", "content": content}}
        return self.call("POST", f"{CHAT}?session_id={sid}", who, json=body)


@pytest.fixture
def workers(store: Store) -> Iterator[tuple[Worker, Worker, dict[str, str]]]:
    """Two workers over ``store`` (token cache TTL 0.5 s) and the tokens: name -> token id."""
    tokens, ids = {}, {}
    for name, user, perms in [
        ("alice", "alice", {"sessions:create"}),
        ("bob", "bob", {"sessions:create"}),
        ("admin", "root", {"admin"}),
    ]:
        tokens[name], record = create_token(store, user, perms, label=name)
        ids[name] = record.id
    with ExitStack() as stack:
        pair = [
            Worker(
                stack.enter_context(
                    OneHopClient(
                        create_app(store, token_cache_ttl=TTL, purge_interval=None),
                        raise_server_exceptions=False,
                    )
                ),
                tokens,
            )
            for _ in range(2)
        ]
        yield pair[0], pair[1], ids


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """A SQLite store counting its lookups, and a token of alice's on it."""
    store = open_store(f"sqlite:///{tmp_path}/count.db")
    token, _ = create_token(store, "alice", {"sessions:create"})
    yield Counting(store), token
    store.close()


def test_memory_requests_look_their_token_up_once_per_ttl(counted: tuple[Any, str]) -> None:
    counting, token = counted
    app = create_app(counting, token_cache_ttl=60, purge_interval=None)
    with OneHopClient(app) as client:
        headers = {"Authorization": f"Bearer {token}"}
        for n in range(3):
            body = {"messages": {"role": "user", "content": f"m{n}"}}
            assert (
                client.post(f"{CHAT}?session_id=s1", headers=headers, json=body).status_code == 200
            )
        assert client.get(f"{CHAT}?session_id=s1", headers=headers).status_code == 200
        assert counting.lookups["token_by_hash"] == 1
        # any other route looks the token up every time
        assert client.get("/v1/sessions", headers=headers).status_code == 200
        assert client.get("/v1/sessions", headers=headers).status_code == 200
        assert counting.lookups["token_by_hash"] == 3


def test_an_append_to_an_existing_session_looks_it_up_once_then_not_at_all(counted: tuple[Any, str]) -> None:
    counting, token = counted
    with OneHopClient(create_app(counting, purge_interval=None)) as client:
        headers = {"Authorization": f"Bearer {token}"}
        body = {"messages": {"role": "user", "content": "first"}}
        assert client.post(f"{CHAT}?session_id=s1", headers=headers, json=body).status_code == 200
        counting.lookups["get_session"] = 0
        assert client.post(f"{CHAT}?session_id=s1", headers=headers, json=body).status_code == 200
        assert counting.lookups["get_session"] == 1  # was 2: one to find it, one to load it
        assert client.post(f"{CHAT}?session_id=s1", headers=headers, json=body).status_code == 200
        assert counting.lookups["get_session"] == 1


def test_an_append_to_a_session_the_worker_created_does_not_look_it_up(counted: tuple[Any, str]) -> None:
    counting, token = counted
    with OneHopClient(create_app(counting, purge_interval=None)) as client:
        headers = {"Authorization": f"Bearer {token}"}
        sid = client.post("/v1/sessions", headers=headers, json={"name": "x"}).json()["id"]
        counting.lookups["get_session"] = 0
        body = {"messages": {"role": "user", "content": "first"}}
        assert (
            client.post(f"{CHAT}?session_id={sid}", headers=headers, json=body).status_code == 200
        )
        assert counting.lookups["get_session"] == 0


def test_a_revoked_token_is_refused_by_another_worker_within_the_ttl(
    store: Store, workers: tuple[Worker, Worker, dict[str, str]]
) -> None:
    one, other, ids = workers
    assert other.append("s1", "before").status_code == 200  # the token is in its cache
    revoke_token(store, ids["alice"])  # as `flowmem token revoke`: another process
    # writes check their token inside their transaction: refused at once, nothing stored
    assert other.append("s1", "after").status_code == 401
    assert one.append("s1", "after").status_code == 401
    # a memory write that has no guard (clear, pop, delete) and every route but the
    # memory ones look the token up every time
    assert other.call("DELETE", f"{CHAT}?session_id=s1").status_code == 401
    assert other.call("DELETE", f"{CHAT}/last?session_id=s1").status_code == 401
    assert other.call("GET", "/v1/sessions").status_code == 401
    # a memory read may be answered from the cache until the TTL has passed, not after
    time.sleep(TTL + 0.05)
    assert other.call("GET", f"{CHAT}?session_id=s1").status_code == 401
    assert [r["content"] for r in store.load(Address("session", "s1", "chat_history"))] == [
        "before"
    ]


def test_erasing_a_user_refuses_its_tokens_at_once_in_that_worker(
    store: Store, workers: tuple[Worker, Worker, dict[str, str]]
) -> None:
    one, _, _ = workers
    assert one.append("s1", "hello").status_code == 200
    assert one.call("GET", f"{CHAT}?session_id=s1").status_code == 200  # cached
    assert one.call("DELETE", "/v1/users/alice", "admin").status_code == 200
    assert one.call("GET", f"{CHAT}?session_id=s1").status_code == 401
    assert one.call("GET", "/v1/buffers/user/notes").status_code == 401


def test_an_erased_users_cached_token_cannot_write_through_another_worker(
    store: Store, workers: tuple[Worker, Worker, dict[str, str]]
) -> None:
    one, other, _ = workers
    assert other.append("s1", "hello").status_code == 200  # token and session cached
    assert one.call("DELETE", "/v1/users/alice", "admin").status_code == 200
    assert other.append("s1", "again").status_code == 401
    assert store.get_session("s1") is None
    assert store.load(Address("session", "s1", "chat_history")) == []


def test_a_session_deleted_by_another_worker_is_not_made_again_by_the_next_append(
    store: Store, workers: tuple[Worker, Worker, dict[str, str]]
) -> None:
    """Issue 24 §2: a deleted session's id is remembered, whichever worker cached it."""
    one, other, _ = workers
    assert other.append("s1", "old").status_code == 200
    assert other.append("s1", "old too").status_code == 200  # the session is in its cache
    assert one.call("DELETE", "/v1/sessions/s1").status_code == 204
    answer = other.append("s1", "new")
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["code"] == "session_deleted"
    assert store.get_session("s1") is None
    assert store.load(Address("session", "s1", "chat_history")) == []


def test_a_deleted_session_is_made_again_by_no_user(
    store: Store, workers: tuple[Worker, Worker, dict[str, str]]
) -> None:
    one, other, _ = workers
    assert other.append("s1", "alice's").status_code == 200
    assert other.append("s1", "alice's too").status_code == 200  # cached in ``other``
    assert one.call("DELETE", "/v1/sessions/s1").status_code == 204
    taken = one.append("s1", "bob's", "bob")
    assert taken.status_code == 404 and taken.json()["error"]["code"] == "session_deleted"
    answer = other.append("s1", "intruding")
    assert answer.status_code == 404, answer.text  # not 403: the id does not leak
    assert store.get_session("s1") is None
    assert store.load(Address("session", "s1", "chat_history")) == []


def test_a_write_by_a_stale_session_lookup_is_refused_by_its_guard(store: Store) -> None:
    app = create_app(store, purge_interval=None)
    sessions: SessionService = app.state.services.sessions
    token, _ = create_token(store, "alice", {"sessions:create"})
    principal = authenticate(store, token)
    context, guard = sessions.write_target(principal, "s1", create=True)
    sessions.memory.append(
        "session", "chat_history", {"role": "user", "content": "a"}, context=context, guard=guard
    )
    stale = sessions.find("s1")
    assert stale is not None
    assert store.delete_session("s1")
    context, guard = sessions.write_target_for(principal, "s1", stale, create=True)
    assert isinstance(guard, WriteGuard) and guard.claim is not None
    with pytest.raises(NotFoundError):
        sessions.memory.append(
            "session",
            "chat_history",
            {"role": "user", "content": "b"},
            context=context,
            guard=guard,
        )
    assert store.get_session("s1") is None
    assert store.load(Address("session", "s1", "chat_history")) == []


def test_the_lookup_cache_is_bounded_expires_and_forgets_lookups_older_than_a_clear() -> None:
    now = [0.0]
    cache: LookupCache[str, int] = LookupCache(10.0, 3, clock=lambda: now[0])
    for n in range(5):
        cache.put(f"k{n}", n, cache.generation)
    assert [cache.get(f"k{n}") for n in range(5)] == [None, None, 2, 3, 4]  # the oldest went
    now[0] = 10.0
    assert cache.get("k4") is None  # expired
    since = cache.generation  # a lookup starts...
    cache.clear()  # ...an erasure answers meanwhile...
    cache.put("k1", 1, since)  # ...and what the lookup read is not kept
    assert cache.get("k1") is None
    off: LookupCache[str, int] = LookupCache(0, 3)
    off.put("k", 1, off.generation)
    assert off.get("k") is None


@pytest.mark.parametrize("ttl", [float("nan"), float("inf"), -1.0])
def test_a_lookup_cache_refuses_a_ttl_that_is_not_finite_seconds(ttl: float) -> None:
    # a NaN deadline compares false forever: a revoked token would be served for good
    with pytest.raises(ConfigurationError):
        LookupCache(ttl, 3)


@pytest.mark.parametrize("raw", ["nan", "inf", "-1", "soon"])
def test_the_token_cache_ttl_from_the_environment_must_be_finite_seconds(
    raw: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_DATABASE_URL", f"sqlite:///{tmp_path}/env.db")
    monkeypatch.setenv("FLOWMEM_TOKEN_CACHE_TTL", raw)
    with pytest.raises(ConfigurationError, match="FLOWMEM_TOKEN_CACHE_TTL"):
        app_from_env()


@pytest.mark.parametrize(("raw", "size"), [(None, 8), ("", 8), ("3", 3)])
def test_the_store_threads_from_the_environment_default_by_store(
    raw: str | None, size: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_DATABASE_URL", f"sqlite:///{tmp_path}/env.db")
    if raw is None:
        monkeypatch.delenv("FLOWMEM_STORE_CONCURRENCY", raising=False)
    else:
        monkeypatch.setenv("FLOWMEM_STORE_CONCURRENCY", raw)
    app = app_from_env()
    try:
        assert app.state.services.pool.size == size
    finally:
        app.state.services.store.close()


@pytest.mark.parametrize("raw", ["many", "0"])
def test_bad_store_threads_from_the_environment_are_refused(
    raw: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_DATABASE_URL", f"sqlite:///{tmp_path}/env.db")
    monkeypatch.setenv("FLOWMEM_STORE_CONCURRENCY", raw)
    with pytest.raises(ConfigurationError, match=r"store_concurrency|FLOWMEM_STORE_CONCURRENCY"):
        app_from_env()


def test_serve_refuses_bad_store_threads_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from flowmem.cli import cli

    database = f"sqlite:///{tmp_path}/cli.db"
    result = CliRunner().invoke(
        cli, ["serve", "--database", database], env={"FLOWMEM_STORE_CONCURRENCY": "0"}
    )
    assert result.exit_code == 2, result.output
    assert "FLOWMEM_STORE_CONCURRENCY" in result.output or "store-concurrency" in result.output
    assert not (tmp_path / "cli.db").exists()


@pytest.mark.parametrize("option", ["--token-cache-ttl", "--body-timeout", "--rate-limit"])
def test_serve_refuses_a_number_option_that_is_not_finite(option: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from flowmem.cli import cli

    database = f"sqlite:///{tmp_path}/cli.db"
    result = CliRunner().invoke(cli, ["serve", "--database", database, option, "nan"])
    assert result.exit_code == 2, result.output
    assert "not a finite number" in result.output
    assert not (tmp_path / "cli.db").exists()  # refused before anything was opened
