"""A real ``flowmem serve`` process runs model turns with the runtime's runner (wiring)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from flowmem.auth import create_token
from flowmem.store import open_store
from flowmem.store.base import Address
from tests.runtime.fake_provider import FakeProvider, calls, text
from tests.runtime.test_serving import ENV_KEYS
from tests.served import flowmem_serve


@pytest.mark.slow
def test_flowmem_serve_runs_model_turns(fake_provider: FakeProvider, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/served.db"
    store = open_store(url)
    token, _ = create_token(store, "alice", {"sessions:create"})
    store.close()
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    env.update(FLOWMEM_MODEL="fake-model", FLOWMEM_MODEL_BASE_URL=fake_provider.base_url)
    fake_provider.script(calls(("r1", "remember", {"key": "k", "value": "v"})), text("Remembered."))
    args = ["--database", url, "--no-access-log"]
    with flowmem_serve(args, tmp_path, env=env) as served:
        auth = {"Authorization": f"Bearer {token}"}
        base = served.url
        sid = httpx.post(f"{base}/v1/sessions", json={"name": "s"}, headers=auth).json()["id"]
        turn = httpx.post(
            f"{base}/v1/sessions/{sid}/turns?wait=true",
            json={"content": "remember k=v"},
            headers=auth,
            timeout=30,
        )
        assert turn.status_code == 200, turn.text
        assert turn.json()["status"] == "completed"
        rows = httpx.get(f"{base}/v1/sessions/{sid}/messages", headers=auth).json()["data"]
        assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant"]
    check = open_store(url)
    assert check.get_record(Address("user", "alice", "note:k"), time.time()) == (True, "v")
