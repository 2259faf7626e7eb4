"""Property-based fuzzing of the app against its own OpenAPI schema (schemathesis).

Every operation gets a bounded, derandomized number of generated requests, as an
admin (so that most requests pass auth and reach the handlers): no response is a
500, and every response matches the schema (status documented, body conformant).
The buffer append gets a test of its own: content parts generated from the schema
(every part kind) are stored as parts, never as a string.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings

from flowmem.api import create_app
from flowmem.auth import create_token
from flowmem.store import MemoryStore

STORE = MemoryStore()
TOKEN, _ = create_token(STORE, "fuzzer", {"admin"})
APP = create_app(STORE)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"})


APPEND = schema.include(path="/v1/buffers/{scope}/{key}", method="POST")


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
    response = case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"})
    body = case.body if isinstance(case.body, dict) else {}
    sent = body.get("messages")
    sent = sent if isinstance(sent, list) else [sent]
    if response.status_code != 200 or not body.get("return_messages", True):
        return
    stored = [row["content"] for row in response.json()["messages"]]
    for message in sent:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and content:  # parts are never stored as a string
            assert content in stored
