"""PostgreSQL's migration 33 (decision 0189): every writer of a header's bytes, its reservation checked.

Each statement that writes a buffer header's ``bytes`` or ``log_bytes`` is run here as
the store sends it, on an owned buffer: a growth past the reservation reserves again
with slack (the usage row's upper bound raised by exactly the new reservation), a growth
past the bytes quota is refused and changes nothing, a growth inside the reservation
under another quota than its last check's is checked on the exact bytes, and a shrink
under another quota is never refused. The reservation trigger (migration 30's, whose
function tests the common case first since migration 33) does it for every writer: each
writer's cases fail without it (decision 0189 weighed a check in each statement instead).
An upgrade from migration 32 keeps every reservation and usage, and checks each owned
buffer inside and past its reservation as before.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas
from flowmem.store.headers import HEADS

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from flowmem.store.postgres.granted import FIRST_TEST, GATED  # noqa: E402
from tests.store.reserved_cases import grow  # noqa: E402

pytestmark = pytest.mark.postgres

CHAT = Address("user", "alice", "chat")
HELD = ',"e"'  # one repair log entry's text, as a write prepends it to the held ones


def _params(name: str, header: dict[str, Any], grown: int) -> tuple[Any, ...]:
    """The writer's parameters: the header (id, count, last major, bytes) grown by ``grown`` bytes.

    The logging writers grow the log's bytes, the others the rows' bytes.
    """
    head = (header["count"], header["last_major"])
    listed = ("[]",) if "listed" in name else ()
    log = (grown, HELD, 1)
    if name == "repairs_counted":
        return (*log, header["id"])
    if "logged" in name:
        return (*head, header["bytes"], 0, *listed, *log, header["id"])
    return (*head, header["bytes"] + grown, 0, *listed, header["id"])


WRITERS = [
    "header_update",
    "header_listed",
    "header_update?",
    "header_listed?",
    "header_logged",
    "header_listed_logged",
    "repairs_counted",
]


def _write(conn: Any, name: str, grown: int) -> None:
    """Run the writer ``name`` as the store has it, in a transaction of its own."""
    header = _header(conn)
    text = PostgresStore.SQL[name]
    if name.endswith("?"):  # the known path's verdict, as its statement's check leaves it
        text = f"WITH known AS MATERIALIZED (SELECT TRUE AS v, TRUE AS ok) {text}"
    with conn.transaction():
        conn.execute(text, _params(name, header, grown))


def _header(conn: Any) -> dict[str, Any]:
    found = conn.execute(
        """SELECT id, count, last_major, bytes, log_bytes, reserved, reserved_under FROM buffers
        WHERE scope = 'user' AND scope_id = 'alice' AND key = 'chat'"""
    ).fetchone()
    assert found is not None
    names = ("id", "count", "last_major", "bytes", "log_bytes", "reserved", "reserved_under")
    return dict(zip(names, found, strict=True))


def _upper_bound(conn: Any) -> int:
    found = conn.execute("SELECT bytes FROM user_usage WHERE user_id = 'alice'").fetchone()
    assert found is not None
    return int(found[0])


def _quota(conn: Any, quota: str) -> None:
    """The bytes quota this connection's statements check (the store sets it per connection)."""
    conn.execute("SELECT set_config('flowmem.quota_bytes', %s, false)", (quota,))


@pytest.fixture
def owned(postgres_store_url: str) -> Any:
    """A connection to a schema whose owned buffer holds one message, checked under 1 GiB."""
    store = PostgresStore(postgres_store_url)
    try:
        grow(store, CHAT, "first")  # reserves 16 KiB more than it holds
    finally:
        store.close()
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        _quota(conn, str(Quotas().bytes))
        yield conn


