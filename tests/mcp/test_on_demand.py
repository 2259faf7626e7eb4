"""``/mcp`` built on its first request: an app never asked for it never imports the SDK (decision 0157)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from flowmem.api.app import create_app
from flowmem.auth import create_token
from flowmem.mcp.http import MCPEndpoint
from flowmem.store import MemoryStore

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip
ACCEPT = "application/json, text/event-stream"

# A fresh interpreter: the server's own factory (``flowmem serve``'s, runtime included) over
# an SQLite file, its lifespan run, requests to every kind of route but /mcp, then /mcp.
_SERVE_ALL_BUT_MCP = textwrap.dedent(
    """
    import json, sys
    from fastapi.testclient import TestClient
    from flowmem.api.app import app_from_env
    from flowmem.auth import create_token
    from flowmem.store import open_store

    store = open_store(sys.argv[1])
    token, _ = create_token(store, "ana")
    store.close()
    auth = {"Authorization": f"Bearer {token}"}
    seen = {}
    with TestClient(app_from_env()) as client:
        seen["health"] = client.get("/health").status_code
        seen["store"] = client.get("/health/store").status_code
        seen["put"] = client.put("/v1/memory/user/city", json={"value": "Lisbon"}, headers=auth).status_code
        seen["get"] = client.get("/v1/memory/user/city", headers=auth).status_code
        seen["openapi"] = client.get("/openapi.json").status_code
        seen["ui"] = client.get("/ui", follow_redirects=True).status_code
        seen["unknown"] = client.get("/v1/nothing-here", headers=auth).status_code
        seen["imported_before"] = "mcp" in sys.modules
        answered = client.post("/mcp", json=%s, headers={**auth, "Accept": "%s"})
        seen["mcp"] = answered.status_code
        seen["server"] = answered.json()["result"]["serverInfo"]["name"]
        seen["imported_after"] = "mcp" in sys.modules
    print(json.dumps(seen))
    """
) % (json.dumps(INITIALIZE), ACCEPT)


def test_a_server_never_asked_for_mcp_never_imports_the_sdk_and_its_first_mcp_request_is_served(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    env = {**os.environ, "FLOWMEM_DATABASE_URL": url}
    env.pop("FLOWMEM_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-c", _SERVE_ALL_BUT_MCP, url], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "health": 200, "store": 200, "put": 200, "get": 200, "openapi": 200, "ui": 200, "unknown": 404,
        "imported_before": False, "mcp": 200, "server": "flowmem", "imported_after": True,
    }  # fmt: skip


def test_concurrent_first_requests_start_one_session_manager_per_run_of_the_lifespan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[MCPEndpoint] = []
    running = MCPEndpoint.running

    def counted(self: MCPEndpoint) -> Any:
        started.append(self)
        return running(self)

    monkeypatch.setattr(MCPEndpoint, "running", counted)
    store = MemoryStore()
    token, _ = create_token(store, "ana")
    app = create_app(store, purge_interval=None)
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}

    async def five_at_once() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://flowmem") as client:
                return await asyncio.gather(*(client.post("/mcp", json=INITIALIZE, headers=headers) for _ in range(5)))

    for run in (1, 2):  # a session manager runs once: each run of the lifespan starts its own
        answers = asyncio.run(five_at_once())
        assert [answer.status_code for answer in answers] == [200] * 5
        assert {answer.json()["result"]["serverInfo"]["name"] for answer in answers} == {"flowmem"}
        assert len(started) == run
    assert started[0] is started[1]  # the endpoint (its server and tools) is built once per app


def test_an_sdk_that_fails_to_import_leaves_mcp_answering_as_an_unknown_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``mcp`` package is found but a module of it cannot be imported: 404, as without the SDK."""
    for name in [m for m in sys.modules if m.startswith(("mcp.server", "flowmem.mcp.http", "flowmem.mcp.server"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp.server", None)  # `import mcp.server…` raises ModuleNotFoundError
    store = MemoryStore()
    token, _ = create_token(store, "ana")
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    with TestClient(create_app(store, purge_interval=None)) as client:
        unknown = client.post("/nothing-here", json=INITIALIZE, headers=headers)
        for _ in range(2):
            refused = client.post("/mcp", json=INITIALIZE, headers=headers)
            assert refused.status_code == 404
            assert refused.json() == unknown.json()
