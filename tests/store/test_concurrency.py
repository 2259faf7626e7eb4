"""MEM-12 on the SQL backends: threads, processes, readers, lock timeouts, crashes."""

from __future__ import annotations

import logging
import multiprocessing
import random
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import call_ids, prepare, result_id
from flowmem.errors import NotSerializableError, StoreLockedError
from flowmem.store import Address, Store, open_store
from flowmem.store.postgres import advisory_key
from tests.store.killed import kill_a_writer

KEY = Address("session", "s1", "chat")


@contextmanager
def held_by_another_thread(store: Store, address: Address) -> Iterator[None]:
    """For the block, another thread of this process holds ``address``'s in-process lock."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._locks.hold(address, 5.0):  # type: ignore[attr-defined]
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        yield
    finally:
        release.set()
        holder.join(10)
FORK = multiprocessing.get_context("fork")


def _script(worker: int, steps: int) -> list[dict[str, Any]]:
    """One worker's appends: call, its result, the same result again, a user turn."""
    out: list[dict[str, Any]] = []
    for j in range(steps):
        cid = f"w{worker}-c{j // 4}"
        kind = j % 4
        if kind == 0:
            out.append({"role": "assistant", "content": "", "tool_calls": [{"id": cid}]})
        elif kind in (1, 2):
            out.append({"role": "tool", "content": f"result {cid}", "tool_call_id": cid})
        else:
            out.append({"role": "user", "content": f"w{worker} says {j}"})
    return out


def _run_script(url: str, worker: int, steps: int) -> None:
    store = open_store(url)
    try:
        for message in _script(worker, steps):
            store.append(KEY, prepare(message, 1))
    finally:
        store.close()


