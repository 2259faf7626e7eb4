"""Records written with their vectors and searched by a query vector over HTTP (issue 40 §5, decision 0125)."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest

from flowmem.limits import SEARCH_LIMIT, VECTOR_DIMS, VECTORS_PER_RECORD
from tests.api.helpers import Api

SPACE = {"name": "test:model", "dims": 8}
WRITE = "/v1/memory/{scope}/{key}/vectors"
SEARCH = "/v1/search/{scope}"


def _f32(values: list[float]) -> list[float]:
    """The values as the store keeps them (float32)."""
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


def _oracle(records: dict[str, list[list[float]]], query: list[float], prefix: str) -> list[tuple[str, float]]:
    """Every record under ``prefix`` by its best vector's cosine, best first, ties in key order (pure Python)."""
    scored = [
        (key, max(_cosine(_f32(v), _f32(query)) for v in vectors))
        for key, vectors in sorted(records.items())
        if key.startswith(prefix)
    ]
    return sorted(scored, key=lambda item: -item[1])


def _put(api: Api, key: str, vectors: list[list[float]], who: str = "alice", scope: str = "user", **extra: Any) -> Any:
    body = {"value": {"k": key}, "space": SPACE, "vectors": [{"field": "$", "vector": v} for v in vectors], **extra}
    return api.call("PUT", WRITE.format(scope=scope, key=key), who, json=body)


def _search(api: Api, query: list[float], who: str = "alice", scope: str = "user", **extra: Any) -> Any:
    return api.call("POST", SEARCH.format(scope=scope), who, json={"space": SPACE, "vector": query, **extra})


def _vec(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(SPACE["dims"])]


def test_a_search_ranks_the_records_as_the_exact_scan_does(any_api: Api) -> None:
    rng = random.Random(40)
    records = {f"{p}{i:02d}": [_vec(rng) for _ in range(rng.randint(1, 3))] for p in ("doc.", "note.") for i in range(15)}
    for key, vectors in records.items():
        answer = _put(any_api, key, vectors)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"success": True, "resolved_scope_id": "alice"}
    query = _vec(rng)
    want = _oracle(records, query, "doc.")
    first = _search(any_api, query, prefix="doc.", limit=6).json()
    rest = _search(any_api, query, prefix="doc.", limit=20, offset=6).json()
    found = first["data"] + rest["data"]
    assert [hit["key"] for hit in found] == [key for key, _ in want]
    assert all(math.isclose(hit["score"], score, abs_tol=1e-5) for hit, (_, score) in zip(found, want, strict=True))
    assert found[0]["value"] == {"k": found[0]["key"]} and first["resolved_scope_id"] == "alice"


def test_a_search_scores_by_the_distance_asked(any_api: Api) -> None:
    for key, vector in (("near", [1.0] + [0.0] * 7), ("long", [5.0] + [0.0] * 7)):
        assert _put(any_api, key, [vector]).status_code == 200
    query = [2.0] + [0.0] * 7
    by = {d: [h["key"] for h in _search(any_api, query, distance=d).json()["data"]] for d in ("inner_product", "l2")}
    assert by == {"inner_product": ["long", "near"], "l2": ["near", "long"]}


def test_a_record_written_again_without_vectors_is_no_longer_found(api: Api) -> None:
    assert _put(api, "a", [[1.0] * 8]).status_code == 200
    assert api.call("GET", "/v1/memory/user/a", "alice").json()["value"] == {"k": "a"}
    assert api.call("PUT", "/v1/memory/user/a", "alice", json={"value": "plain"}).status_code == 200
    assert _search(api, [1.0] * 8).json()["data"] == []


def test_another_user_finds_nothing_of_the_owners_records(any_api: Api) -> None:
    assert _put(any_api, "secret", [[1.0] * 8]).status_code == 200
    bob = _search(any_api, [1.0] * 8, who="bob").json()
    assert bob == {"data": [], "resolved_scope_id": "bob"}
    answer = _search(any_api, [1.0] * 8, who="service")
    assert answer.json() == {"data": [], "resolved_scope_id": "", "refused": "no_user_id"}
    assert answer.headers["X-Flowmem-Refused"] == "no_user_id"
    refused = _put(any_api, "x", [[1.0] * 8], who="service")
    assert refused.json() == {"success": False, "resolved_scope_id": "", "refused": "no_user_id"}


def test_a_shared_scope_needs_memory_shared(api: Api) -> None:
    assert _put(api, "g", [[1.0] * 8], who="alice", scope="global").status_code == 403
    assert _search(api, [1.0] * 8, who="alice", scope="global").status_code == 403
    assert _put(api, "g", [[1.0] * 8], who="shared", scope="global").status_code == 200
    assert [h["key"] for h in _search(api, [1.0] * 8, who="admin", scope="global").json()["data"]] == ["g"]


