"""Round trips and statements per PostgreSQL append, counted (docs/performance.md).

Statements are counted from the server's own statement log (``log_statement=all``
for the store's one connection, lines of its backend pid); round trips are the
times the client blocked reading the server's answer (psycopg's wait for a
readable socket). Each kind of append must stay within the documented numbers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.store import Address, SessionRecord, WriteGuard

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.store.round_trips import count_round_trips  # noqa: E402

# The documented numbers (docs/performance.md, "Round trips per append"): an append
# to an existing buffer, the message alone, with known buffers off (``known_buffers=0``):
DOCUMENTED = {
    # kind: (round trips, statements)
    "plain user message": (2, 3),
    "assistant turn with two calls": (2, 4),
    "tool result": (2, 3),
    # + 1: the repair log's insert goes with the row writes, its trim with the header
    # (issue 37 §2), in the same round trip
    "user turn that heals one call": (2, 5),
}
# On what the store knows of the buffer from its own last append (decision 0039),
# guarded (the HTTP API's appends, decision 0067) or not: the lock (with the guard),
# then the facts' check and the writes in one statement (decision 0165; a later write
# of the same table in a statement of its own), one round trip; what the next append may assume
# is worked out from the writes (decision 0066). Healing needs the open calls'
# positions: two, as above, plus the read for the next append.
DOCUMENTED_KNOWN = {
    "plain user message": (1, 2),
    "assistant turn with two calls": (1, 3),
    "tool result": (1, 2),
    "user turn that heals one call": (2, 6),  # + 1: the repair log (as above)
}

CALLS = [
    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}},
]
MESSAGES = {
    "plain user message": {"role": "user", "content": "hello"},
    "assistant turn with two calls": {"role": "assistant", "content": "", "tool_calls": CALLS},
    "tool result": {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
    "user turn that heals one call": {"role": "user", "content": "and then?"},
}


class Counted:
    """A one-connection ``PostgresStore`` logging its statements; counts both measures."""

    def __init__(self, url: str, log: Path, known: bool = True) -> None:
        logged = url.replace("options=", "options=-clog_statement%3Dall%20", 1)
        off = "" if known else "&known_buffers=0"
        self.store = PostgresStore(f"{logged}&pool_min=1&pool_max=1{off}")
        self.log = log
        self.reads = 0
        with self.store._connection() as conn:
            self.pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            self._count_reads(conn)

    def _count_reads(self, conn: Any) -> None:
        """Count the waits that blocked on reading the server's answer (one per round trip)."""
        count_round_trips(conn, self._one_more)

    def _one_more(self) -> None:
        self.reads += 1

    def measure(self, work: Callable[[], object]) -> tuple[int, list[str]]:
        """Run ``work``; return its round trips and the statements the server logged for it."""
        marker = f"flowmem-marker-{uuid.uuid4().hex}"
        start = self.log.stat().st_size
        self.reads = 0
        work()
        trips = self.reads
        with self.store._connection() as conn:
            conn.execute(f"SELECT '{marker}'")
        deadline = time.monotonic() + 10
        while True:
            with self.log.open("rb") as handle:
                handle.seek(start)
                text = handle.read().decode("utf-8", "replace")
            if marker in text or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        entries: list[str] = []  # a statement's later lines continue its entry
        for line in text.splitlines():
            if line[:1].isspace() and entries:
                entries[-1] += " " + line.strip()
            else:
                entries.append(line)
        mine = f"[{self.pid}] LOG:"
        statements = [
            entry.split("LOG:", 1)[1].strip()
            for entry in entries
            if mine in entry and ("execute" in entry or "statement:" in entry)
        ]
        return trips, [s for s in statements if marker not in s]


@pytest.fixture(params=["known", "unknown"])
def counted(postgres_store_url: str, request: pytest.FixtureRequest) -> Iterator[Counted]:
    """A counted store on a fresh schema of the test server (known buffers on, then off)."""
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        data = Path(conn.execute("SHOW data_directory").fetchone()[0])
    log = data.parent / "server.log"  # where tests/conftest.py starts the server logging
    if not log.exists():
        pytest.skip(f"no server log at {log}")
    made = Counted(postgres_store_url, log, known=request.param == "known")
    try:
        yield made
    finally:
        made.store.close()


def _each_kind(counted: Counted, guard: WriteGuard | None) -> dict[str, tuple[int, list[str]]]:
    key = Address("session", "s1", "chat")
    counted.store.append(key, prepare({"role": "user", "content": "first"}, 1), guard=guard)
    found = {}
    for kind, message in MESSAGES.items():
        rows = prepare(message, 2)
        found[kind] = counted.measure(lambda rows=rows: counted.store.append(key, rows, guard=guard))
    assert [m["role"] for m in counted.store.load(key)] == [
        "user",
        "user",
        "assistant",
        "tool",
        "tool",  # c2 healed right after c1's result
        "user",
    ]
    return found


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
def test_append_round_trips_stay_within_the_documented_numbers(
    counted: Counted, guarded: bool
) -> None:
    """Every kind of append makes at most the documented round trips and statements."""
    guard = None
    if guarded:
        from flowmem.auth import create_token

        counted.store.create_session(SessionRecord("s1", "s1", "u1"))
        _, token = create_token(counted.store, "u1")
        guard = WriteGuard(token.id, "s1")
    found = _each_kind(counted, guard)
    known = counted.store._known.size > 0
    for kind, (trips, statements) in found.items():
        most_trips, most_statements = (DOCUMENTED_KNOWN if known else DOCUMENTED)[kind]
        assert trips <= most_trips, (kind, trips, statements)
        assert len(statements) <= most_statements, (kind, statements)
        # one implicit transaction (committed at the pipeline's Sync, decision 0028):
        # the lock first, no BEGIN/COMMIT statements
        assert "pg_advisory_xact_lock" in statements[0], statements
        assert not any(s.endswith(("BEGIN", "COMMIT")) for s in statements), statements
    # no statement of its own: the lock holds the guard's keys, the next statement
    # checks it under them (decisions 0014, 0127); no row of tokens or sessions locked
    lock, check = found["plain user message"][1][:2]
    assert "pg_advisory_xact_lock" in lock
    assert ("pg_advisory_xact_lock_shared" in lock) is guarded
    assert "FROM tokens" not in lock and ("FROM tokens" in check) is guarded
    assert not any("FOR SHARE" in s or "FOR KEY SHARE" in s for _, stated in found.values() for s in stated)
