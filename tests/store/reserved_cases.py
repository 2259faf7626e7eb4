"""The bytes reservation's edge, written once for both SQL back-ends (SQLite 25, PostgreSQL 27).

A buffer's bytes are reserved in ``user_usage`` with slack; a write that reaches the
quota gives the owner's unused reservations back and is judged on the exact bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import strategies as st

from flowmem.core import prepare
from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas, SessionRecord
from flowmem.store.base import Store


def grow(store: Store, address: Address, text: str) -> None:
    """Append one user message of ``text`` to ``address``."""
    store.append(address, prepare({"role": "user", "content": text}, store.count(address) + 1))


def exact_fit_then_one_byte_over(store: Store, when_full: Callable[[int], None] | None = None) -> None:
    """A write that fits the bytes quota exactly passes, one byte more is refused; ``when_full(grown)`` runs at the full quota."""
    chats = [Address("user", "alice", f"c{n}") for n in range(5)]
    for chat in chats:  # each reserves 16 KiB more than it holds
        grow(store, chat, "first")
    before = store.usage("alice").bytes
    grow(store, chats[0], "the same message")
    grown = store.usage("alice").bytes - before
    store.set_quotas(Quotas(bytes=before + 2 * grown))  # far under the upper bound (5 x 16 KiB)
    grow(store, chats[1], "the same message")  # fits exactly
    assert store.usage("alice").bytes == before + 2 * grown
    store.set_quotas(Quotas(bytes=before + 3 * grown - 1))
    with pytest.raises(QuotaExceededError):
        grow(store, chats[2], "the same message")  # one byte over
    assert store.usage("alice").bytes == before + 2 * grown and store.count(chats[2]) == 1
    store.set_quotas(Quotas(bytes=before + 3 * grown))
    grow(store, chats[2], "the same message")  # and with that byte, it fits
    grow(store, chats[3], "")  # a shrink or an empty growth of another is never refused
    with pytest.raises(QuotaExceededError):
        grow(store, chats[4], "the same message")
    if when_full is not None:
        when_full(grown)
    store.clear(chats[0])
    grow(store, chats[4], "the same message")  # the cleared rows made room


OP = st.tuples(
    st.sampled_from(["append", "append", "clear", "record", "session", "erase"]),
    st.integers(0, 3),
    st.integers(0, 9000),
)


def run_ops(
    store: Store, ops: list[tuple[str, int, int]], prefix: str, check: Callable[[], None]
) -> None:
    """Apply random writes and deletes of alice's (sessions named ``prefix`` + n), ``check`` after each."""
    session = 1
    store.create_session(SessionRecord(f"{prefix}1", f"{prefix}1", "alice"))
    for op, which, size in ops:
        if which == 3:
            address = Address("session", f"{prefix}{session}", f"b{which}")
        else:
            address = Address("user", "alice", f"b{which}")
        try:
            if op == "append":
                grow(store, address, "z" * size)
            elif op == "clear":
                store.clear(address)
            elif op == "record":
                store.put_record(Address("user", "alice", f"r{which}"), "v" * size, None)
            else:
                if op == "erase":
                    store.erase_user("alice")  # every buffer, record and session of hers
                else:
                    assert store.delete_session(f"{prefix}{session}")  # its buffers go with it
                session += 1
                store.create_session(SessionRecord(f"{prefix}{session}", f"{prefix}{session}", "alice"))
        except QuotaExceededError:
            pass
        check()
