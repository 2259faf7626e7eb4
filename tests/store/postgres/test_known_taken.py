"""MEM-12 with headers left unwritten (decision 0195): the rows' key is the known check's last word.

An append on known facts checks the header as stored; another writer's plain append
leaves it unwritten, so that check holds, but the other row holds the position this
append's first row takes: ``buffer_rows_pkey`` refuses it, nothing is written, and the
append runs again on the facts it reads (``store._taken``), not an error. Two writers
on one buffer never both append at one position nor lose a row.
"""

from __future__ import annotations

import threading

import pytest

from flowmem.core import prepare
from flowmem.store import Address
from flowmem.store.headers import HEADS

pytestmark = pytest.mark.postgres

pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402


def _user(text: str) -> list[dict[str, object]]:
    return prepare({"role": "user", "content": text}, 1)


def _stored_version(store: PostgresStore, address: Address) -> int:
    with store._connection() as conn:
        found = conn.execute(
            "SELECT version FROM buffers WHERE scope = %s AND scope_id = %s AND key = %s",
            tuple(address),
        ).fetchone()
    assert found is not None
    return int(found[0])


def test_mem_12_a_position_taken_since_the_known_facts_sends_the_append_to_the_facts_path(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two
    address = Address("global", "", "taken")
    first.append(address, _user("one"))
    first.append(address, _user("two"))  # on known facts
    known = first._known.get(address)
    assert known is not None and known.tail_rows > 0  # the header left unwritten
    version = _stored_version(first, address)
    second.append(address, _user("three"))  # another writer: its row past the same header
    assert _stored_version(first, address) == version  # the check on the stored header holds
    got = first.append(address, _user("four"))  # its known position is taken: the facts path
    assert (got.appended, got.count) == (1, 4)
    assert [row["content"] for row in first.load(address)] == ["one", "two", "three", "four"]
    assert first._known.get(address) is not None  # known again, from the facts it read
    assert first.count(address) == second.count(address) == 4


def test_mem_12_two_writers_appending_at_once_lose_no_row(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    address = Address("global", "", "at-once")
    errors: list[BaseException] = []

    def write(store: PostgresStore, who: str) -> None:
        try:
            for n in range(40):
                store.append(address, _user(f"{who}{n}"))
        except BaseException as exc:  # pragma: no cover - the assertion below says what
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(store, who))
        for store, who in zip(two, "ab", strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    texts = [str(row["content"]) for row in two[0].load(address)]
    assert len(texts) == 80 == two[1].count(address)
    for who in "ab":  # each writer's rows in its order
        assert [t for t in texts if t.startswith(who)] == [f"{who}{n}" for n in range(40)]
    with two[0]._connection() as conn:
        found = conn.execute(
            f"SELECT count, last_major FROM {HEADS} AS b WHERE key = %s", (address.key,)
        ).fetchone()
    assert found == (80, 80)
