"""The client's vector calls (issue 40 §5): ``Client.write_vectors``, ``Client.search_records`` and their async twins."""

from __future__ import annotations

import asyncio

import pytest

from flowmem.client import SearchHit, SearchResult
from flowmem.errors import EmbeddingSpaceError, InvalidInputError
from flowmem.results import WriteResult
from tests.client.conftest import Server

SPACE = ("test:model", 3)


def test_the_client_writes_records_with_vectors_and_finds_the_closest_first(server: Server) -> None:
    with server.client("alice") as client:
        for key, vector in (("fact.tea", [1.0, 0.0, 0.0]), ("fact.sea", [0.0, 1.0, 0.0]), ("other", [1.0, 0.0, 0.0])):
            written = client.write_vectors("user", key, {"text": key}, space=SPACE, vectors=[("text", vector)])
            assert written == WriteResult(success=True, resolved_scope_id="alice")
        found = client.search_records("user", [0.9, 0.1, 0.0], space=SPACE, prefix="fact.")
        assert isinstance(found, SearchResult) and found.resolved_scope_id == "alice"
        assert [(h.key, h.value) for h in found.data] == [("fact.tea", {"text": "fact.tea"}), ("fact.sea", {"text": "fact.sea"})]
        assert all(isinstance(h, SearchHit) for h in found.data) and found.data[0].score > found.data[1].score
        # fact.tea and other tie: key order, so the second of the whole ranking is other
        assert [h.key for h in client.search_records("user", [0.9, 0.1, 0.0], space=SPACE, limit=1, offset=1).data] == ["other"]
    with server.client("bob") as client:
        assert client.search_records("user", [1.0, 0.0, 0.0], space=SPACE).data == []


def test_the_client_raises_the_servers_typed_errors(server: Server) -> None:
    with server.client("alice") as client:
        client.write_vectors("user", "a", 1, space=SPACE, vectors=[("$", [1.0, 0.0, 0.0])])
        with pytest.raises(EmbeddingSpaceError) as mismatch:
            client.write_vectors("user", "a", 2, space=("other", 2), vectors=[("$", [1.0, 0.0])])
        assert "test:model" in str(mismatch.value) and "'other'" in str(mismatch.value)
        with pytest.raises(InvalidInputError):
            client.write_vectors("user", "b", 2, space=SPACE, vectors=[("$", [1.0, 0.0])])
        assert client.read_record("user", "a").value == 1 and not client.read_record("user", "b").found


def test_a_refused_scope_finds_nothing_and_says_why(server: Server) -> None:
    with server.client("service") as client:
        found = client.search_records("user", [1.0, 0.0, 0.0], space=SPACE)
        assert found == SearchResult(data=[], resolved_scope_id="", refused="no_user_id")
        assert client.write_vectors("user", "a", 1, space=SPACE, vectors=[]).success is False


def test_the_async_client_is_the_twin(server: Server) -> None:
    async def main() -> SearchResult:
        async with server.async_client("alice") as client:
            await client.write_vectors("user", "a", "x", space=SPACE, vectors=[("$", [0.0, 0.0, 1.0])])
            return await client.search_records("user", [0.0, 0.0, 1.0], space=SPACE)

    found = asyncio.run(main())
    assert [(h.key, h.value) for h in found.data] == [("a", "x")]
