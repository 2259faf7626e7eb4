"""Property-based fuzzing of the app against its own OpenAPI schema (schemathesis).

Every operation gets schemathesis's coverage cases (each the schema defines) and a
bounded, derandomized number of generated requests, as an admin (so that most
requests pass auth and reach the handlers): no response is a 500, and every response
matches the schema (status documented, body conformant). The buffer append gets a test
of its own, which checks that too, and that content parts generated from the schema
(every part kind) are stored as parts, never as a string.
Then the same generated requests with text UTF-8 cannot encode (lone surrogates)
put into their strings, object keys and query parameters: never a 500.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any
from unittest import mock

import pytest
import schemathesis
import schemathesis.pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance
from schemathesis.core import NotSet
from schemathesis.python._constants.orchestrator import build_constants_pool

from flowmem.api import create_app
from flowmem.api import gate as request_gate
from flowmem.api.ratelimit import RateLimits
from flowmem.auth import create_token
from flowmem.store import MemoryStore
from tests.api.transport import OneHopClient

STORE = MemoryStore()
TOKEN, _ = create_token(STORE, "fuzzer", {"admin"})
APP = create_app(STORE, rate_limits=RateLimits.off())  # the fuzzer sends fast, with one token
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
OPERATIONS = [result.ok() for result in schema.get_all_operations()]
APPEND_LABEL = "POST /v1/buffers/{scope}/{key}"
# the append is checked by its own test below: the same cases (the coverage phase's every
# one, 10 generated), the same call and checks, and what it stores (decision 0204)
CONFORMING = [op.label for op in OPERATIONS if op.label != APPEND_LABEL]


# --- each operation's cases are built when its test runs, not when the module is collected ---
#
# ``schema.parametrize()`` builds every operation's test, its coverage phase's ~3,700 cases
# with it, while pytest collects the module: in each xdist worker, though a worker runs a
# few of those tests or none (~4 s of CPU a worker). ``schemathesis.pytest.from_fixture``
# builds them in the test instead; the fixture names one operation per test (its
# parameter), so each operation is still a test of its own (decision 0209).
class _Sent:
    """The label of the one operation the running schema test sends (set by its fixture)."""

    label = ""

    @staticmethod
    def matches(ctx: Any) -> bool:
        """True for the operation the running test names (a schemathesis filter)."""
        return bool(ctx.operation.label == _Sent.label)


def _one_operation(request: pytest.FixtureRequest) -> Any:
    """The schema, with ``request.param`` the operation the lazy filter ``_Sent.matches`` lets through."""
    _Sent.label = request.param
    # schemathesis's lazy test renames the node through ``_nodeid`` for its report, an
    # attribute pytest 9.2's nodes no longer have (their id is ``nodeid``): given it, the
    # rename changes nothing, and the test's id already names its operation
    request.node._nodeid = request.node.nodeid
    # the constants schemathesis draws from the app's source (it parses flowmem's modules,
    # ~0.2 s of CPU): found once, on the schema each test's clone shares them from, as every
    # operation of a collected ``schema.parametrize()`` shares them (a clone only copies them)
    build_constants_pool(schema)
    return schema


conforming_operation = pytest.fixture(params=CONFORMING, ids=CONFORMING)(_one_operation)
appended_operation = pytest.fixture(params=[APPEND_LABEL], ids=[APPEND_LABEL])(_one_operation)
CONFORMS = schemathesis.pytest.from_fixture("conforming_operation").include(_Sent.matches)
APPEND = schemathesis.pytest.from_fixture("appended_operation").include(_Sent.matches)


@CONFORMS.parametrize()
@settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    _fresh_key(case)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=_excluded(case)
    )


def _fresh_key(case: schemathesis.Case) -> None:
    """Make a generated ``Idempotency-Key`` unique to this request (its format kept).

    The fuzzer reuses values ("0") across operations, and a reused key is rightly
    refused (422 ``idempotency_key_reused``); reuse is tested in test_idempotency.
    """
    headers = case.headers
    if headers is not None and not isinstance(headers, NotSet) and "Idempotency-Key" in headers:
        key = str(headers["Idempotency-Key"])[:200]
        headers["Idempotency-Key"] = f"{key}-{uuid.uuid4().hex}"


def _excluded(case: schemathesis.Case) -> list[Any]:
    """A provider's own messages are described as objects, not by its SDK's whole type tree.

    So a schema-valid append or compacted history in a provider format, or a check/normalize payload
    (read in the format given or detected), may still be refused 422
    (``invalid_message``, ``format_mismatch`` …): "valid data accepted" is not
    checked for those bodies (decision 0023). Every other check (no 500,
    responses conform) still runs.
    """
    body = case.body if isinstance(case.body, dict) else {}
    takes_messages = ("/v1/buffers/{scope}/{key}", "/v1/buffers/{scope}/{key}/compact/replace")
    if case.path in takes_messages and body.get("format", "rows") != "rows":
        return [positive_data_acceptance]
    # a read's token budget fits or not by the buffer stored (422 window_too_small), and
    # max_tokens, archived and last/before/format exclude each other (422 invalid_input)
    query = case.query if isinstance(case.query, dict) else {}
    reads = case.method == "GET" and case.path == "/v1/buffers/{scope}/{key}"
    if reads and ("max_tokens" in query or query.get("archived") in (True, "true")):
        return [positive_data_acceptance]
    if case.path in ("/v1/check", "/v1/normalize"):
        return [positive_data_acceptance]
    # a budget fits or not by the buffer stored, not by the schema (422 window_too_small);
    # a summary given as a message is an object as above (422 invalid_message …)
    compaction = case.path.endswith("/compact") and not isinstance(body.get("summary"), str)
    if case.path.endswith("/compact/plan") or compaction:
        return [positive_data_acceptance]
    # a vector's length must be its space's dims, the space the stored one, the scope not a
    # session's: none of which a schema says (422 invalid_input, 409; decision 0125)
    if case.path in ("/v1/memory/{scope}/{key}/vectors", "/v1/search/{scope}"):
        return [positive_data_acceptance]
    return []


@APPEND.parametrize()
@settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_appends_of_generated_content_parts_conform_and_keep_the_parts(
    case: schemathesis.Case,
) -> None:
    """The append's conformance (as ``test_api_conforms_to_its_schema``'s), and content parts kept as parts."""
    _fresh_key(case)
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=_excluded(case)
    )
    body = case.body if isinstance(case.body, dict) else {}
    sent = body.get("messages")
    sent = sent if isinstance(sent, list) else [sent]
    if response.status_code != 200 or not body.get("return_messages", False):
        return
    stored = [row["content"] for row in response.json()["messages"]]
    for message in sent:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and content:  # parts are never stored as a string
            assert content in stored


# --- text that cannot be encoded, in every string field of every route (issue 12) -------


def _unencodable(text: str) -> bool:
    """True when ``text`` has a lone surrogate (JSON joins a high and a low one into one character)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


