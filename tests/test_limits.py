"""Size and count limits (``flowmem.limits``), enforced by the services on every backend."""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.access import Principal
from flowmem.core import prepare
from flowmem.errors import (
    BufferFullError,
    ConfigurationError,
    MessageTooLargeError,
    MetadataTooLargeError,
    NotSerializableError,
    QuotaExceededError,
    RecordTooLargeError,
    TooManySessionsError,
)
from flowmem.limits import ENV, KIB, MIB, QUOTA_FIELDS, Limits, Quotas
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.sessions import SessionService
from flowmem.store import Address, MemoryStore, Store
from flowmem.store.rows import dump_json, utf8_size
from tests.store.conftest import BACKENDS, open_backend

ALICE = ExecutionContext(user_id="alice")
OWNER = Principal("alice", frozenset({"sessions:create"}), "t1")
SERVICE = Principal(None, frozenset({"sessions:create"}), "t2")


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend kind (memory, SQLite, PostgreSQL)."""
    opened = open_backend(request.param, request, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def _row_size(message: dict[str, object], now: int = 1) -> int:
    return utf8_size(dump_json(prepare(message, now)[0], "message"))


def test_the_defaults_are_the_documented_ones() -> None:
    limits = Limits()
    assert (limits.message_bytes, limits.buffer_bytes, limits.record_bytes) == (
        50 * MIB,
        64 * MIB,
        MIB,
    )
    assert limits.body_bytes == 51 * MIB
    assert (limits.session_metadata_bytes, limits.sessions_per_user) == (16 * KIB, 10_000)
    assert MemoryService(MemoryStore()).limits == limits
    assert limits.quotas == Quotas() == Quotas(bytes=1024 * MIB, buffers=10_000, records=100_000)


def test_the_quotas_are_limits_fields_with_their_settings() -> None:
    limits = Limits(user_bytes=1, user_buffers=2, user_records=3)
    assert limits.quotas == Quotas(bytes=1, buffers=2, records=3)
    assert Limits.unlimited().quotas == Quotas.off()
    assert {ENV[name] for name in QUOTA_FIELDS.values()} == {
        "FLOWMEM_MAX_USER_BYTES",
        "FLOWMEM_MAX_USER_BUFFERS",
        "FLOWMEM_MAX_USER_RECORDS",
    }
    with pytest.raises(ConfigurationError):
        Quotas(bytes=-1)


def test_limits_come_from_the_environment_and_refuse_nonsense() -> None:
    env = {ENV["message_bytes"]: "100", ENV["sessions_per_user"]: "0"}
    limits = Limits.from_env(env)
    assert (limits.message_bytes, limits.sessions_per_user, limits.buffer_bytes) == (
        100,
        0,
        64 * MIB,
    )
    assert Limits.from_env(limits.to_env()) == limits
    with pytest.raises(ConfigurationError):
        Limits.from_env({ENV["buffer_bytes"]: "lots"})
    with pytest.raises(ConfigurationError):
        Limits(record_bytes=-1)
    with pytest.raises(ConfigurationError):
        MemoryService(MemoryStore(), limits={"message_bytes": 1})  # type: ignore[arg-type]


def test_a_message_over_the_limit_is_refused_and_nothing_is_written(store: Store) -> None:
    fits = {"role": "user", "content": "é" * 40}
    limit = _row_size(fits, 1_700_000_000)
    service = MemoryService(store, limits=Limits(message_bytes=limit), clock=lambda: 1.7e9)
    assert service.append("user", "chat", fits, ALICE).appended == 1  # exactly at the limit
    over = [{"role": "user", "content": "ok"}, {"role": "user", "content": "é" * 41}]
    with pytest.raises(MessageTooLargeError) as info:
        service.append("user", "chat", over, ALICE)
    assert info.value.code == "message_too_large" and "message 1" in info.value.message
    with pytest.raises(MessageTooLargeError):
        service.append_raw("user", "alice", "chat", over)
    assert service.load("user", "chat", ALICE).count == 1  # neither message of the refused call


def test_a_buffer_over_the_limit_is_refused_and_nothing_is_written(store: Store) -> None:
    row = {"role": "user", "content": "x" * 1000}
    size = _row_size(row, 1_700_000_000)
    service = MemoryService(store, limits=Limits(buffer_bytes=3 * size), clock=lambda: 1.7e9)
    for _ in range(3):
        service.append("user", "chat", row, ALICE)
    with pytest.raises(BufferFullError) as info:
        service.append("user", "chat", [{"role": "user", "content": "y"}], ALICE)
    assert info.value.code == "buffer_full"
    assert service.load("user", "chat", ALICE).count == 3
    # a window keeps it within the limit: the caller's way out
    kept = service.append("user", "chat", row, ALICE, max_messages=3)
    assert (kept.appended, kept.count) == (1, 3)


def test_a_record_over_the_limit_is_refused_and_nothing_is_written(store: Store) -> None:
    service = MemoryService(store, limits=Limits(record_bytes=100))
    value = {"text": "é" * 45}  # 2 bytes each in UTF-8: over 100 bytes, under 100 characters
    assert len(dump_json(value, "v", compact=False)) < 100 < utf8_size(dump_json(value, "v", False))
    with pytest.raises(RecordTooLargeError) as info:
        service.write("user", "k", value, ALICE)
    assert info.value.code == "record_too_large"
    with pytest.raises(RecordTooLargeError):
        service.write_raw("user", "alice", "k", value)
    assert service.read("user", "k", ALICE).found is False
    assert service.write("user", "k", {"text": "é" * 10}, ALICE).success
    with pytest.raises(NotSerializableError):
        service.write("user", "k", {1, 2}, ALICE)


def test_session_metadata_and_sessions_per_user_are_limited(store: Store) -> None:
    memory = MemoryService(store, limits=Limits(session_metadata_bytes=64, sessions_per_user=2))
    sessions = SessionService(store, memory)
    with pytest.raises(MetadataTooLargeError) as info:
        sessions.create(OWNER, "n", metadata={"note": "x" * 64})
    assert info.value.code == "metadata_too_large"
    assert store.list_sessions("alice", False, 10, 0)[1] == 0
    sessions.create(OWNER, "one", metadata={"note": "short"})
    sessions.create(OWNER, "two")
    with pytest.raises(TooManySessionsError) as quota:
        sessions.create(OWNER, "three")
    assert quota.value.code == "too_many_sessions"
    assert store.list_sessions("alice", False, 10, 0)[1] == 2
    for _ in range(3):  # unowned sessions (a service principal) are not counted per user
        sessions.create(SERVICE, "unowned")


def test_zero_turns_every_limit_off(store: Store) -> None:
    service = MemoryService(store, limits=Limits.unlimited())
    big = "x" * (MIB + 1)
    service.append("user", "chat", {"role": "user", "content": big}, ALICE)
    service.write("user", "k", big, ALICE)
    assert store.count(Address("user", "alice", "chat")) == 1


# --- what providers accept fits; one setting read everywhere (decision 0048) ---------------


def _screenshot(raw_bytes: int) -> dict[str, object]:
    """A Responses user message with a PNG screenshot as a data URL (``raw_bytes`` before base64)."""
    data = base64.b64encode(os.urandom(raw_bytes)).decode("ascii")
    return {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "what is on this screen?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{data}"},
        ],
    }


def test_a_screenshot_of_1_6_mb_is_stored_in_process_with_the_defaults(store: Store) -> None:
    message = _screenshot(1_200_000)  # 1.6 MB as base64: over the 1 MiB the old default allowed
    assert _row_size(message) > 1_600_000
    service = MemoryService(store)
    assert service.append("user", "chat", message, ALICE).appended == 1
    stored = service.load("user", "chat", ALICE).messages[0]["content"]
    assert stored[1]["image_url"] == message["content"][1]["image_url"]  # type: ignore[index]


def test_providers_largest_single_message_fits_the_default() -> None:
    limits = Limits()
    # OpenAI: a 20 MB image, a 32 MB PDF, as base64 in one 50 MB request; Anthropic: 32 MB
    for raw in (20_000_000, 32_000_000):
        assert math.ceil(raw / 3) * 4 < limits.message_bytes
    assert 50_000_000 <= limits.message_bytes <= limits.buffer_bytes
    assert limits.body_bytes > limits.message_bytes


def test_flowmem_max_message_bytes_is_honoured_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV["message_bytes"], "1000")
    service = MemoryService(MemoryStore())
    assert service.limits.message_bytes == 1000
    with pytest.raises(MessageTooLargeError) as info:
        service.append("user", "chat", {"role": "user", "content": "x" * 2000}, ALICE)
    assert "$FLOWMEM_MAX_MESSAGE_BYTES" in info.value.message
    assert "--max-message-bytes" in info.value.message
    assert "Limits(message_bytes=N)" in info.value.message
    assert service.load("user", "chat", ALICE).count == 0
    monkeypatch.setenv(ENV["message_bytes"], "lots")
    with pytest.raises(ConfigurationError, match="FLOWMEM_MAX_MESSAGE_BYTES"):
        MemoryService(MemoryStore())


def test_flowmem_max_user_bytes_is_honoured_by_a_memory_service_built_in_process(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWMEM_MAX_USER_BYTES", "1000")
    service = MemoryService(store)  # no limits=: the environment, as the server reads it
    assert service.limits.quotas.bytes == 1000
    service.append("user", "chat", {"role": "user", "content": "x" * 300}, ALICE)
    with pytest.raises(QuotaExceededError) as refused:
        service.append("user", "chat", {"role": "user", "content": "y" * 800}, ALICE)
    assert (refused.value.code, refused.value.quota, refused.value.user, refused.value.limit) == (
        "quota_exceeded",
        "bytes",
        "alice",
        1000,
    )
    assert "$FLOWMEM_MAX_USER_BYTES" in refused.value.message
    assert "--max-user-bytes" in refused.value.message
    assert "Limits(user_bytes=N)" in refused.value.message
    assert service.load("user", "chat", ALICE).count == 1  # nothing written
    with pytest.raises(QuotaExceededError):
        service.write("user", "note", "z" * 800, ALICE)
    assert service.read("user", "note", ALICE).found is False


def test_a_memory_service_enforces_the_quotas_of_the_limits_it_is_given(store: Store) -> None:
    service = MemoryService(store, limits=Limits(user_buffers=1, user_records=1))
    service.append("user", "one", {"role": "user", "content": "hi"}, ALICE)
    with pytest.raises(QuotaExceededError, match=r"\$FLOWMEM_MAX_USER_BUFFERS") as refused:
        service.append("user", "two", {"role": "user", "content": "hi"}, ALICE)
    assert (refused.value.quota, refused.value.limit) == ("buffers", 1)
    service.write("user", "a", 1, ALICE)
    with pytest.raises(QuotaExceededError, match=r"Limits\(user_records=N\)"):
        service.write("user", "b", 1, ALICE)
    MemoryService(store, limits=Limits.unlimited())  # off: every limit, the quotas too
    service.append("user", "two", {"role": "user", "content": "hi"}, ALICE)
    service.write("user", "b", 1, ALICE)
    assert store.usage("alice").buffers == 2


def test_every_size_refusal_names_the_setting_that_raises_it() -> None:
    limits = Limits(record_bytes=10, session_metadata_bytes=10)
    service = MemoryService(MemoryStore(), limits=limits)
    with pytest.raises(RecordTooLargeError, match=r"\$FLOWMEM_MAX_RECORD_BYTES"):
        service.write("user", "k", "x" * 20, ALICE)
    sessions = SessionService(MemoryStore(), service)
    with pytest.raises(MetadataTooLargeError, match=r"\$FLOWMEM_MAX_SESSION_METADATA_BYTES"):
        sessions.create(OWNER, metadata={"note": "x" * 20})


def test_the_body_limit_follows_the_message_and_record_limits() -> None:
    assert Limits(message_bytes=100 * MIB).body_bytes == 101 * MIB
    assert Limits(record_bytes=70 * MIB).body_bytes == 71 * MIB
    assert Limits(message_bytes=KIB, record_bytes=KIB).body_bytes == 8 * MIB  # the floor
    assert Limits(message_bytes=0).body_bytes == 0
    assert Limits.unlimited().body_bytes == 0
