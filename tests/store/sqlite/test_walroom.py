"""Room made ahead in the WAL (decision 0154): the same data as the plain store, and what a crash leaves.

``SqliteStore.wal_room`` is the seam: ``enabled=False`` is the plain version, which
lets SQLite grow the log at every commit. The sizes are made small here
(``BUSY``, ``CHUNK``) so a few appends cross them. Since decision 0169 room is made
from a store's first write, ``FIRST`` bytes then twice the last room up to ``CHUNK``.
"""

from __future__ import annotations

import gc
import os
import random
import sqlite3
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from flowmem.core import prepare
from flowmem.store import Address, open_store
from flowmem.store.sqlite import SqliteStore, walroom
from flowmem.store.sqlite.walroom import WalRoom
from tests.store.killed import kill_a_writer

KEY = Address("session", "s1", "chat")


def _turn(i: int) -> dict[str, object]:
    """A conversation's i-th message: question, call, result, answer, and now and then an unanswered call."""
    cid = f"call_{i // 4}"
    kind = i % 4
    if kind == 0:
        return {"role": "user", "content": f"question {i} " + "x" * (i % 300)}
    if kind == 1:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    if kind == 2 and i % 7 == 0:  # left unanswered: the next question heals it (MEM-3)
        return {"role": "assistant", "content": f"no result for {cid}"}
    if kind == 2:
        return {"role": "tool", "content": f"result {i}", "tool_call_id": cid}
    return {"role": "assistant", "content": f"answer {i}"}


@pytest.fixture
def small_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """Room made once the log holds 64 KiB, 256 KiB at a time (about 20 appends)."""
    monkeypatch.setattr(walroom, "BUSY", 64 * 1024)
    monkeypatch.setattr(walroom, "CHUNK", 256 * 1024)


def _wal_sizes(store: SqliteStore, count: int, start: int = 0) -> int:
    """Append ``count`` messages one at a time; how many of them changed the WAL file's size."""
    wal = f"{store.path}-wal"
    changed, size = 0, os.path.getsize(wal)
    for i in range(start, start + count):
        store.append(KEY, prepare(_turn(i), 1_755_000_000 + i))
        now = os.path.getsize(wal)
        changed += now != size
        size = now
    return changed