@pytest.mark.parametrize("name", WRITERS)
def test_a_growth_past_the_reservation_reserves_again_with_slack(owned: Any, name: str) -> None:
    before, bound = _header(owned), _upper_bound(owned)
    grown = before["reserved"] - before["bytes"] - before["log_bytes"] + 1000  # 1,000 bytes past it
    _write(owned, name, grown)
    after = _header(owned)
    used = after["bytes"] + after["log_bytes"]
    assert used == before["bytes"] + before["log_bytes"] + grown
    assert after["reserved"] == used + max(16384, used // 8)
    assert _upper_bound(owned) == bound + after["reserved"] - before["reserved"]
    assert after["reserved_under"] == str(Quotas().bytes)


@pytest.mark.parametrize("name", WRITERS)
def test_a_growth_past_the_quota_is_refused_and_changes_nothing(owned: Any, name: str) -> None:
    before, bound = _header(owned), _upper_bound(owned)
    used = before["bytes"] + before["log_bytes"]
    _quota(owned, str(used + 100))
    grown = before["reserved"] - used + 1000
    with pytest.raises(psycopg.errors.RaiseException, match="flowmem_quota"):
        _write(owned, name, grown)
    assert _header(owned) == before and _upper_bound(owned) == bound


@pytest.mark.parametrize("name", WRITERS)
def test_a_growth_inside_the_reservation_under_a_lowered_quota_is_checked(
    owned: Any, name: str
) -> None:
    before, bound = _header(owned), _upper_bound(owned)
    used = before["bytes"] + before["log_bytes"]
    _quota(owned, str(used + 10))  # under the upper bound (its 16 KiB of slack)
    with pytest.raises(psycopg.errors.RaiseException, match="flowmem_quota"):
        _write(owned, name, 11)  # inside the reservation, one byte over the exact bytes
    assert _header(owned) == before and _upper_bound(owned) == bound
    _write(owned, name, 10)  # fits exactly: the slack given back, checked under this quota
    after = _header(owned)
    assert after["bytes"] + after["log_bytes"] == used + 10 == after["reserved"]
    assert after["reserved_under"] == str(used + 10)
    assert _upper_bound(owned) == bound - (before["reserved"] - used) + 10


@pytest.mark.parametrize(
    "name", ["header_update", "header_listed", "header_update?", "header_listed?"]
)
def test_a_shrink_under_another_quota_is_never_refused_and_keeps_its_last_check(
    owned: Any, name: str
) -> None:
    before, bound = _header(owned), _upper_bound(owned)
    _quota(owned, "1")  # far under what alice holds
    _write(owned, name, -10)
    after = _header(owned)
    assert after["bytes"] == before["bytes"] - 10
    assert (after["reserved"], after["reserved_under"]) == (
        before["reserved"],
        before["reserved_under"],
    )
    assert _upper_bound(owned) == bound


def test_a_give_back_waited_for_by_the_write_is_counted_once(
    owned: Any, postgres_store_url: str
) -> None:
    """A write past the reservation waits for a give-back holding its header: one reservation, not two.

    The reservation is made after the row's update (an AFTER trigger), on the row as the
    give-back left it: a check in the SET list would run again when PostgreSQL re-reads
    a row another transaction changed meanwhile (decision 0189).
    """
    before = _header(owned)
    used = before["bytes"] + before["log_bytes"]
    with psycopg.connect(postgres_store_url) as giver:
        # the owner's other writes give the buffer's slack back and hold its header
        giver.execute("SELECT flowmem_give_back('alice', NULL)")
        assert _header(giver)["reserved"] == used
        done = threading.Event()
        failed: list[BaseException] = []

        def write() -> None:
            try:
                _write(owned, "header_update", 1000)  # past the reservation the giver left
            except BaseException as exc:  # pragma: no cover - reported below
                failed.append(exc)
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.5)
        assert not done.is_set()  # waiting for the giver's row lock
        giver.commit()
        writer.join(10)
    assert not failed
    after = _header(owned)
    grown = used + 1000
    assert after["reserved"] == grown + max(16384, grown // 8)
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        others = conn.execute(
            "SELECT COALESCE(SUM(octet_length(value)), 0) FROM records WHERE owner = 'alice'"
        ).fetchone()
    assert others is not None
    assert _upper_bound(owned) == int(others[0]) + after["reserved"]


def test_an_upgrade_from_32_keeps_the_reservations_and_checks_inside_and_past_them(
    postgres_db_url: str,
) -> None:
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute(PostgresStore.SQL["schema_table"])
        for number, statements in enumerate(MIGRATIONS[:32], start=1):
            for statement in statements:
                conn.execute(statement)
            conn.execute(PostgresStore.SQL["schema_insert"], (number, time.time()))
        _quota(conn, str(Quotas().bytes))
        for key, size in (("inside", 300), ("edge", 300)):
            bid = conn.execute(
                "INSERT INTO buffers (scope, scope_id, key) VALUES ('user', 'alice', %s) RETURNING id",
                (key,),
            ).fetchone()[0]
            body = '{"role":"user","content":"' + "x" * (size - 27) + '"}'
            conn.execute(
                "INSERT INTO buffer_rows (buffer_id, pos, role, body, tokens) VALUES (%s, 1, 'user', %s, 1)",
                (bid, body),
            )
            # migration 30's trigger reserves it: 16 KiB of slack over 300 bytes
            conn.execute(
                "UPDATE buffers SET bytes = %s, count = 1, last_major = 1 WHERE id = %s",
                (size, bid),
            )
        # the edge buffer's reservation used up to a byte (as a give-back would leave it)
        conn.execute(
            "UPDATE user_usage SET bytes = bytes - (SELECT reserved - 301 FROM buffers WHERE key = 'edge')"
        )
        conn.execute("UPDATE buffers SET reserved = 301 WHERE key = 'edge'")
        before = conn.execute(
            "SELECT key, reserved, reserved_under FROM buffers ORDER BY key"
        ).fetchall()
        bound = conn.execute("SELECT bytes FROM user_usage WHERE user_id = 'alice'").fetchone()
    assert before == [
        ("edge", 301, str(Quotas().bytes)),
        ("inside", 300 + 16384, str(Quotas().bytes)),
    ]
    assert bound == (301 + 300 + 16384,)
    store = PostgresStore(postgres_db_url)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert (
                conn.execute(
                    "SELECT key, reserved, reserved_under FROM buffers ORDER BY key"
                ).fetchall()
                == before
            )
            assert (
                conn.execute("SELECT bytes FROM user_usage WHERE user_id = 'alice'").fetchone()
                == bound
            )
            source = conn.execute(
                "SELECT prosrc FROM pg_proc WHERE proname = 'flowmem_buffer_reserve'"
            ).fetchone()
            assert source is not None and source[0].lstrip().startswith("BEGIN")  # the first test
        assert store.usage("alice").bytes == 600
        inside, edge = Address("user", "alice", "inside"), Address("user", "alice", "edge")
        grow(store, inside, "inside its reservation")
        grow(store, edge, "past its reservation")
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            reserved = dict(  # the bytes as derived (an append inside the room writes no header)
                conn.execute(f"SELECT key, reserved - bytes FROM {HEADS} AS b").fetchall()
            )
            bound_after = conn.execute(
                "SELECT bytes FROM user_usage WHERE user_id = 'alice'"
            ).fetchone()
        assert (
            reserved["inside"] < 16384 and reserved["edge"] == 16384
        )  # only the edge reserved again
        used = store.usage("alice").bytes
        assert (
            bound_after is not None
            and bound_after[0] == used + reserved["inside"] + reserved["edge"]
        )
        store.set_quotas(Quotas(bytes=used + 5))  # inside both reservations, over the quota
        for address in (inside, edge):
            with pytest.raises(QuotaExceededError):
                grow(store, address, "more than five bytes")
        assert store.usage("alice").bytes == used
    finally:
        store.close()


STEP = st.tuples(st.sampled_from(["grow", "grow", "shrink", "quota"]), st.integers(0, 40_000))


def _steps(conn: Any, key: str, steps: list[tuple[str, int]]) -> list[tuple[Any, ...]]:
    """Run ``steps`` on ``key``'s header (grow or shrink its bytes, set the quota); what each leaves."""
    seen: list[tuple[Any, ...]] = []
    bid = conn.execute(
        "INSERT INTO buffers (scope, scope_id, key) VALUES ('user', %s, 'chat') RETURNING id",
        (key,),
    ).fetchone()[0]
    _quota(conn, str(Quotas().bytes))
    for kind, size in steps:
        refused = False
        if kind == "quota":
            _quota(conn, "" if size % 7 == 0 else str(size * 4))
        else:
            grown = size if kind == "grow" else -size
            try:
                with conn.transaction():
                    conn.execute(
                        "UPDATE buffers SET bytes = GREATEST(bytes + %s, 0) WHERE id = %s",
                        (grown, bid),
                    )
            except psycopg.errors.RaiseException:
                refused = True
        state = conn.execute(
            """SELECT b.bytes, b.reserved, b.reserved_under, u.bytes FROM buffers AS b
            JOIN user_usage AS u ON u.user_id = b.owner WHERE b.id = %s""",
            (bid,),
        ).fetchone()
        seen.append((refused, *state))
    return seen


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(STEP, max_size=12))
def test_the_first_test_leaves_what_migration_30s_function_leaves(
    postgres_store_url: str, steps: list[tuple[str, int]]
) -> None:
    """Migration 33's function (its first test, then migration 30's block) against migration 30's own."""
    found = {}
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        for name, function in (("gated", GATED[1]), ("first", FIRST_TEST[0])):
            conn.execute(function)
            found[name] = _steps(conn, f"{name}-{uuid.uuid4().hex[:8]}", steps)
    assert found["first"] == found["gated"]
