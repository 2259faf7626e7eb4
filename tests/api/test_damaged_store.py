"""A damaged SQLite file over HTTP (issue 38 §5): named 503 ``store_corrupt``, readiness red, never a short read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flowmem.api import create_app
from flowmem.auth import create_token
from flowmem.limits import Quotas
from flowmem.store import open_store
from flowmem.store.sqlite.driver import add_quota_function
from tests.api.transport import OneHopClient
from tests.store.damage import KEY, filled, flip_cells, flip_text, rows

READ = "/v1/buffers/user/notes"


@pytest.mark.parametrize("damage", [flip_text, flip_cells])
def test_a_read_of_a_damaged_buffer_is_refused_store_corrupt_and_readiness_fails(
    tmp_path: Path, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "d.db"
    filled(path)
    store = open_store(f"sqlite:///{path}")
    token = create_token(store, "alice")[0]
    other = create_token(store, "bob")[0]
    store.close()
    damage(path)  # type: ignore[operator]
    auth = {"Authorization": f"Bearer {token}"}
    with OneHopClient(create_app(database_url=f"sqlite:///{path}"), raise_server_exceptions=False) as client:
        assert client.get("/health/store").status_code == 200  # nothing read the damage yet
        answer = client.get(READ, headers=auth)
        assert answer.status_code == 503, answer.text[:300]  # before: 200 with 150 of 300 rows, or store_error
        assert answer.json()["error"]["code"] == "store_corrupt"
        health = client.get("/health/store")
        assert health.status_code == 503 and health.json()["error"]["code"] == "store_corrupt"
        # what is intact is still served: another user's (empty) buffer, a record
        mine = {"Authorization": f"Bearer {other}"}
        assert client.get(READ, headers=mine).status_code == 200
    said = [r.getMessage() for r in caplog.records if "store_corrupt" in r.getMessage()]
    assert said and "flowmem doctor" in said[0] and "flowmem backup" in said[0]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_stored_row_that_no_longer_parses_is_store_corrupt_not_a_500(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A PostgreSQL (or SQLite) row whose text was damaged: named, and readiness fails."""
    url = f"sqlite:///{tmp_path / 'r.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_db_url")
    store = open_store(url)
    token = create_token(store, "alice")[0]
    store.append(KEY, rows(20))
    damaged = "UPDATE buffer_rows SET body = '{\"role\": \"us' WHERE pos = (SELECT max(pos) FROM buffer_rows)"
    if backend == "sqlite":
        store.close()
        conn = sqlite3.connect(tmp_path / "r.db")
        add_quota_function(conn, Quotas)  # the store's own, for its triggers
        conn.execute(damaged)
        conn.commit()
        conn.close()
    else:
        with store._pool.connection() as pg:  # type: ignore[attr-defined]  # the test's own schema
            pg.execute(damaged)
        store.close()
    auth = {"Authorization": f"Bearer {token}"}
    with OneHopClient(create_app(database_url=url), raise_server_exceptions=False) as client:
        answer = client.get(READ, headers=auth, params={"max_tokens": 10_000})
        assert answer.status_code == 503, answer.text[:300]  # before: 500 internal_error
        assert answer.json()["error"]["code"] == "store_corrupt"
        assert client.get("/health/store").json()["error"]["code"] == "store_corrupt"


# a stored text of each other kind, damaged as above: the request that reads it, the SQL that damages it
DAMAGED_TEXTS = {
    "record": ("/v1/memory/user/pref", "UPDATE records SET value = '{\"x\": '"),
    "session": ("/v1/sessions/{sid}", "UPDATE sessions SET metadata = '{\"a\": '"),
    "session-list": ("/v1/sessions", "UPDATE sessions SET metadata = '{\"a\": '"),
    "transcript": ("/v1/sessions/{sid}/messages", "UPDATE transcripts SET body = '{\"role'"),
    "token": ("/v1/sessions", "UPDATE tokens SET permissions = '[\"sessions:cr'"),
}


@pytest.mark.parametrize("damaged", DAMAGED_TEXTS)
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_damaged_record_session_transcript_or_token_text_is_store_corrupt_not_a_500(
    backend: str, damaged: str, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_db_url")
    store = open_store(url)
    auth = {"Authorization": f"Bearer {create_token(store, 'alice')[0]}"}
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        sid = client.post("/v1/sessions", json={"name": "n", "metadata": {"a": 1}}, headers=auth).json()["id"]
        client.post(f"/v1/sessions/{sid}/turns", params={"wait": True}, json={"content": "hi"}, headers=auth)
        client.put("/v1/memory/user/pref", json={"value": {"x": 1}}, headers=auth)
    route, damage = DAMAGED_TEXTS[damaged]
    if backend == "sqlite":
        store.close()
        conn = sqlite3.connect(tmp_path / "r.db")
        add_quota_function(conn, Quotas)  # the store's own, for its triggers
        conn.execute(damage)
        conn.commit()
        conn.close()
    else:
        with store._pool.connection() as pg:  # type: ignore[attr-defined]  # the test's own schema
            pg.execute(damage)
        store.close()
    with OneHopClient(create_app(database_url=url), raise_server_exceptions=False) as client:
        answer = client.get(route.format(sid=sid), headers=auth)
        assert answer.status_code == 503, answer.text[:300]  # before: 500 internal_error, readiness green
        assert answer.json()["error"]["code"] == "store_corrupt"
        assert client.get("/health/store").json()["error"]["code"] == "store_corrupt"
    said = [r.getMessage() for r in caplog.records if "store_corrupt" in r.getMessage()]
    assert said and "flowmem doctor" in said[0]
