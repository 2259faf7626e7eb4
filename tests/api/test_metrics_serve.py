"""``/metrics`` of a real ``flowmem serve --workers 2``: known operations, exact counts, any worker."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from flowmem.auth import create_token
from flowmem.store import open_store
from tests.served import flowmem_serve

pytestmark = pytest.mark.slow

ROUNDS = 6  # buffers, each taken through a call, a heal, a late result and a duplicate
BAD_TOKENS = 5
WORKERS = 2
_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition's samples: (name, labels) -> value."""
    found = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match["labels"] or ""))
        found[(match["name"], labels)] = float(match["value"])
    return found


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _call(url: str, method: str, path: str, token: str, **kwargs: object) -> httpx.Response:
    """One request on a new connection, so the kernel spreads them over the workers."""
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}  # type: ignore[dict-item]
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.request(method, path, headers=headers, **kwargs)  # type: ignore[arg-type]


def _scrape(url: str, token: str) -> dict:
    answer = _call(url, "GET", "/metrics", token)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return _samples(answer.text)


def _both_workers_up(url: str, token: str) -> dict:
    """Scrape until both workers have started (their live gauge), within the ready time."""
    for _ in range(600):
        samples = _scrape(url, token)
        if _value(samples, "flowmem_workers") == WORKERS:
            return samples
    pytest.fail("the second worker did not start")


def test_metrics_count_known_operations_across_two_workers(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = open_store(f"sqlite:///{db}")
    user, _ = create_token(store, "alice", {"sessions:create"})
    service, _ = create_token(store, None, {"sessions:create"})
    reader, _ = create_token(store, None, {"metrics:read"})
    store.close()
    call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    with flowmem_serve(["--database", f"sqlite:///{db}", "--workers", str(WORKERS)], tmp_path) as served:
        url = served.url
        _both_workers_up(url, reader)
        # a user token without metrics:read is refused, having collected nothing
        assert _call(url, "GET", "/metrics", user).status_code == 403
        assert _call(url, "GET", "/metrics", "fm_not-a-token").status_code == 401
        for n in range(ROUNDS):
            path = f"/v1/buffers/user/k{n}"
            steps = [
                [{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}", **call}]}],
                [{"role": "user", "content": "still there?"}],  # heals c{n} (MEM-3)
                [{"role": "tool", "tool_call_id": f"c{n}", "content": "late"}],  # replaces (MEM-10)
                [{"role": "tool", "tool_call_id": f"c{n}", "content": "again"}],  # duplicate (MEM-1)
            ]
            for messages in steps:
                answer = _call(url, "POST", path, user, json={"messages": messages})
                assert answer.status_code == 200, answer.text
        # refusals: no session id (MEM-13); a service token in the user scope (MEM-6)
        body = {"messages": [{"role": "user", "content": "x"}]}
        assert _call(url, "POST", "/v1/buffers/session/k", user, json=body).json()["refused"]
        assert _call(url, "POST", "/v1/buffers/user/k", service, json=body).json()["refused"]
        # normalization drops an orphan result (MEM-5)
        orphan = [{"role": "tool", "tool_call_id": "nobody", "content": "?"}, {"role": "user", "content": "hi"}]
        assert _call(url, "POST", "/v1/normalize", user, json=orphan).json()["dropped"] == 1
        # an idempotent write answered twice: one replay
        keyed = {"Idempotency-Key": "once"}
        for _ in range(2):
            _call(url, "POST", "/v1/buffers/user/idem", user, json=body, headers=keyed)
        # a turn with no model: recorded, completed
        session = _call(url, "POST", "/v1/sessions", user, json={"name": "s"}).json()["id"]
        turn = _call(url, "POST", f"/v1/sessions/{session}/turns", user, json={"content": "hello"})
        assert turn.json()["status"] == "completed"
        for _ in range(BAD_TOKENS):
            assert _call(url, "GET", "/v1/sessions", "fm_bad").status_code == 401
        # every scrape, whichever worker answers it, adds up both workers' counts
        scrapes = [_scrape(url, reader) for _ in range(4)]
    appends = ROUNDS * 4 + 2  # the idempotent append wrote once, and the turn appended its row
    for samples in scrapes:
        assert _value(samples, "flowmem_workers") == WORKERS
        assert _value(samples, "flowmem_appends_total") == appends
        assert _value(samples, "flowmem_messages_appended_total") == ROUNDS * 2 + 2
        assert _value(samples, "flowmem_heals_total") == ROUNDS
        assert _value(samples, "flowmem_placeholder_replacements_total") == ROUNDS
        assert _value(samples, "flowmem_deduplicated_messages_total") == ROUNDS
        assert _value(samples, "flowmem_buffer_messages_count") == appends
        assert _value(samples, "flowmem_refusals_total", rule="MEM-13", code="no_session_id") == 1
        assert _value(samples, "flowmem_refusals_total", rule="MEM-6", code="no_user_id") == 1
        assert _value(samples, "flowmem_normalization_drops_total") == 1
        assert _value(samples, "flowmem_idempotent_replays_total") == 1
        assert _value(samples, "flowmem_turns_total", status="completed", reason="recorded") == 1
        route = {"method": "POST", "route": "/v1/buffers/{scope}/{key}"}
        assert _value(samples, "flowmem_requests_total", status="200", **route) == ROUNDS * 4 + 4
        assert _value(samples, "flowmem_request_seconds_count", **route) == ROUNDS * 4 + 4
        assert _value(samples, "flowmem_requests_total", method="GET", route="unrouted", status="401") == BAD_TOKENS + 1
        assert _value(samples, "flowmem_requests_total", method="GET", route="/metrics", status="403") == 1
        assert _value(samples, "flowmem_database_bytes") > 0
    # the scrapes themselves are counted as they happen: each one sees the ones before it
    counted = [
        _value(s, "flowmem_requests_total", method="GET", route="/metrics", status="200")
        for s in scrapes
    ]
    assert counted == sorted(counted) and len(set(counted)) == len(counted)


def test_serve_no_metrics_serves_none(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = open_store(f"sqlite:///{db}")
    admin, _ = create_token(store, "root", {"admin"})
    store.close()
    with flowmem_serve(["--database", f"sqlite:///{db}", "--no-metrics"], tmp_path) as served:
        assert _call(served.url, "GET", "/metrics", admin).status_code == 404
        assert _call(served.url, "GET", "/v1/sessions", admin).status_code == 200
