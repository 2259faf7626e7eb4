"""Per-user quotas on every backend: bytes, buffers and records, counted in the write itself.

Issue 24 §3: one user stored 120 buffers of 1 MB in 3.9 s, with nothing to stop it.
The store counts each user's data (its ``user`` scope, the ``session`` scope of its
sessions) in the transaction that writes it, and refuses the write that would pass a
quota whole; across processes too (the SQL backends count in the database).
"""

from __future__ import annotations

import threading

import pytest

from flowmem.errors import QuotaExceededError
from flowmem.store import Address, SessionClaim, SessionRecord, Store, WriteGuard, open_store
from flowmem.store.base import Quotas, Usage
from flowmem.store.rows import dump_json, utf8_size


def _row(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _size(*rows: object) -> int:
    return sum(utf8_size(dump_json(row, "message")) for row in rows)


def test_a_write_past_the_bytes_quota_is_refused_whole(store: Store) -> None:
    store.set_quotas(Quotas(bytes=200, buffers=0, records=0))
    chat = Address("user", "alice", "chat")
    store.append(chat, [_row("a" * 50)])
    used = store.usage("alice")
    assert used == Usage(_size(_row("a" * 50)), 1, 0)
    with pytest.raises(QuotaExceededError) as refused:
        store.append(chat, [_row("b" * 100), _row("c" * 100)])
    assert (refused.value.code, refused.value.quota, refused.value.user) == (
        "quota_exceeded",
        "bytes",
        "alice",
    )
    assert "--max-user-bytes" in refused.value.message
    assert store.count(chat) == 1 and store.usage("alice") == used  # nothing written
    with pytest.raises(QuotaExceededError):
        store.put_record(Address("user", "alice", "note"), "x" * 200, None)
    assert store.get_record(Address("user", "alice", "note"), 0.0) == (False, None)
    store.put_record(Address("user", "alice", "note"), "small", None)  # fits
    assert store.usage("alice").records == 1


def test_the_buffers_and_records_quotas_refuse_a_new_one_only(store: Store) -> None:
    store.set_quotas(Quotas(bytes=0, buffers=2, records=1))
    for key in ("one", "two"):
        store.append(Address("user", "alice", key), [_row(key)])
    with pytest.raises(QuotaExceededError) as refused:
        store.append(Address("user", "alice", "three"), [_row("three")])
    assert refused.value.quota == "buffers" and "--max-user-buffers" in refused.value.message
    assert store.count(Address("user", "alice", "three")) == 0
    store.append(Address("user", "alice", "one"), [_row("more")])  # an existing buffer grows
    store.put_record(Address("user", "alice", "r1"), 1, None)
    store.put_record(Address("user", "alice", "r1"), 2, None)  # overwriting is not a new one
    with pytest.raises(QuotaExceededError) as refused:
        store.put_record(Address("user", "alice", "r2"), 1, None)
    assert refused.value.quota == "records"
    assert store.usage("alice") == Usage(store.usage("alice").bytes, 2, 1)
    store.append(Address("user", "bob", "one"), [_row("bob")])  # another user's own quota


def test_shrinking_is_never_refused_and_frees_the_quota(store: Store) -> None:
    chat = Address("user", "alice", "chat")
    store.append(chat, [_row("x" * 100) for _ in range(5)])
    store.put_record(Address("user", "alice", "r"), "y" * 100, None)
    store.set_quotas(Quotas(bytes=10, buffers=1, records=1))  # lowered below what is stored
    store.append(chat, [_row("z")], max_messages=1)  # evicts more than it adds
    store.put_record(Address("user", "alice", "r"), "y", None)
    assert store.delete_record(Address("user", "alice", "r"))
    assert store.clear(chat) == 1
    assert store.usage("alice") == Usage()
    store.set_quotas(Quotas.off())
    store.append(chat, [_row("x" * 1000)])


def test_session_data_counts_against_its_owner_and_leaves_with_the_session(store: Store) -> None:
    store.set_quotas(Quotas(bytes=0, buffers=1, records=0))
    now = 1.0
    store.create_session(SessionRecord("s-1", "chat", "alice", created_at=now, updated_at=now))
    store.append(Address("session", "s-1", "chat_history"), [_row("hi")])
    with pytest.raises(QuotaExceededError):
        store.append(Address("user", "alice", "chat"), [_row("hi")])
    # a write that creates its session (decision 0032) counts against the new owner too
    claim = WriteGuard(session_id="s-2", claim=SessionClaim(owner="alice", create=True))
    with pytest.raises(QuotaExceededError):
        store.append(Address("session", "s-2", "chat_history"), [_row("hi")], guard=claim)
    assert store.get_session("s-2") is None  # refused whole: no session either
    store.append(Address("global", "", "shared"), [_row("nobody's")])  # shared scopes: no owner
    store.delete_session("s-1")
    assert store.usage("alice") == Usage()
    store.append(Address("user", "alice", "chat"), [_row("hi")])
    store.put_record(Address("user", "alice", "r"), 1, None)
    store.erase_user("alice")
    assert store.usage("alice") == Usage()


def test_concurrent_writers_on_two_store_objects_never_pass_the_quota(sql_store_url: str) -> None:
    """Two processes' stores over one database (here two store objects): one count, exact."""
    stores = [open_store(sql_store_url), open_store(sql_store_url)]
    quota = 20 * _size(_row("w" * 100))
    try:
        for opened in stores:
            opened.set_quotas(Quotas(bytes=quota, buffers=0, records=0))
        refused: list[int] = []

        def write(n: int) -> None:
            opened = stores[n % 2]
            for _ in range(15):
                try:
                    opened.append(Address("user", "alice", f"b{n}"), [_row("w" * 100)])
                except QuotaExceededError:
                    refused.append(n)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        kept = [stores[0].load(Address("user", "alice", f"b{n}")) for n in range(4)]
        stored = sum(_size(*rows) for rows in kept)
        assert stored == quota and len(refused) == 60 - 20
        # a writer refused from its first append made no buffer
        assert stores[1].usage("alice") == Usage(stored, sum(1 for rows in kept if rows), 0)
    finally:
        for opened in stores:
            opened.close()
