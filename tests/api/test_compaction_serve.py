"""MEM-12 for compaction over HTTP: two workers of a real ``flowmem serve`` (issue 28 §2)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.cli.test_serve import admin_token
from tests.served import flowmem_serve
from tests.store.archive.test_archive import history


def _race(base: str, headers: dict[str, str]) -> None:
    url = "/v1/buffers/global/chat"
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        assert client.post(url, json={"messages": history(6)}).status_code == 200
        before = client.get(url).json()["messages"]

    planned = threading.Barrier(4, timeout=30)

    def compact(n: int) -> int:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            plan = client.get(f"{url}/compact/plan", params={"keep_tokens": 150}).json()
            planned.wait()  # every client planned before any applies (the model call)
            done = client.post(f"{url}/compact", json={"plan": plan["plan"], "summary": f"summary {n}"})
            return done.status_code

    with ThreadPoolExecutor(4) as pool:
        statuses = sorted(pool.map(compact, range(4)))
    assert statuses == [200, 409, 409, 409]
    whole = httpx.get(f"{base}{url}?archived=true", headers=headers).json()
    archived = whole["messages"][: whole["archived"]]
    live = whole["messages"][whole["archived"] :]
    assert archived == before[: whole["archived"]]
    assert live[1:] == before[whole["archived"] :]
    assert live[0]["content"].startswith("summary ")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_mem_12_two_workers_apply_one_of_four_racing_plans(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    database = (
        f"sqlite:///{tmp_path / 'flowmem.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_db_url")
    )
    args = ["--workers", "2", "--database", database, "--no-access-log"]
    with flowmem_serve(args, tmp_path) as (base, out, _):
        _race(base, {"Authorization": f"Bearer {admin_token(out)}"})
