"""No request without a token can grow ``/metrics``, its workers' files or a log line (issue 38 §1)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from flowmem import metrics
from flowmem.api import create_app
from flowmem.api.logs import MAX_LOGGED_PATH
from flowmem.api.metrics import MAX_SERIES, PrometheusSink
from flowmem.auth import create_token
from flowmem.store import open_store
from tests.api.test_metrics_serve import _samples
from tests.api.transport import OneHopClient

FLOOD = 2_000  # distinct requests without a token, after the warm-up


async def _call(app: object, method: str, path: str, headers: list[tuple[bytes, bytes]], peer: str) -> int:
    """One request straight into the ASGI app, as uvicorn hands it (any method, any bytes)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": method, "scheme": "http", "path": path, "raw_path": path.encode("latin-1"),
        "query_string": b"", "root_path": "", "headers": headers,
        "client": (peer, 40000), "server": ("127.0.0.1", 8765),
    }
    status = 0
    sent = False

    async def receive() -> dict[str, object]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])  # type: ignore[call-overload]

    await app(scope, receive, send)  # type: ignore[operator]
    return status


def _request(n: int) -> tuple[str, str, list[tuple[bytes, bytes]], str]:
    """The ``n``-th hostile request: its own method, path, header values and peer; some refused framing."""
    method = f"M{n:05d}" + "X" * 1_000
    path = f"/v1/buffers/user/k{n}/" + "p" * (n % 700)
    headers = [
        (b"host", b"127.0.0.1"),
        (b"user-agent", f"agent-{n}".encode()),
        (b"x-forwarded-for", f"10.0.{n % 250}.{n // 250}".encode()),
        (b"x-request-id", f"id-{n}".encode()),
    ]
    kind = n % 5
    if kind == 1:
        # one bad token retried from one address: 401 twenty times, then 429
        headers.append((b"authorization", b"Bearer fm_guess"))
    elif kind == 2:
        headers += [(b"authorization", f"Bearer a{n}".encode()), (b"authorization", b"Bearer b")]  # 400
    elif kind == 3:
        headers += [(b"transfer-encoding", b"chunked"), (b"content-length", b"5")]  # 400
    elif kind == 4:
        headers.append((b"authorization", f"Basic {n}".encode()))  # 401, a scheme not bearer
    peer = f"192.0.2.{n % 200}" if n % 2 else f"peer-{n}"  # uvicorn passes any forwarded text
    if kind == 1:
        peer = "198.51.100.1"
    return method, path, headers, peer


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def flooded(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TestClient, str, Path]]:
    """The app as ``serve`` runs it (metrics in a multiprocess directory), its reader token, the directory.

    On SQLite and PostgreSQL (issue 38's "Done when").
    """
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'm.db'}"
    else:
        url = request.getfixturevalue("postgres_store_url")  # migrated already, no rows
    store = open_store(url)
    reader = create_token(store, None, {"metrics:read"})[0]
    store.close()
    directory = tmp_path / "metrics"
    directory.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    try:
        with OneHopClient(create_app(database_url=url, metrics=True), client=("127.0.0.9", 1)) as client:
            yield client, reader, directory
    finally:
        metrics.install(None)
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
        PrometheusSink().close()  # the next sink made in this process picks memory values again


def _scrape(client: TestClient, reader: str) -> tuple[int, set[tuple[str, frozenset[tuple[str, str]]]]]:
    answer = client.get("/metrics", headers={"Authorization": f"Bearer {reader}"})
    assert answer.status_code == 200, answer.text
    return len(answer.content), set(_samples(answer.text))


def _files(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir())


def test_thousands_of_distinct_requests_without_a_token_leave_the_scrape_and_files_flat(
    flooded: tuple[TestClient, str, Path],
) -> None:
    client, reader, directory = flooded
    app = client.app

    async def send(numbers: range) -> set[int]:
        return {await _call(app, *_request(n)) for n in numbers}

    warm = client.portal.call(send, range(200))  # type: ignore[union-attr]
    assert warm >= {400, 401, 429}
    _scrape(client, reader)  # the scrape's own request is a series too
    size, series = _scrape(client, reader)
    files = _files(directory)
    statuses = client.portal.call(send, range(200, 200 + FLOOD))  # type: ignore[union-attr]
    assert statuses == warm
    size_after, series_after = _scrape(client, reader)
    assert series_after == series  # not one new series
    assert size_after < size + 4 * len(series)  # only the counts' digits grew
    assert _files(directory) == files
    methods = {dict(labels).get("method") for _, labels in series if "method" in dict(labels)}
    assert methods <= metrics.METHODS | {"other"}
    assert "other" in methods


def test_a_log_line_holds_no_unbounded_method_path_or_client(
    flooded: tuple[TestClient, str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client, _, _ = flooded
    caplog.set_level(logging.INFO, logger="flowmem.http")
    method, path, headers, peer = _request(8)  # a 400 (framing), from a peer that is not an address
    path += "q" * 5_000
    assert client.portal.call(_call, client.app, method, path, headers, peer) == 400  # type: ignore[union-attr]
    line = json.loads(caplog.records[-1].getMessage())
    assert line["method"] == "other"
    assert line["client"] == "other"
    assert line["path"].startswith(path[:MAX_LOGGED_PATH])
    assert len(line["path"]) < MAX_LOGGED_PATH + 30
    assert client.get("/health").status_code == 200
    line = json.loads(caplog.records[-1].getMessage())
    assert (line["method"], line["path"], line["client"]) == ("GET", "/health", "127.0.0.9")


def test_the_sink_keeps_at_most_max_series_label_sets_per_metric() -> None:
    sink = PrometheusSink()
    for n in range(MAX_SERIES + 50):
        sink.inc("store_errors", code=f"code_{n}")
    text = sink.scrape().decode()
    found = [line for line in text.splitlines() if line.startswith("flowmem_store_errors_total{")]
    assert len(found) == MAX_SERIES + 1
    assert 'flowmem_store_errors_total{code="other"} 50.0' in found