SURROGATES = st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=3)
UNENCODABLE = st.one_of(
    st.sampled_from(["\ud800", "\udfff", "a\udc00b", "\udc00\ud800", "x\ud83d", "\ud800\x00"]),
    st.builds(
        lambda a, s, b: a + s + b, st.text(max_size=3), SURROGATES, st.text(max_size=3)
    ).filter(lambda text: _unencodable(json.loads(json.dumps(text)))),
)
CLIENT = OneHopClient(APP, raise_server_exceptions=False)
SESSION = CLIENT.post(
    "/v1/sessions", json={"name": "fuzzed"}, headers={"Authorization": f"Bearer {TOKEN}"}
).json()["id"]
CLIENT.post(
    f"/v1/sessions/{SESSION}/turns",
    json={"content": "hello"},
    headers={"Authorization": f"Bearer {TOKEN}"},
)


def _text_slots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], bool]]:
    """Every string value (False) and object key (True) of a JSON value, by path."""
    if isinstance(value, str):
        return [(path, False)]
    if isinstance(value, dict):
        slots = [((*path, key), True) for key in value]
        for key, child in value.items():
            slots.extend(_text_slots(child, (*path, key)))
        return slots
    if isinstance(value, list):
        return [slot for i, child in enumerate(value) for slot in _text_slots(child, (*path, i))]
    return []


