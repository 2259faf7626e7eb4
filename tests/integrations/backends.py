"""The two memories every adapter test runs on: in process, and a real ``flowmem serve``.

``local``: a ``MemoryService`` over a store in this process (what the adapters took
before issue 16 §3). ``remote``: a ``flowmem.client.Client`` talking over loopback to
one ``flowmem serve`` that the test session starts (SQLite in a temporary
directory), with a *user* token; ``remote-postgres``: the same against a second
``flowmem serve`` with two workers over the throwaway PostgreSQL. Each remote test acts as a fresh user whose token
is made for it (``sessions:create``, what ``flowmem token create --user`` gives), so
the session ids ("s1") and user-scope keys of different tests never meet; when the
test ends an admin erases that user (its sessions, buffers, records and token).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowmem.auth import create_token
from flowmem.client import Client, RetryPolicy
from flowmem.memory import Memory
from flowmem.store import Store, open_store
from tests.client.conftest import FAST_RETRY, Server, serve

LOCAL = "local"
REMOTE = "remote"
REMOTE_POSTGRES = "remote-postgres"
SERVERS = {REMOTE: "adapter_server", REMOTE_POSTGRES: "adapter_server_postgres"}
"""The fixture of the server each remote kind talks to."""
REMOTES = [REMOTE, pytest.param(REMOTE_POSTGRES, marks=pytest.mark.postgres)]
"""The remote kinds, as test parameters (PostgreSQL ones marked ``postgres``)."""


@dataclass
class AdapterServer:
    """The session's one ``flowmem serve``, and a handle on its database to make tokens."""

    server: Server
    store: Store
    numbers: Iterator[int]

    def new_user(self) -> tuple[str, str]:
        """Create a fresh user with a user token; return (user id, token)."""
        user = f"it-user-{next(self.numbers)}"
        token, _ = create_token(self.store, user, {"sessions:create"}, label=user)
        return user, token


def start_adapter_server(
    tmp: Path, database: str | None = None, *args: str
) -> Iterator[AdapterServer]:
    """Run ``flowmem serve`` (default: a SQLite file in ``tmp``) until the generator is closed."""
    database = database or f"sqlite:///{tmp}/adapters.db"
    with serve(database, tmp, *args) as server:
        store = open_store(database)
        try:
            yield AdapterServer(server, store, itertools.count(1))
        finally:
            store.close()


class _Switchable(httpx.BaseTransport):
    """A network transport whose writes fail to connect while ``down`` is set.

    Reads still pass, as with the local tests' store whose appends fail: what is
    tested is a lost write, not a history that cannot be read.
    """

    def __init__(self) -> None:
        self.down = False
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; a write while ``down`` fails as an unreachable server does."""
        if self.down and request.method != "GET":
            raise httpx.ConnectError("the server is down", request=request)
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Close the pooled connections."""
        self._inner.close()


@dataclass
class Remote:
    """What a remote test's client is: its user, and a client for the shared scopes."""

    user: str
    shared: Client
    transport: _Switchable | None = None


# client -> its Remote (the user it acts as, the shared-scope client)
_REMOTES: weakref.WeakKeyDictionary[Client, Remote] = weakref.WeakKeyDictionary()


def remote_memory(
    request: pytest.FixtureRequest, *, switchable: bool = False, kind: str = REMOTE
) -> Client:
    """A ``Client`` as a fresh user of the session's server of ``kind``, erased when the test ends.

    With ``switchable`` its transport can be made to fail (``switch_of``), and it
    never retries, so a failing call fails at once.
    """
    served: AdapterServer = request.getfixturevalue(SERVERS[kind])
    server = served.server
    user, token = served.new_user()
    transport = _Switchable() if switchable else None
    retry = RetryPolicy.never() if switchable else FAST_RETRY
    client = Client(server.url, token, retry=retry, transport=transport)
    shared = server.client("shared")
    _REMOTES[client] = Remote(user, shared, transport)

    def erase() -> None:
        client.close()
        shared.close()
        with server.client("admin") as admin:
            admin.erase_user(user)

    request.addfinalizer(erase)
    return client


def user_of(memory: Memory, local_user: Any) -> Any:
    """The user id a ``user``-scope context names: ``local_user``, or remotely the token's.

    Over HTTP the ``user`` scope is always the token's user; a context naming
    another user is refused (decision 0030).
    """
    remote = _REMOTES.get(memory) if isinstance(memory, Client) else None
    return local_user if remote is None else remote.user


def shared_of(memory: Memory) -> Memory:
    """The memory that reads the shared scopes (``global`` …): remotely, a shared token."""
    remote = _REMOTES.get(memory) if isinstance(memory, Client) else None
    return memory if remote is None else remote.shared


def switch_of(memory: Memory) -> _Switchable:
    """The switchable transport of a ``remote_memory(..., switchable=True)`` client."""
    remote = _REMOTES[memory] if isinstance(memory, Client) else None
    assert remote is not None and remote.transport is not None
    return remote.transport
