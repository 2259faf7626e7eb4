"""The repair log of a real ``flowmem serve`` (issue 37 §2's done-when): it survives a SIGKILL of the
server and a restart with exactly the committed repairs, on SQLite and PostgreSQL.

A writer heals over HTTP (a turn declaring a call, then a user turn: MEM-3) while the
server is killed at a random moment, several times; each time the server is started
again on the same database. A kill is placed by progress, not by time: once a random
15-30 heals of the round were acknowledged (more than the dozen entries the header holds
before they move to the log's table, decision 0148), plus a random pause inside the
next heal; so a loaded machine makes the same work, and an idle one no more of it.
Every heal the server acknowledged is logged, once; every logged heal is a placeholder
in the buffer (none half-written, none from a rolled-back append); a graceful restart
changes nothing.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowmem.auth import create_token
from flowmem.store import open_store
from tests.served import kill_serve, start_serve, stop_serve

pytestmark = pytest.mark.slow

BUFFER = "/v1/buffers/user/chat"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'served.db'}"
    url: str = request.getfixturevalue("postgres_db_url")
    return url


def _token(database: str) -> str:
    store = open_store(database)
    try:
        return create_token(store, "alice", label="repair-log")[0]
    finally:
        store.close()


def _heal_until_refused(
    url: str,
    token: str,
    tag: str,
    acknowledged: list[str],
    stop: threading.Event,
    enough: tuple[int, threading.Event],
) -> None:
    """Heal call after call; a heal is acknowledged once the server answered its append 200.

    ``enough``: once ``acknowledged`` holds that many, the event is set (the round may end).
    """
    count, reached = enough
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        i = 0
        while not stop.is_set():
            cid = f"{tag}-c{i}"
            call = {"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function",
                    "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
            try:
                client.post(BUFFER, json={"messages": [call]}).raise_for_status()
                answer = client.post(BUFFER, json={"messages": [{"role": "user", "content": f"after {cid}"}]})
                answer.raise_for_status()
            except httpx.HTTPError:
                return  # the server is gone
            acknowledged.append(cid)
            if len(acknowledged) >= count:
                reached.set()
            i += 1


def _read(url: str, token: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The buffer's rows and its whole repair log, over HTTP."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        rows = client.get(BUFFER).raise_for_status().json()["messages"]
        log = client.get(f"{BUFFER}/repairs", params={"limit": 1000}).raise_for_status().json()["repairs"]
    return rows, log


def test_mem_3_the_log_survives_a_sigkilled_server_and_a_restart_with_exactly_the_committed_repairs(
    database: str, tmp_path: Path
) -> None:
    token = _token(database)
    rng = random.Random(37)
    acknowledged: list[str] = []
    for round_no in range(3):
        served = start_serve(["--database", database], tmp_path)
        stop, reached = threading.Event(), threading.Event()
        enough = (len(acknowledged) + rng.randint(15, 30), reached)
        writer = threading.Thread(
            target=_heal_until_refused, args=(served.url, token, f"r{round_no}", acknowledged, stop, enough)
        )
        writer.start()
        assert reached.wait(120), f"round {round_no}: {len(acknowledged)} heals acknowledged in 120 s"
        time.sleep(rng.uniform(0, 0.03))  # somewhere inside the next heal
        kill_serve(served.process)  # SIGKILL: no graceful shutdown
        assert served.process.returncode == -9
        stop.set()
        writer.join(30)
    served = start_serve(["--database", database], tmp_path)
    try:
        rows, log = _read(served.url, token)
        assert len(log) < 1000  # the log's bound kept nothing out
        # a call stored just before a kill is healed by the next round's first user turn
        assert {e["kind"] for e in log} == {"heal"} and all(e["count"] == len(e["call_ids"]) for e in log)
        logged = [cid for e in log for cid in e["call_ids"]]
        placeholders = [r["metadata"]["tool_call_id"] for r in rows if r["metadata"].get("healed")]
        assert set(acknowledged) <= set(logged) and len(logged) == len(set(logged))
        assert sorted(logged) == sorted(placeholders) and len(acknowledged) >= 45
        assert all([rows[p]["metadata"]["tool_call_id"] for p in e["positions"]] == e["call_ids"] for e in log)
    finally:
        stop_serve(served.process)
    again = start_serve(["--database", database], tmp_path)  # a graceful restart
    try:
        assert _read(again.url, token) == (rows, log)
    finally:
        stop_serve(again.process)