def _integrity(path: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.usefixtures("small_room")
def test_appends_with_room_made_store_what_the_plain_store_stores(tmp_path: Path) -> None:
    made, plain = (
        open_store(f"sqlite:///{tmp_path}/made.db"),
        open_store(f"sqlite:///{tmp_path}/plain.db"),
    )
    assert isinstance(made, SqliteStore) and isinstance(plain, SqliteStore)
    plain.wal_room.enabled = False
    try:
        for store in (made, plain):
            store.append(KEY, prepare([_turn(i) for i in range(40)], 1_755_000_000))
        grew_made, grew_plain = _wal_sizes(made, 300, 40), _wal_sizes(plain, 300, 40)
        assert made.load(KEY) == plain.load(KEY)
        assert made.count(KEY) == plain.count(KEY) > 300
        assert made.wal_room.made > 0 and plain.wal_room.made == 0
        # the plain log grows at every commit; with room made, about once a chunk
        assert grew_plain == 300
        assert grew_made < 300 // 4
    finally:
        made.close()
        plain.close()
    for name in ("made", "plain"):
        assert _integrity(f"{tmp_path}/{name}.db") == "ok"


def _append_and_say(url: str, pipe: Connection) -> None:
    """A writer: room made early, each committed message sent on ``pipe`` (killed by the parent)."""
    walroom.BUSY, walroom.CHUNK = 16 * 1024, 16 * 1024
    store = open_store(url)
    i = 0
    while True:
        store.append(KEY, prepare(_turn(i), 1_755_000_000 + i))
        pipe.send(i)
        i += 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_writer_killed_in_the_room_it_made_loses_no_committed_append(
    tmp_path: Path, seed: int
) -> None:
    url = f"sqlite:///{tmp_path}/killed.db"
    open_store(url).close()
    said = kill_a_writer(_append_and_say, (url,), random.Random(seed), 0.6, first=True)
    assert said, "the writer committed nothing before it was killed"
    wal = Path(f"{tmp_path}/killed.db-wal")
    assert wal.stat().st_size > 16 * 1024  # the log the kill left, zeros past its frames
    store = open_store(url)  # SQLite recovers the log: its frames, up to the first zero one
    try:
        rows = store.load(KEY)
        expected = [prepare(_turn(i), 1_755_000_000 + i)[0]["content"] for i in said]
        stored = [row["content"] for row in rows if not row.get("metadata", {}).get("healed")]
        assert stored[: len(expected)] == expected
        assert len(stored) <= len(expected) + 1  # at most the one committed before it was said
    finally:
        store.close()
    assert _integrity(f"{tmp_path}/killed.db") == "ok"


def test_room_is_made_only_past_the_files_end_and_up_to_the_limit(tmp_path: Path) -> None:
    wal = tmp_path / "x.db-wal"
    body = os.urandom(walroom.BUSY + 100)
    wal.write_bytes(body)
    room = WalRoom(str(tmp_path / "x.db"), enabled=True, frames=1000)
    assert room.make() == walroom.FIRST
    after = wal.read_bytes()
    assert after[: len(body)] == body
    assert after[len(body) :] == bytes(walroom.FIRST)
    assert room.make() == 0  # the room is not used up: nothing more
    with wal.open("ab") as grown:  # SQLite wrote past the room's end
        grown.write(b"f" * 10)
    assert room.make() == 2 * walroom.FIRST  # each room twice the last (decision 0169)
    assert wal.read_bytes()[: len(after) + 10] == after + b"f" * 10
    assert room.made == 2
    near = tmp_path / "y.db-wal"  # a log one chunk short of the limit: room up to the limit only
    last = WalRoom(str(tmp_path / "y.db"), enabled=True, frames=1000)
    near.write_bytes(bytes(last.limit - 100))
    assert last.make() == 100
    assert near.stat().st_size == last.limit


def test_a_short_log_and_a_log_at_its_checkpoint_size_get_no_room(tmp_path: Path) -> None:
    wal = tmp_path / "x.db-wal"
    room = WalRoom(str(tmp_path / "x.db"), enabled=True, frames=1000)
    assert room.make() == 0  # no log yet
    wal.write_bytes(bytes(walroom.BUSY - 1))
    assert room.make() == 0
    wal.write_bytes(bytes(room.limit))
    assert room.make() == 0
    assert room.made == 0


def test_room_is_made_again_after_the_log_was_truncated(tmp_path: Path) -> None:
    wal = tmp_path / "x.db-wal"
    wal.write_bytes(bytes(walroom.BUSY))
    room = WalRoom(str(tmp_path / "x.db"), enabled=True, frames=1000)
    assert room.make() > 0
    wal.write_bytes(b"")  # wal_checkpoint(TRUNCATE), or the log deleted at the last close
    assert room.make() == 0
    wal.write_bytes(bytes(walroom.BUSY + 1))
    assert room.make() == walroom.FIRST  # a new log's room starts small again
    assert room.made == 2


def test_rooms_double_up_to_a_chunk(tmp_path: Path) -> None:
    wal = tmp_path / "x.db-wal"
    wal.write_bytes(bytes(walroom.BUSY))
    room = WalRoom(str(tmp_path / "x.db"), enabled=True, frames=100_000)
    made = []
    for _ in range(7):
        made.append(room.make())
        with wal.open("ab") as grown:  # SQLite wrote past each room's end
            grown.write(b"f")
    first = walroom.FIRST
    assert made == [first, 2 * first, 4 * first, 8 * first] + [walroom.CHUNK] * 3


def test_the_next_room_is_made_once_frames_reach_the_middle_of_the_last(tmp_path: Path) -> None:
    wal = tmp_path / "x.db-wal"
    wal.write_bytes(bytes(walroom.BUSY))
    room = WalRoom(str(tmp_path / "x.db"), enabled=True, frames=100_000)
    assert room.make() == walroom.FIRST
    end = wal.stat().st_size
    frame = 4096 + walroom.FRAME_HEADER
    middle = walroom.BUSY + walroom.FIRST // 2
    with wal.open("r+b") as log:  # SQLite's frames written into the room, short of its middle
        log.seek(walroom.WAL_HEADER + (middle - walroom.WAL_HEADER) // frame * frame)
        log.write((7).to_bytes(4, "big") + b"f" * 20)
    assert room.make() == 0
    assert wal.stat().st_size == end
    with wal.open("r+b") as log:  # a frame at or past the middle: the next room, before the end
        log.seek(walroom.WAL_HEADER + -(-(middle - walroom.WAL_HEADER) // frame) * frame)
        log.write((8).to_bytes(4, "big") + b"f" * 20)
    assert room.make() == 2 * walroom.FIRST
    assert wal.stat().st_size == end + 2 * walroom.FIRST
    room.close()


def test_the_logs_descriptor_kept_for_the_probe_is_closed_with_the_room(tmp_path: Path) -> None:
    wal = tmp_path / "x.db-wal"
    wal.write_bytes(bytes(walroom.BUSY))
    closed = WalRoom(str(tmp_path / "x.db"), enabled=True, frames=1000)
    assert closed.make() > 0
    kept = closed._fd
    os.fstat(kept)  # open
    closed.close()
    with pytest.raises(OSError):
        os.fstat(kept)
    dropped = WalRoom(str(tmp_path / "x.db"), enabled=True, frames=1000)
    assert dropped.make() > 0
    kept = dropped._fd
    del dropped  # a store never closed: its room's descriptor goes with it
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(kept)


def test_a_fresh_stores_log_changes_size_about_once_a_room(tmp_path: Path) -> None:
    """Decision 0169: room from the first write, doubling, the next made at the last's middle.

    With decision 0154's threshold (no room below 512 KiB) a fresh store's log, about
    290 KiB after its migrations, grew at every commit until it passed 512 KiB: 30 of
    120 appends changed its size. Then made from the first write, but only after a
    commit had grown the file past the room: twice a room (9). Now once a room.
    """
    store = open_store(f"sqlite:///{tmp_path}/fresh.db")
    try:
        assert isinstance(store, SqliteStore)
        changed = _wal_sizes(store, 120)
        assert changed <= 7
        assert store.wal_room.made >= 3
        assert changed <= store.wal_room.made + 1
    finally:
        store.close()
    assert _integrity(f"{tmp_path}/fresh.db") == "ok"


@pytest.mark.parametrize(
    ("synchronous", "made"), [("FULL", True), ("EXTRA", True), ("NORMAL", False), ("OFF", False)]
)
def test_room_is_made_only_where_commits_fsync(
    tmp_path: Path, synchronous: str, made: bool
) -> None:
    store = open_store(f"sqlite:///{tmp_path}/x.db?synchronous={synchronous}")
    try:
        assert isinstance(store, SqliteStore)
        assert store.wal_room.enabled is made
    finally:
        store.close()


@pytest.mark.usefixtures("small_room")
def test_deferred_writes_make_room_and_the_shared_sync_covers_it(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/deferred.db")
    plain = open_store(f"sqlite:///{tmp_path}/plain.db")
    assert isinstance(store, SqliteStore) and isinstance(plain, SqliteStore)
    plain.wal_room.enabled = False
    try:
        with store.deferred():  # the HTTP app's writes: committed without their own fsync
            for i in range(200):
                store.append(KEY, prepare(_turn(i), 1_755_000_000 + i))
        for i in range(200):
            plain.append(KEY, prepare(_turn(i), 1_755_000_000 + i))
        assert store.sync_barrier() is not None
        store.sync()
        assert store.sync_barrier() is None
        assert store.wal_room.made > 0
        assert store.load(KEY) == plain.load(KEY)
    finally:
        store.close()
        plain.close()
    assert _integrity(f"{tmp_path}/deferred.db") == "ok"
