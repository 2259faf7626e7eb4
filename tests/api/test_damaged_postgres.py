"""A physically damaged PostgreSQL heap page (issue 38 §5): named 503 ``store_corrupt``, readiness red, doctor exit 9.

A private cluster (``tests.store.pgcluster``) is stopped, the relation file of
``buffer_rows`` damaged on the page holding one of alice's rows, and started
again. PostgreSQL refuses the page (SQLSTATE XX001, "invalid page in block";
``zero_damaged_pages`` is off): without data checksums when the page header is
impossible, with them (``initdb --data-checksums``) for any flipped byte, a row's
text included. flowmem names it as it names a damaged SQLite file.
"""

from __future__ import annotations

import subprocess

import pytest

from flowmem.api import create_app
from flowmem.auth import create_token
from flowmem.store import Address, open_store
from tests.api.transport import OneHopClient
from tests.served import FLOWMEM, serve_env
from tests.store.damage import KEY, rows
from tests.store.pgcluster import damage_header, flip, page_of, private_cluster

pytestmark = pytest.mark.postgres

READ = "/v1/buffers/user/notes"
BOB = Address("user", "bob", "notes")
BOB_ROWS = [{"role": "user", "content": f"BOB{k:04d} " + "y" * 40} for k in range(40)]


@pytest.mark.parametrize("checksums", [False, True], ids=["page-header", "row-bytes-with-checksums"])
def test_a_damaged_heap_page_is_store_corrupt_readiness_fails_and_doctor_names_it(
    checksums: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with private_cluster(checksums=checksums) as cluster:
        store = open_store(cluster.url)
        alice = {"Authorization": f"Bearer {create_token(store, 'alice')[0]}"}
        bob = {"Authorization": f"Bearer {create_token(store, 'bob')[0]}"}
        store.append(KEY, rows())  # alice's 300 rows fill the first pages
        store.append(BOB, BOB_ROWS)  # bob's the pages after them
        with store._pool.connection() as conn:  # type: ignore[attr-defined]  # the test's own cluster
            relation = conn.execute("SELECT pg_relation_filepath('buffer_rows')").fetchone()[0]
        store.close()
        cluster.stop()
        path = cluster.data / relation
        if checksums:
            flip(path, b"MARK0150")  # a row's text: only the page's checksum can tell
        else:
            damage_header(path, page_of(path, b"MARK0150"))
        cluster.start()
        with OneHopClient(create_app(database_url=cluster.url), raise_server_exceptions=False) as client:
            assert client.get("/health/store").status_code == 200  # nothing read the page yet
            answer = client.get(READ, headers=alice)
            assert answer.status_code == 503, answer.text[:300]
            assert answer.json()["error"]["code"] == "store_corrupt"
            assert "MARK" not in answer.text  # never a part of the rows
            health = client.get("/health/store")
            assert health.status_code == 503 and health.json()["error"]["code"] == "store_corrupt"
            intact = client.get(READ, headers=bob)  # bob's rows are on pages of their own
            assert intact.status_code == 200, intact.text[:300]
            assert [m["content"] for m in intact.json()["messages"]] == [r["content"] for r in BOB_ROWS]
        said = [r.getMessage() for r in caplog.records if "store_corrupt" in r.getMessage()]
        assert said and "flowmem doctor" in said[0] and "flowmem backup" in said[0], said
        doctor = subprocess.run(
            [*FLOWMEM, "doctor", "--database", cluster.url], capture_output=True, text=True, env=serve_env(), timeout=120
        )  # fmt: skip
        assert doctor.returncode == 9, (doctor.stdout, doctor.stderr)
        assert "buffer_rows cannot be read whole" in doctor.stdout and "invalid page" in doctor.stdout
        assert "What to do" in doctor.stderr
