"""Importing a Claude Code transcript into a flowmem server through the Python client (issue 41 §4)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowmem.errors import NotFoundError
from flowmem.formats import to_anthropic
from flowmem.importers import import_claude_code
from flowmem.scope import ExecutionContext
from flowmem.store import open_store
from tests.client.conftest import Server, in_process
from tests.importers.helpers import BEFORE_COMPACTION, DATA, KEY, LIVE, SESSION, lines_until


@pytest.fixture
def served(tmp_path: object) -> Iterator[Server]:
    """The app in process over a SQLite file."""
    store = open_store(f"sqlite:///{tmp_path}/served.db", create=True)
    try:
        yield from in_process(store)
    finally:
        store.close()


def test_mem_3_a_transcript_imported_over_http_is_stored_exactly_and_once(served: Server) -> None:
    with served.client("alice") as client:
        first = import_claude_code(client, lines_until("a-0007"))
        rest = import_claude_code(client, DATA)
        again = import_claude_code(client, DATA)
        rows = client.load("session", KEY, ExecutionContext(session_id=SESSION), include_archived=True).messages
    assert (first.lines_new + rest.lines_new, again.lines_new, again.rows_stored) == (21, 0, 0)
    assert rest.compactions == 1
    assert to_anthropic(rows)[1] == BEFORE_COMPACTION + LIVE
    assert served.store is not None and served.store.get_session(SESSION).owner == "alice"


def test_another_users_token_cannot_import_into_the_session_nor_learn_it_exists(served: Server) -> None:
    with served.client("alice") as alice:
        import_claude_code(alice, lines_until("u-0002"))
        before = alice.load("session", KEY, ExecutionContext(session_id=SESSION), include_archived=True).messages
    with served.client("bob") as bob, pytest.raises(NotFoundError):
        import_claude_code(bob, DATA)
    with served.client("alice") as alice:
        after = alice.load("session", KEY, ExecutionContext(session_id=SESSION), include_archived=True).messages
    assert after == before
