"""``GET /metrics`` in one process: who may read it, what a request is counted as, and dead workers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem import metrics
from flowmem.api import create_app
from flowmem.api.metrics import PrometheusSink, mark_dead_workers
from flowmem.api.ratelimit import RateLimits
from flowmem.auth import create_token
from flowmem.store import open_store
from tests.api.test_metrics_serve import _samples, _value
from tests.api.transport import OneHopClient
from tests.store.test_faults import read_only_store

ROW = {"messages": [{"role": "user", "content": "x"}]}


@pytest.fixture
def scrapes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every scrape the sinks make (one list entry each)."""
    made: list[int] = []
    plain = PrometheusSink.scrape

    def counted(self: PrometheusSink) -> bytes:
        made.append(1)
        return plain(self)

    monkeypatch.setattr(PrometheusSink, "scrape", counted)
    return made


@pytest.fixture
def tokens(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A SQLite database with a user, a metrics reader and an admin token; closed."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = open_store(url)
    made = {
        "alice": create_token(store, "alice", {"sessions:create"})[0],
        "reader": create_token(store, None, {"metrics:read"})[0],
        "admin": create_token(store, "root", {"admin"})[0],
    }
    store.close()
    yield url, made
    metrics.install(None)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_metrics_are_off_unless_asked_for(tokens: tuple[str, dict[str, str]]) -> None:
    url, made = tokens
    with OneHopClient(create_app(database_url=url)) as client:
        assert client.get("/metrics", headers=_auth(made["admin"])).status_code == 404
    assert metrics.installed() is None


def test_only_a_token_with_metrics_read_or_admin_is_answered_and_nothing_is_collected_before(
    tokens: tuple[str, dict[str, str]], scrapes: list[int]
) -> None:
    url, made = tokens
    with OneHopClient(create_app(database_url=url, metrics=True)) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers=_auth("fm_unknown")).status_code == 401
        refused = client.get("/metrics", headers=_auth(made["alice"]))
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
        assert scrapes == []
        assert client.get("/metrics", headers=_auth(made["admin"])).status_code == 200
        answer = client.get("/metrics", headers=_auth(made["reader"]))
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/plain")
        assert len(scrapes) == 2
        assert "/metrics" not in client.get("/openapi.json").json()["paths"]
    samples = _samples(answer.text)
    assert _value(samples, "flowmem_requests_total", method="GET", route="unrouted", status="401") == 2
    assert _value(samples, "flowmem_requests_total", method="GET", route="/metrics", status="403") == 1
    assert _value(samples, "flowmem_workers") == 1
    assert metrics.installed() is None  # the app's shutdown took its sink away


def test_rate_limit_refusals_are_counted(tokens: tuple[str, dict[str, str]]) -> None:
    url, made = tokens
    limits = RateLimits(requests_per_second=0.001, burst=1)
    with OneHopClient(create_app(database_url=url, metrics=True, rate_limits=limits)) as client:
        path = "/v1/buffers/user/notes"
        assert client.post(path, headers=_auth(made["alice"]), json=ROW).status_code == 200
        assert client.post(path, headers=_auth(made["alice"]), json=ROW).status_code == 429
        samples = _samples(client.get("/metrics", headers=_auth(made["reader"])).text)
    assert _value(samples, "flowmem_rate_limited_total", limit="rate_limited") == 1
    assert _value(samples, "flowmem_requests_total", method="POST", route="unrouted", status="429") == 1
    assert _value(samples, "flowmem_appends_total") == 1


def test_store_errors_are_counted_by_code(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    store = open_store(f"sqlite:///{path}")
    alice = create_token(store, "alice", {"sessions:create"})[0]
    reader = create_token(store, None, {"metrics:read"})[0]
    store.close()
    store = read_only_store(path)
    try:
        with OneHopClient(create_app(store, metrics=True)) as client:
            answer = client.post("/v1/buffers/user/notes", headers=_auth(alice), json=ROW)
            assert answer.status_code == 503
            samples = _samples(client.get("/metrics", headers=_auth(reader)).text)
    finally:
        store.close()
        metrics.install(None)
    assert _value(samples, "flowmem_store_errors_total", code="store_read_only") == 1
    assert _value(samples, "flowmem_appends_total") == 0


WORKER = """
import sys
from flowmem import metrics
from flowmem.api.metrics import PrometheusSink
sink = PrometheusSink()
metrics.install(sink)
metrics.appended(2, 1, 0, 0, 2)
if sys.argv[1] == "stops":
    sink.close()
"""


def _worker(directory: Path, how: str) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    subprocess.run([sys.executable, "-c", WORKER, how], env=env, check=True, timeout=60)


def test_workers_add_up_and_a_dead_one_leaves_its_counts_but_not_its_live_gauge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _worker(tmp_path, "stops")  # marks itself dead on the way out
    _worker(tmp_path, "dies")  # ends without a word, like a killed worker
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("gauge_live")]
    assert len(leftovers) == 1
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    scraper = PrometheusSink()  # this process: a live worker too
    try:
        samples = _samples(scraper.scrape().decode())
        assert _value(samples, "flowmem_appends_total") == 2
        assert _value(samples, "flowmem_messages_appended_total") == 4
        assert _value(samples, "flowmem_heals_total") == 2
        assert _value(samples, "flowmem_workers") == 1  # only this one is alive
        assert not [p for p in tmp_path.iterdir() if p.name in leftovers]
        assert mark_dead_workers(str(tmp_path)) == []
    finally:
        scraper.close()


def test_tracing_is_turned_on_only_by_flowmem_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowmem.api.metrics import tracing_from_env

    monkeypatch.delenv("FLOWMEM_OTEL", raising=False)
    assert tracing_from_env() is False
    assert metrics._tracer is None
    monkeypatch.setenv("FLOWMEM_OTEL", "1")
    try:
        assert tracing_from_env() is True
        assert metrics._tracer is not None
        with metrics.span("flowmem.append", scope="user") as current:
            assert current is not None  # a span of the global provider (a no-op one here)
    finally:
        metrics.enable_tracing(None)