BAD_WRITES: dict[str, Any] = {
    "wrong dims": {"space": SPACE, "vectors": [{"field": "$", "vector": [1.0] * 7}]},
    "too many vectors": {"space": SPACE, "vectors": [{"field": "$", "vector": [1.0] * 8}] * (VECTORS_PER_RECORD + 1)},
    "dims over the bound": {"space": {"name": "big", "dims": VECTOR_DIMS + 1}, "vectors": []},
    "no dims": {"space": {"name": "m", "dims": 0}, "vectors": []},
    "empty field": {"space": SPACE, "vectors": [{"field": "", "vector": [1.0] * 8}]},
    "not numbers": {"space": SPACE, "vectors": [{"field": "$", "vector": ["1"] * 8}]},
    "beyond float32": {"space": SPACE, "vectors": [{"field": "$", "vector": [1e300] * 8}]},
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_a_bad_write_is_422_invalid_input_and_stores_nothing(any_api: Api, case: str) -> None:
    answer = any_api.call("PUT", WRITE.format(scope="user", key="k"), "alice", json={"value": 1, **BAD_WRITES[case]})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_input"
    assert any_api.call("GET", "/v1/memory/user/k", "alice").json()["found"] is False


def test_a_nan_is_refused_and_nothing_stored(any_api: Api) -> None:
    text = json.dumps({"value": 1, "space": SPACE, "vectors": [{"field": "$", "vector": [1.0] * 7 + [math.nan]}]})
    assert "NaN" in text
    answer = any_api.call("PUT", WRITE.format(scope="user", key="k"), "alice", content=text, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_input", answer.text
    assert any_api.call("GET", "/v1/memory/user/k", "alice").json()["found"] is False


def test_a_session_scope_keeps_no_vectors(api: Api) -> None:
    sid = api.session()
    answer = api.call("PUT", WRITE.format(scope="session", key="k"), "alice", params={"session_id": sid}, json={"value": 1, "space": SPACE, "vectors": []})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_input"
    assert api.call("GET", "/v1/memory/session/k", "alice", params={"session_id": sid}).json()["found"] is False


@pytest.mark.parametrize("extra", [{"limit": SEARCH_LIMIT + 1}, {"limit": 0}, {"offset": -1}, {"vector": [1.0] * 7}, {"distance": "dot"}])
def test_a_bad_search_is_422(api: Api, extra: dict[str, Any]) -> None:
    assert _put(api, "a", [[1.0] * 8]).status_code == 200
    answer = _search(api, [1.0] * 8, **extra)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_input"


def test_another_space_is_409_naming_both_and_changes_nothing(any_api: Api) -> None:
    assert _put(any_api, "a", [[1.0] * 8]).status_code == 200
    other = {"value": "new", "space": {"name": "other:model", "dims": 4}, "vectors": [{"field": "$", "vector": [1.0] * 4}]}
    answer = any_api.call("PUT", WRITE.format(scope="user", key="a"), "alice", json=other)
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["code"] == "embedding_space_mismatch"
    assert "test:model" in error["message"] and "other:model" in error["message"]
    assert any_api.call("GET", "/v1/memory/user/a", "alice").json()["value"] == {"k": "a"}
    searched = any_api.call("POST", SEARCH.format(scope="user"), "alice", json={"space": other["space"], "vector": [1.0] * 4})
    assert searched.status_code == 409 and searched.json()["error"]["code"] == "embedding_space_mismatch"
    assert [h["key"] for h in _search(any_api, [1.0] * 8).json()["data"]] == ["a"]


def test_a_store_with_no_vectors_finds_nothing(api: Api) -> None:
    assert api.call("PUT", "/v1/memory/user/a", "alice", json={"value": 1}).status_code == 200
    assert _search(api, [1.0] * 8).json() == {"data": [], "resolved_scope_id": "alice"}


def test_an_oversized_value_is_413_and_neither_record_nor_vectors_are_stored(any_api: Api) -> None:
    big = "x" * (1024 * 1024 + 1)  # past the default record_bytes (1 MiB)
    answer = any_api.call("PUT", WRITE.format(scope="user", key="big"), "alice", json={"value": big, "space": SPACE, "vectors": [{"field": "$", "vector": [1.0] * 8}]})
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "record_too_large", answer.text
    assert any_api.call("GET", "/v1/memory/user/big", "alice").json()["found"] is False
    assert _search(any_api, [1.0] * 8).json()["data"] == []


def test_a_shared_scopes_search_finds_only_the_records_of_the_id_it_names(api: Api) -> None:
    for workflow, key in (("w1", "a"), ("w2", "b")):
        written = _put_in(api, "workflow", key, {"workflow_id": workflow})
        assert written.json()["resolved_scope_id"] == workflow, written.text
    for workflow, key in (("w1", "a"), ("w2", "b")):
        found = api.call("POST", SEARCH.format(scope="workflow"), "shared", params={"workflow_id": workflow}, json={"space": SPACE, "vector": [1.0] * 8})
        assert [h["key"] for h in found.json()["data"]] == [key], found.text


def _put_in(api: Api, scope: str, key: str, params: dict[str, str]) -> Any:
    body = {"value": key, "space": SPACE, "vectors": [{"field": "$", "vector": [1.0] * 8}]}
    return api.call("PUT", WRITE.format(scope=scope, key=key), "shared", params=params, json=body)