def _poison(value: Any, path: tuple[Any, ...], is_key: bool, text: str) -> Any:
    """Return ``value`` with the string (or key) at ``path`` replaced by ``text``."""
    if not path:
        return text
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        if not rest and is_key:
            return {(text if k == head else k): v for k, v in value.items()}
        return {k: (_poison(v, rest, is_key, text) if k == head else v) for k, v in value.items()}
    copy = list(value)
    copy[head] = _poison(copy[head], rest, is_key, text)
    return copy


# Without the body gate only for the operations that take a body: the gate reads bodies alone
# (an empty one is never scanned), so for the others that run was the body-gate run again, with
# 12 other examples of poisoned query parameters (decision 0187).
GATED = [
    (operation, gate)
    for operation in OPERATIONS
    for gate in (True, False)
    if gate or operation.body
]


@pytest.mark.parametrize(
    ("operation", "gate"),
    GATED,
    ids=[
        f"{op.method.upper()} {op.path}-{'body-gate' if gate else 'routes-alone'}"
        for op, gate in GATED
    ],
)
@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_unencodable_text_in_any_string_field_is_never_a_500(
    operation: Any, gate: bool, data: st.DataObject
) -> None:
    """Lone surrogates in the body's strings and keys, or in a query parameter: never a 500.

    With the body gate (``request_gate.unstorable_text``) every poisoned body is
    ``422 invalid_text``; without it (``routes-alone``) the routes and services
    must still refuse it on their own, whatever the status.
    """
    case = data.draw(operation.as_strategy())
    if "session_id" in case.path_parameters and data.draw(st.booleans()):
        case.path_parameters["session_id"] = SESSION
        if "seq" in case.path_parameters:
            case.path_parameters["seq"] = 1
    query = dict(case.query or {})
    for name, value in query.items():  # JSON-escaped: only `default` decodes it
        if isinstance(value, str) and data.draw(st.booleans()):
            query[name] = json.dumps(data.draw(UNENCODABLE))
    content: bytes | None = None
    poisoned_body = operation.body and not isinstance(case.body, NotSet)
    if poisoned_body:
        body = case.body
        slots = _text_slots(body)
        if not slots:
            body = {"x": body} if not isinstance(body, dict) else {**body, "x": ""}
            slots = _text_slots(body)
        chosen = data.draw(st.lists(st.sampled_from(slots), min_size=1, max_size=3, unique=True))
        for path, is_key in chosen:
            body = _poison(body, path, is_key, data.draw(UNENCODABLE))
        if data.draw(st.booleans()):
            content = json.dumps(body).encode("ascii")  # \ud800 escapes
        else:  # the surrogates' own bytes, which json.loads decodes too
            content = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with contextlib.ExitStack() as stack:
        if not gate:
            stack.enter_context(
                mock.patch.object(request_gate, "unstorable_text", lambda body, document: None)
            )
        response = CLIENT.request(
            case.method, case.formatted_path, params=query, content=content, headers=headers
        )
    assert response.status_code < 500, (response.status_code, response.text)
    answer = response.json() if response.content else None
    if gate and poisoned_body:
        # escaped, the text is valid JSON that cannot be stored; as raw bytes it is not UTF-8
        expected = (
            (422, "invalid_text") if content is None or content.isascii() else (400, "invalid_json")
        )
        assert (response.status_code, answer["error"]["code"]) == expected, answer
