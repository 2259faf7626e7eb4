"""An API refusal is raised as the ``flowmem.errors`` class, with the code, the service raises."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowmem import errors
from flowmem.api.errors import HTTP_CODES, STATUS_TABLE, status_for
from flowmem.api.ratelimit import RateLimits
from flowmem.client import ApiError
from flowmem.client.errors import CODE_CLASSES, error_from_response
from flowmem.errors import (
    AccessDeniedError,
    AuthenticationError,
    BufferFullError,
    ConflictError,
    FlowmemError,
    InvalidInputError,
    InvalidTextError,
    MessageTooLargeError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    UnknownRoleError,
)
from flowmem.limits import Limits
from flowmem.store import open_store
from tests.client.conftest import Server, in_process


def _every_class() -> list[type[FlowmemError]]:
    found: list[type[FlowmemError]] = []
    pending: list[type[FlowmemError]] = [FlowmemError]
    while pending:
        kind = pending.pop()
        if kind.__module__ == errors.__name__:
            found.append(kind)
        pending.extend(kind.__subclasses__())
    return found


def test_every_code_of_the_server_table_maps_back_to_its_class() -> None:
    classes = _every_class()
    mapped = set(STATUS_TABLE)
    for kind in classes:
        if any(issubclass(kind, base) for base in mapped):
            raised = error_from_response(status_for(kind.__new__(kind)), _body(kind.code))
            assert type(raised) is kind, kind
            assert raised.code == kind.code
            assert CODE_CLASSES[kind.code] is kind
    for code, status in HTTP_CODES.items():
        raised = error_from_response(status, _body(code))
        assert raised.code == code
        assert isinstance(raised, FlowmemError)
        if code in {kind.code for kind in classes}:
            assert type(raised).code == code  # the class of that very code


def test_http_layer_codes_take_the_class_of_their_status() -> None:
    assert type(error_from_response(413, _body("too_many_values"))) is PayloadTooLargeError
    assert type(error_from_response(400, _body("invalid_json"))) is InvalidInputError
    assert type(error_from_response(405, _body("method_not_allowed"))) is ApiError
    internal = error_from_response(500, _body("internal_error"))
    assert type(internal) is ApiError and internal.code == "internal_error"


def test_an_answer_that_is_not_the_envelope_is_an_api_error_with_its_status() -> None:
    raised = error_from_response(502, None)
    assert type(raised) is ApiError and raised.code == "http_502"
    assert raised.details["http_status"] == 502


def _body(code: str) -> dict[str, object]:
    return {"error": {"code": code, "message": f"because {code}"}}


def test_404_409_422_401_403_over_http(server: Server) -> None:
    with server.client("alice") as client:
        with pytest.raises(NotFoundError) as missing:
            client.get_session("00000000-0000-0000-0000-000000000000")
        assert missing.value.code == "not_found" and missing.value.details["http_status"] == 404
        with pytest.raises(UnknownRoleError) as role:
            client.append_buffer("user", "k", {"role": "robot", "content": "x"})
        assert role.value.code == "unknown_role"
        with pytest.raises(InvalidInputError) as invalid:
            client.append_buffer("nowhere", "k", {"role": "user", "content": "x"})
        assert invalid.value.details["field"] == "path.scope"
        with pytest.raises(InvalidTextError):
            client.write_record("user", "k", "\ud800")
        with pytest.raises(AccessDeniedError) as denied:
            client.erase_user("bob")
        assert denied.value.code == "forbidden"
    with server.client("revoked") as revoked, pytest.raises(AuthenticationError):
        revoked.list_sessions()
    with server.client(None) as anonymous, pytest.raises(AuthenticationError) as anon:
        anonymous.list_sessions()
    assert anon.value.code == "unauthenticated"


@pytest.fixture
def limited() -> Iterator[Server]:
    """The app with tiny size limits and a rate limit of one request per minute."""
    store = open_store("memory://")
    try:
        yield from in_process(
            store,
            limits=Limits(message_bytes=300, buffer_bytes=400, sessions_per_user=1),
            rate_limits=RateLimits(requests_per_second=1 / 60, burst=3),
        )
    finally:
        store.close()


def test_limits_409_413_and_429_with_retry_after(limited: Server) -> None:
    with limited.client("alice") as client:
        with pytest.raises(MessageTooLargeError) as large:
            client.append_buffer("user", "k", {"role": "user", "content": "x" * 400})
        assert large.value.code == "message_too_large"
        client.create_session()
        with pytest.raises(errors.TooManySessionsError):
            client.create_session()
        # the three requests above used the burst: the next is 429 with Retry-After 60,
        # longer than the policy waits (30 s), so it is raised at once
        with pytest.raises(RateLimitedError) as limited_error:
            client.list_sessions()
        assert limited_error.value.code == "rate_limited"
        assert limited_error.value.retry_after == 60
    with limited.client("bob") as bob:
        bob.append_buffer("user", "k", {"role": "user", "content": "y" * 150})
        with pytest.raises(BufferFullError) as full:
            bob.append_buffer("user", "k", {"role": "user", "content": "z" * 150})
        assert full.value.code == "buffer_full"


def test_a_session_running_a_turn_is_a_conflict(memory_server: Server) -> None:
    with memory_server.client("alice") as client:
        session = client.create_session()
        assert memory_server.store is not None
        assert memory_server.store.set_session_status(session.id, "running")
        with pytest.raises(ConflictError) as conflict:
            client.reset_session(session.id)
        assert conflict.value.code == "conflict"


def test_a_status_is_found_along_the_mro_whatever_the_table_order() -> None:
    from flowmem.errors import MessageTooLargeError, StoreLockedError

    assert status_for(MessageTooLargeError("x")) == 413  # PayloadTooLarge before InvalidInput
    assert status_for(StoreLockedError("x")) == 503
