"""Tokens: created once, stored as a hash, revocable; the token CLI."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from flowmem.access import Principal, real_id
from flowmem.auth import (
    TOKEN_PREFIX,
    authenticate,
    bearer_token,
    bootstrap_admin_token,
    create_token,
    hash_token,
    principal_of,
    revoke_token,
)
from flowmem.cli import cli
from flowmem.errors import AuthenticationError, InvalidInputError, NotFoundError
from flowmem.store import MemoryStore
from flowmem.store.base import TokenRecord


def test_token_is_stored_only_as_hash() -> None:
    store = MemoryStore()
    token, record = create_token(store, "alice", {"sessions:create"})
    assert token.startswith(TOKEN_PREFIX) and len(token) > 40
    (stored,) = store.list_tokens()
    assert stored.token_hash == hash_token(token) != token
    assert token not in repr(stored)
    principal = authenticate(store, token)
    assert principal.user_id == "alice"
    assert principal.permissions == {"sessions:create"}
    assert principal.token_id == record.id


def test_tokens_are_unique() -> None:
    store = MemoryStore()
    tokens = {create_token(store, "alice")[0] for _ in range(20)}
    assert len(tokens) == 20


def test_mem_9_service_principal_has_no_user() -> None:
    store = MemoryStore()
    token, _ = create_token(store, None, {"sessions:view_any"})
    principal = authenticate(store, token)
    assert principal.user_id is None
    assert principal.identity is None


@pytest.mark.parametrize("bad", ["0", "", " ", "a b", "-1", "00", "x" * 256, "tab\there"])
def test_mem_9_user_id_must_be_usable_identity(bad: str) -> None:
    store = MemoryStore()
    with pytest.raises(InvalidInputError):
        create_token(store, bad)
    assert store.list_tokens() == []


def test_unknown_permission_is_refused() -> None:
    store = MemoryStore()
    with pytest.raises(InvalidInputError):
        create_token(store, "alice", {"sessions:create", "root"})
    assert store.list_tokens() == []


@pytest.mark.parametrize("token", ["", "fm_nope", "nope", "fm_" + "x" * 300])
def test_unknown_token_is_unauthenticated(token: str) -> None:
    store = MemoryStore()
    create_token(store, "alice")
    with pytest.raises(AuthenticationError):
        authenticate(store, token)


def test_revoked_token_is_unauthenticated() -> None:
    store = MemoryStore()
    token, record = create_token(store, "alice")
    revoke_token(store, record.id)
    with pytest.raises(AuthenticationError):
        authenticate(store, token)
    with pytest.raises(NotFoundError):
        revoke_token(store, "tok_missing")


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("Bearer fm_abc", True),
        ("bearer fm_abc", True),
        ("  Bearer   fm_abc ", True),
        (None, False),
        ("", False),
        ("Basic abc", False),
        ("Bearer", False),
        ("Bearer ", False),
    ],
)
def test_bearer_header(header: str | None, ok: bool) -> None:
    if ok:
        assert bearer_token(header) == "fm_abc"
    else:
        with pytest.raises(AuthenticationError):
            bearer_token(header)


def test_bootstrap_only_on_empty_database() -> None:
    store = MemoryStore()
    token = bootstrap_admin_token(store)
    assert token is not None
    assert authenticate(store, token).is_admin
    assert bootstrap_admin_token(store) is None
    assert len(store.list_tokens()) == 1


class KeptStore(MemoryStore):
    """A ``memory://`` store every CLI command shares: the command's close() leaves it open."""

    def close(self) -> None:
        """Keep the store for the next command and the test's reads (the fixture closes it)."""

    def close_for_good(self) -> None:
        """Close the store (at the test's end)."""
        super().close()


@pytest.fixture
def shared_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryStore]:
    store = KeptStore()
    monkeypatch.setattr("flowmem.cli.database.open_store", lambda url, create=True: store)
    yield store
    store.close_for_good()


def test_cli_token_create_list_revoke(shared_store: MemoryStore) -> None:
    runner = CliRunner()
    created = runner.invoke(
        cli, ["token", "create", "--user", "alice", "--permission", "sessions:view_any"]
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[0]
    principal = authenticate(shared_store, token)
    assert principal.user_id == "alice"
    assert principal.permissions == {"sessions:view_any"}

    admin = runner.invoke(cli, ["token", "create", "--user", "root", "--admin"])
    assert authenticate(shared_store, admin.stdout.strip().splitlines()[0]).is_admin
    service = runner.invoke(cli, ["token", "create"])
    assert authenticate(shared_store, service.stdout.strip().splitlines()[0]).user_id is None

    listed = runner.invoke(cli, ["token", "list", "--json"])
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["user_id"] for r in rows] == ["alice", "root", None]
    assert token not in listed.stdout

    revoked = runner.invoke(cli, ["token", "revoke", principal.token_id or ""])
    assert revoked.exit_code == 0
    with pytest.raises(AuthenticationError):
        authenticate(shared_store, token)


def test_cli_token_bad_input(shared_store: MemoryStore) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["token", "create", "--user", "0"]).exit_code != 0
    assert runner.invoke(cli, ["token", "create", "--permission", "root"]).exit_code != 0
    assert runner.invoke(cli, ["token", "revoke", "tok_nope"]).exit_code != 0
    assert shared_store.list_tokens() == []


# --- decision 0016: identities through tokens -------------------------------------------


@pytest.mark.parametrize("placeholder", ["None", "null", "undefined", "nil"])
def test_mem_6_a_placeholder_user_id_gets_no_token(placeholder: str) -> None:
    store = MemoryStore()
    with pytest.raises(InvalidInputError, match="placeholder"):
        create_token(store, placeholder)
    assert store.list_tokens() == []


def test_mem_6_tokens_for_007_and_7_name_two_users() -> None:
    store = MemoryStore()
    identities = {
        given: authenticate(store, create_token(store, given)[0]).identity
        for given in ("7", "007", "+7")
    }
    assert identities == {"7": "7", "007": "007", "+7": "+7"}
    assert authenticate(store, create_token(store, 7)[0]).identity == "7"  # type: ignore[arg-type]


def test_mem_6_tokens_for_nfc_and_nfd_name_one_user() -> None:
    store = MemoryStore()
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    token, record = create_token(store, nfd)
    assert record.user_id == nfc  # stored in NFC
    assert authenticate(store, token).identity == nfc
    assert authenticate(store, create_token(store, nfc)[0]).identity == nfc


def test_mem_6_a_token_stored_before_0016_acts_as_its_nfc_identity() -> None:
    store = MemoryStore()
    token, record = create_token(store, "x")

    def stored_as(user_id: str) -> None:  # a row as written before 0016, past the API's rules
        with sqlite3.connect(store.path) as conn:
            conn.execute("UPDATE tokens SET user_id = ? WHERE id = ?", (user_id, record.id))

    stored_as("Jose\u0301")  # an NFD spelling
    assert authenticate(store, token).identity == "Jos\u00e9"
    stored_as("None")  # a placeholder, then usable
    assert authenticate(store, token).identity is None  # owns nothing now (MEM-9)


@pytest.mark.parametrize("user_id", [None, "alice", "7", "007", "None", "", "e\u0301", " bob", "0"])
def test_principal_of_carries_the_identity_access_computes(user_id: str | None) -> None:
    record = TokenRecord("tok_1", "hash", user_id, frozenset(), 0.0)
    principal = principal_of(record)
    assert principal.identity == real_id(user_id) == Principal(user_id).identity
    assert principal == Principal(user_id, frozenset(), "tok_1")