def _check_whole(rows: list[dict[str, Any]], workers: int, steps: int) -> None:
    """Every distinct message exactly once, no result duplicated, nothing dangling."""
    declared = Counter(cid for row in rows for cid in call_ids(row))
    answered = Counter(rid for row in rows if (rid := result_id(row)) is not None)
    users = Counter(row["content"] for row in rows if row["role"] == "user")
    calls = {f"w{w}-c{j}" for w in range(workers) for j in range(steps // 4)}
    assert set(declared) == calls and set(declared.values()) == {1}
    assert set(answered) == calls and set(answered.values()) == {1}
    healed = [row for row in rows if row["metadata"].get("healed")]
    assert healed == []  # every placeholder was replaced by its real result (MEM-10)
    expected_users = {f"w{w} says {j}" for w in range(workers) for j in range(3, steps, 4)}
    assert set(users) - {"final"} == expected_users and set(users.values()) == {1}
    assert len(rows) == 3 * len(calls) + 1


@pytest.mark.slow
def test_mem_12_eight_threads_one_key(store: Store) -> None:
    workers, steps = 8, 200
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for message in _script(worker, steps):
                store.append(KEY, prepare(message, 1))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    store.append(KEY, prepare({"role": "user", "content": "final"}, 1))
    rows = store.load(KEY)
    _check_whole(rows, workers, steps)
    assert store.count(KEY) == len(rows)


@pytest.mark.slow
def test_mem_12_four_processes_one_key(sql_store_url: str) -> None:
    workers, steps = 4, 200
    open_store(sql_store_url).close()  # schema first, so the children only append
    children = [FORK.Process(target=_run_script, args=(sql_store_url, w, steps)) for w in range(workers)]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
    assert [child.exitcode for child in children] == [0] * workers
    store = open_store(sql_store_url)
    try:
        store.append(KEY, prepare({"role": "user", "content": "final"}, 1))
        rows = store.load(KEY)
        _check_whole(rows, workers, steps)
        assert store.count(KEY) == len(rows)
    finally:
        store.close()


@pytest.mark.slow
def test_mem_12_readers_never_see_a_partial_append(sql_store_url: str) -> None:
    """Each append is one three-row batch; every load shows whole batches only."""
    store = open_store(sql_store_url)
    keys = [Address("user", "1", "a"), Address("user", "2", "b")]
    done = threading.Event()
    problems: list[str] = []
    loads = Counter[str]()

    def write(key: Address, tag: str) -> None:
        try:
            for i in range(40):
                cid = f"{tag}{i}"
                batch = [
                    {"role": "assistant", "content": "", "tool_calls": [{"id": cid}]},
                    {"role": "tool", "content": "r", "tool_call_id": cid},
                    {"role": "user", "content": f"u{cid}"},
                ]
                store.append(key, prepare(batch, 1))
                store.put_record(Address("user", "9", tag), i, None)
        except BaseException as exc:
            problems.append(repr(exc))

    def read(key: Address) -> None:
        while not done.wait(0.002):
            rows = store.load(key)
            loads[key.key] += 1
            if len(rows) % 3:
                problems.append(f"partial append seen: {len(rows)} rows")
            for i in range(0, len(rows), 3):
                ids = call_ids(rows[i]), result_id(rows[i + 1]), rows[i + 2]["content"]
                if ids != ([ids[1]], ids[1], f"u{ids[1]}"):
                    problems.append(f"torn batch at {i}: {ids}")

    writers = [threading.Thread(target=write, args=(k, t)) for k, t in zip(keys, "ab", strict=True)]
    readers = [threading.Thread(target=read, args=(k,)) for k in keys for _ in range(2)]
    try:
        for thread in readers + writers:
            thread.start()
        for thread in writers:
            thread.join()
        done.set()
        for thread in readers:
            thread.join()
        assert problems == []
        assert all(loads[k.key] > 0 for k in keys)
        assert [store.count(k) for k in keys] == [120, 120]
    finally:
        done.set()
        store.close()


# --- the bounded wait ---------------------------------------------------------------------------


def _hold_sqlite_lock(path: str, ready: Any, release: Any, seconds: float) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    ready.set()
    release.wait(seconds)
    conn.execute("COMMIT")
    conn.close()


def _hold_pg_lock(url: str, key: int, ready: Any, release: Any, seconds: float) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        ready.set()
        release.wait(seconds)
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """MEM-12's warnings (a test server's durability warnings at open are not about the lock)."""
    return [
        r
        for r in caplog.records
        if r.name == "flowmem" and r.levelno == logging.WARNING and "unserialized" in r.msg
    ]


def _append_past_held_lock(
    store: Store, caplog: pytest.LogCaptureFixture, upper: float = float("inf")
) -> None:
    """Append to KEY while another holder keeps it locked: wait the bound, warn once, go on."""
    caplog.set_level(logging.WARNING, logger="flowmem")
    started = time.monotonic()
    outcome = store.append(KEY, prepare({"role": "user", "content": "hi"}, 1), lock_timeout=0.2)
    waited = time.monotonic() - started
    assert (outcome.appended, outcome.count) == (1, 1)
    assert 0.19 <= waited < upper  # waited its bound, then went ahead while the lock was held
    assert len(_warnings(caplog)) == 1


def _append_again_without_warning(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """Once the holder let go, the next append to KEY takes the lock at once: no warning."""
    caplog.clear()
    store.append(KEY, prepare({"role": "user", "content": "again"}, 1), lock_timeout=0.05)
    assert _warnings(caplog) == []


def _sqlite_lock_is_free(path: str) -> bool:
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def _pg_lock_is_free(url: str, key: int) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if row and row[0]:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return True
        return False


@pytest.mark.slow
def test_mem_12_sqlite_file_locked_by_another_process_is_refused_within_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24 §4: the file's own write lock, held outside the queue past the bound.

    The append's turn was free, so nothing serializes it any longer: what it lacks is
    the storage's lock, without which nothing can be written. It is refused
    ``StoreLockedError`` once the bound has passed (it waited 60 s more before), and
    nothing is written; the next append, once the holder let go, goes at once.
    """
    path = str(tmp_path / "store.db")
    open_store(f"sqlite:///{path}").close()
    ready, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold_sqlite_lock, args=(path, ready, release, 30.0))
    holder.start()
    store = open_store(f"sqlite:///{path}")
    caplog.set_level(logging.WARNING, logger="flowmem")
    try:
        assert ready.wait(30)
        started = time.monotonic()
        with pytest.raises(StoreLockedError, match="another process") as refused:
            store.append(KEY, prepare({"role": "user", "content": "hi"}, 1), lock_timeout=0.3)
        waited = time.monotonic() - started
        assert refused.value.code == "store_locked"
        assert 0.29 <= waited < 3.0, waited  # the bound, not the holder's 30 s
        # an unserialized append (the address held in process past the bound) is bounded too
        with store._locks.hold(KEY, 5.0):  # type: ignore[attr-defined]
            done: list[BaseException] = []

            def late() -> None:
                try:
                    store.append(KEY, prepare({"role": "user", "content": "x"}, 1), lock_timeout=0.3)
                except BaseException as exc:  # surfaced below
                    done.append(exc)

            other = threading.Thread(target=late)
            started = time.monotonic()
            other.start()
            other.join(20)
            assert 0.59 <= time.monotonic() - started < 5.0
        assert [type(e) for e in done] == [StoreLockedError]
    finally:
        release.set()
        holder.join(30)
    assert holder.exitcode == 0
    assert store.load(KEY) == []  # nothing was written
    assert _sqlite_lock_is_free(path)
    _append_again_without_warning(store, caplog)
    store.close()


@pytest.mark.slow
@pytest.mark.postgres
def test_mem_12_postgres_lock_timeout_proceeds_warns_once_and_releases(
    postgres_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    store = open_store(postgres_store_url)
    ready, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(
        target=_hold_pg_lock, args=(postgres_store_url, advisory_key(KEY), ready, release, 30.0)
    )
    holder.start()
    try:
        assert ready.wait(30)
        _append_past_held_lock(store, caplog, upper=10)
        # another key is not held up by the held lock at all
        caplog.clear()
        other = Address("session", "s2", "chat")
        store.append(other, prepare({"role": "user", "content": "x"}, 1), lock_timeout=0.2)
        assert _warnings(caplog) == []
        # the only advisory lock left is the holder's: the appends kept none
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            held = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            ).fetchone()
        assert held == (1,)
    finally:
        release.set()
        holder.join(30)
    assert holder.exitcode == 0
    assert [r["content"] for r in store.load(KEY)] == ["hi"]
    assert _pg_lock_is_free(postgres_store_url, advisory_key(KEY))
    _append_again_without_warning(store, caplog)
    store.close()


def test_mem_12_lock_released_when_append_raises(
    store: Store, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    store.append(KEY, prepare({"role": "user", "content": "keep"}, 1))
    bad = [{"role": "user", "content": "x", "metadata": {"bad": object()}}]
    for _ in range(3):
        with pytest.raises(NotSerializableError):
            store.append(KEY, bad, lock_timeout=0.05)
    caplog.set_level(logging.WARNING, logger="flowmem")
    outcome = store.append(KEY, prepare({"role": "user", "content": "next"}, 1), lock_timeout=0.05)
    assert (outcome.appended, outcome.count) == (1, 2)
    assert _warnings(caplog) == []
    url = store.url
    if url.startswith("sqlite"):
        assert _sqlite_lock_is_free(url.removeprefix("sqlite:///"))
    elif url.startswith("postgresql"):
        assert _pg_lock_is_free(url, advisory_key(KEY))


# --- crashes --------------------------------------------------------------------------------------


def _append_until_killed(path: str, round_no: int, pipe: Any) -> None:
    store = open_store(f"sqlite:///{path}")  # default durability: WAL + synchronous=FULL
    i = 0
    while True:
        cid = f"r{round_no}-c{i}"
        batch: list[dict[str, Any]] = [
            {"role": "assistant", "content": "", "tool_calls": [{"id": cid}, {"id": f"{cid}b"}]}
        ]
        store.append(KEY, prepare(batch, 1))
        pipe.send(("call", cid))
        if i % 3:
            store.append(KEY, prepare({"role": "tool", "content": "ok", "tool_call_id": cid}, 1))
            pipe.send(("result", cid))
        store.append(KEY, prepare({"role": "user", "content": f"u-{cid}"}, 1))
        pipe.send(("user", cid))
        i += 1


@pytest.mark.slow
def test_mem_12_sigkill_during_appends_loses_nothing_committed(tmp_path: Path) -> None:
    path = str(tmp_path / "crash.db")
    open_store(f"sqlite:///{path}").close()
    rng = random.Random(12)
    committed: list[tuple[str, str]] = []
    healed_rounds = 0
    for round_no in range(20):
        committed += kill_a_writer(_append_until_killed, (path, round_no), rng, 0.3)

        store = open_store(f"sqlite:///{path}")
        try:
            rows = store.load(KEY)
            declared = Counter(cid for row in rows for cid in call_ids(row))
            answered = Counter(rid for row in rows if (rid := result_id(row)) is not None)
            users = Counter(row["content"] for row in rows if row["role"] == "user")
            real = {
                rid for row in rows if (rid := result_id(row)) and not row["metadata"].get("healed")
            }
            for kind, cid in committed:
                if kind == "call":
                    assert declared[cid] == 1
                elif kind == "result":
                    assert answered[cid] == 1 and cid in real
                else:
                    assert users[f"u-{cid}"] == 1
            assert set(declared.values()) <= {1} and set(answered.values()) <= {1}
            assert store.count(KEY) == len(rows)
            # the next user turn heals whatever the kill left dangling (MEM-3)
            outcome = store.append(
                KEY, prepare({"role": "user", "content": f"after kill {round_no}"}, 1)
            )
            healed_rounds += outcome.count > len(rows) + 1
            rows = store.load(KEY)
            answered_now = {rid for row in rows if (rid := result_id(row)) is not None}
            assert {cid for row in rows for cid in call_ids(row)} <= answered_now
        finally:
            store.close()
    assert len({cid for kind, cid in committed if kind == "call"}) >= 20
    assert healed_rounds >= 1  # some kill did land between a call and its user turn


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_mem_12_in_process_lock_timeout_proceeds_warns_once(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another thread of the process holds the address: wait the bound, warn once, go on."""
    store = open_store("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 's.db'}")
    with held_by_another_thread(store, KEY):
        _append_past_held_lock(store, caplog, upper=5)
    _append_again_without_warning(store, caplog)
    assert [r["content"] for r in store.load(KEY)] == ["hi", "again"]
    store.close()
