"""``MemoryService``: scope → store → core rules, and the refusal path (MEM-6, 7, 13, 14)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.errors import (
    AccessDeniedError,
    ConfigurationError,
    InvalidInputError,
    InvalidMessageError,
    InvalidTextError,
    NotSerializableError,
    UnknownRoleError,
    UnknownScopeError,
)
from flowmem.scope import ExecutionContext, Refusal
from flowmem.service import BufferResult, MemoryService, ReadResult, WriteResult
from flowmem.store import Address, MemoryStore, Store, WriteGuard, open_store
from tests.migrated import migrated_sqlite_url


class ForbiddenStore:
    """A store that fails the test on any attribute access or call.

    But for ``set_quotas``, which ``MemoryService`` calls once, when it is built (the
    quotas of its limits, decision 0112): no data is read or written.
    """

    def __init__(self) -> None:
        object.__setattr__(self, "touched", [])

    def __getattribute__(self, name: str) -> Any:
        if name in ("touched", "__class__", "__dict__"):
            return object.__getattribute__(self, name)
        if name == "set_quotas":
            return lambda quotas: None
        object.__getattribute__(self, "touched").append(name)
        pytest.fail(f"the store was touched: {name}")


class Clock:
    """A settable clock."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


STORE_KINDS = ["memory", "sqlite"]


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each cheap backend: the in-process reference and the SQLite file."""
    if request.param == "memory":
        opened: Store = MemoryStore()
    else:
        opened = open_store(migrated_sqlite_url(tmp_path / "m.db"))  # migrated once per process
    yield opened
    opened.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(store: Store, clock: Clock) -> MemoryService:
    return MemoryService(store, clock=clock)


ALICE = ExecutionContext(
    workflow_id="wf-1",
    pipeline_id="pl-1",
    execution_id="ex-1",
    node_id="node-1",
    session_id="sess-1",
    user_id="alice",
)

# One context per refusal reason, for each identity scope; node/pipeline/workflow named.
_NAMED = {"workflow_id": "wf-9", "pipeline_id": "pl-9", "node_id": "node-9"}


def _refusing(scope: str, reason: str) -> ExecutionContext | None:
    field = "user_id" if scope == "user" else "session_id"
    if reason == "no_context":
        return None
    value = {"no_id": None, "unusable_id": "a b", "no_one_id": "0", "placeholder_id": "null"}[
        reason
    ]
    return ExecutionContext(**_NAMED, **{field: value})


REASONS = ["no_context", "no_id", "unusable_id", "no_one_id", "placeholder_id"]
IDENTITY = ["user", "session"]


def _call(service: MemoryService, method: str, scope: str, context: Any) -> Any:
    calls: dict[str, Callable[[], Any]] = {
        "read": lambda: service.read(scope, "k", context, default="dflt"),
        "write": lambda: service.write(scope, "k", {"v": 1}, context, ttl=60),
        "delete": lambda: service.delete(scope, "k", context),
        "append": lambda: service.append(
            scope, "k", {"role": "user", "content": "hi"}, context, max_messages=5
        ),
        "load": lambda: service.load(scope, "k", context, last=3),
        "clear": lambda: service.clear(scope, "k", context),
    }
    return calls[method]()


NEUTRAL: dict[str, Any] = {
    "read": ReadResult(value="dflt", found=False, resolved_scope_id=""),
    "write": WriteResult(success=False, resolved_scope_id=""),
    "delete": WriteResult(success=False, resolved_scope_id=""),
    "append": BufferResult(messages=[], count=0, appended=0, appended_any=False),
    "load": BufferResult(messages=[], count=0, appended=0, appended_any=False),
    "clear": WriteResult(success=False, resolved_scope_id=""),
}
METHODS = list(NEUTRAL)


# --- refusals: MEM-6, MEM-7, MEM-13, MEM-14 -------------------------------------------


def _assert_refused(
    caplog: pytest.LogCaptureFixture, result: Any, method: str, scope: str, reason: str
) -> None:
    assert result == NEUTRAL[method]
    assert isinstance(result.refusal, Refusal)
    assert (result.refusal.scope, result.refusal.reason) == (scope, reason)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    record = warnings[0]
    assert record.name == "flowmem" and record.levelno == logging.WARNING
    text = record.getMessage()
    assert scope in text and reason in text
    if reason != "no_context":
        assert "'node-9'" in text and "'pl-9'" in text and "'wf-9'" in text


@pytest.mark.parametrize("reason", REASONS)
@pytest.mark.parametrize("method", METHODS)
def test_mem_6_user_refusal_is_neutral_warns_once_and_touches_no_store(
    caplog: pytest.LogCaptureFixture, method: str, reason: str
) -> None:
    store = ForbiddenStore()
    service = MemoryService(store)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="flowmem"):
        result = _call(service, method, "user", _refusing("user", reason))
    assert store.touched == []
    _assert_refused(caplog, result, method, "user", reason)


@pytest.mark.parametrize("reason", REASONS)
@pytest.mark.parametrize("method", METHODS)
def test_mem_13_session_refusal_is_neutral_warns_once_and_touches_no_store(
    caplog: pytest.LogCaptureFixture, method: str, reason: str
) -> None:
    store = ForbiddenStore()
    service = MemoryService(store)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="flowmem"):
        result = _call(service, method, "session", _refusing("session", reason))
    assert store.touched == []
    _assert_refused(caplog, result, method, "session", reason)


REFUSED_IDS = [
    None,
    0,
    "0",
    "",
    "  ",
    "00",
    -1,
    "-1",
    True,
    False,
    1.5,
    [],
    {},
    "a b",
    "x" * 256,
    "\x00x",
    "None",
    "null",
    "undefined",
    "nil",
]


@pytest.mark.parametrize("scope", IDENTITY)
@pytest.mark.parametrize("value", REFUSED_IDS, ids=repr)
def test_mem_7_every_unusable_id_reaches_no_store(
    caplog: pytest.LogCaptureFixture, scope: str, value: Any
) -> None:
    field = "user_id" if scope == "user" else "session_id"
    context = ExecutionContext(**_NAMED, **{field: value})
    store = ForbiddenStore()
    service = MemoryService(store)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        for method in METHODS:
            caplog.clear()
            assert _call(service, method, scope, context) == NEUTRAL[method]
            assert len(caplog.records) == 1
    assert store.touched == []


def test_mem_7_refusal_names_node_pipeline_and_workflow_in_structured_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = MemoryService(ForbiddenStore())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        service.read("user", "k", ExecutionContext(**_NAMED))
    (record,) = caplog.records
    assert record.flowmem_node == "node-9"  # type: ignore[attr-defined]
    assert record.flowmem_pipeline == "pl-9"  # type: ignore[attr-defined]
    assert record.flowmem_workflow == "wf-9"  # type: ignore[attr-defined]
    assert record.flowmem_refusal["reason"] == "no_id"  # type: ignore[attr-defined]


def test_mem_7_refused_read_returns_the_configured_default(service: MemoryService) -> None:
    service.write_raw("user", "", "k", "shared-bucket-value")
    result = service.read("user", "k", None, default=[1, 2])
    assert result.value == [1, 2] and result.found is False and result.resolved_scope_id == ""


def test_mem_7_refused_write_does_not_land_in_the_global_bucket(service: MemoryService) -> None:
    assert service.write("user", "k", "v", ExecutionContext(user_id=0)).success is False
    assert service.read_raw("user", "", "k").found is False
    assert service.read("global", "k", None).found is False


def test_mem_14_refused_append_drops_the_turn_and_reports_zero(service: MemoryService) -> None:
    result = service.append("session", "chat", [{"role": "user", "content": "hi"}], None)
    assert result.to_dict() == {
        "messages": [],
        "count": 0,
        "appended": 0,
        "appended_any": False,
        "resolved_scope_id": "",
        "refused": "no_context",
    }
    assert service.load_raw("session", "", "chat").count == 0


@pytest.mark.parametrize("method", METHODS)
def test_mem_7_non_identity_scopes_never_refuse(
    caplog: pytest.LogCaptureFixture, service: MemoryService, method: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        for scope in ("global", "workflow", "pipeline", "execution"):
            result = _call(service, method, scope, None)
            assert result.refusal is None
            assert result.resolved_scope_id == ""
    assert caplog.records == []


# --- validation before storage -------------------------------------------------------

BAD_CALLS: list[tuple[str, Callable[[MemoryService], Any], type[Exception]]] = [
    ("key_empty", lambda s: s.read("global", "", ALICE), InvalidInputError),
    ("key_long", lambda s: s.read("user", "k" * 256, ALICE), InvalidInputError),
    ("key_type", lambda s: s.write("user", 3, "v", ALICE), InvalidInputError),
    ("key_none", lambda s: s.delete("user", None, ALICE), InvalidInputError),
    ("scope_unknown", lambda s: s.read("tenant", "k", ALICE), UnknownScopeError),
    ("scope_unknown_refusable", lambda s: s.read("tenant", "k", None), UnknownScopeError),
    ("ttl_zero", lambda s: s.write("user", "k", 1, ALICE, ttl=0), InvalidInputError),
    ("ttl_negative", lambda s: s.write("user", "k", 1, ALICE, ttl=-5), InvalidInputError),
    ("ttl_bool", lambda s: s.write("user", "k", 1, ALICE, ttl=True), InvalidInputError),
    ("ttl_text", lambda s: s.write("user", "k", 1, ALICE, ttl="60"), InvalidInputError),
    ("ttl_nan", lambda s: s.write("user", "k", 1, ALICE, ttl=float("nan")), InvalidInputError),
    ("value_set", lambda s: s.write("user", "k", {1, 2}, ALICE), NotSerializableError),
    ("value_nan", lambda s: s.write("user", "k", float("inf"), ALICE), NotSerializableError),
    ("window_negative", lambda s: s.append("user", "k", [], ALICE, -1), InvalidInputError),
    ("window_bool", lambda s: s.append("user", "k", [], ALICE, True), InvalidInputError),
    ("window_float", lambda s: s.append("user", "k", [], ALICE, 2.0), InvalidInputError),
    ("last_negative", lambda s: s.load("user", "k", ALICE, last=-1), InvalidInputError),
    ("messages_text", lambda s: s.append("user", "k", "hello", ALICE), InvalidInputError),
    ("message_role", lambda s: s.append("user", "k", [{"role": "bot"}], ALICE), UnknownRoleError),
    (
        "message_one_bad",
        lambda s: s.append("user", "k", [{"role": "user", "content": "a"}, 7], ALICE),
        InvalidMessageError,
    ),
    ("raw_scope_id_type", lambda s: s.read_raw("user", 7, "k"), InvalidInputError),
    ("raw_scope_unknown", lambda s: s.write_raw("nobody", "", "k", 1), UnknownScopeError),
    ("raw_window", lambda s: s.append_raw("user", "u", "k", [], -2), InvalidInputError),
]


@pytest.mark.parametrize("label,call,error", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_arguments_raise_typed_errors_before_any_store_call(
    label: str, call: Callable[[MemoryService], Any], error: type[Exception]
) -> None:
    store = ForbiddenStore()
    with pytest.raises(error):
        call(MemoryService(store))  # type: ignore[arg-type]
    assert store.touched == []


def test_bad_message_in_a_batch_writes_nothing(service: MemoryService) -> None:
    service.append("user", "chat", {"role": "user", "content": "first"}, ALICE)
    with pytest.raises(InvalidMessageError):
        service.append("user", "chat", [{"role": "user", "content": "second"}, "junk"], ALICE)
    assert [m["content"] for m in service.load("user", "chat", ALICE).messages] == ["first"]


def test_not_serializable_value_leaves_the_old_value(service: MemoryService) -> None:
    service.write("user", "k", "old", ALICE)
    with pytest.raises(NotSerializableError):
        service.write("user", "k", object(), ALICE)
    assert service.read("user", "k", ALICE).value == "old"


@pytest.mark.parametrize("bad", [-1, float("nan"), "5", True])
def test_service_configuration_is_checked(bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        MemoryService(MemoryStore(), lock_timeout=bad)


# --- round trips -----------------------------------------------------------------------


def test_read_write_delete_round_trip(service: MemoryService) -> None:
    assert service.read("user", "prefs", ALICE) == ReadResult(None, False, "alice")
    written = service.write("user", "prefs", {"lang": "en", "n": [1, 2]}, ALICE)
    assert written == WriteResult(success=True, resolved_scope_id="alice")
    assert service.read("user", "prefs", ALICE) == ReadResult(
        {"lang": "en", "n": [1, 2]}, True, "alice"
    )
    assert service.write("user", "prefs", None, ALICE).success
    assert service.read("user", "prefs", ALICE, default="d") == ReadResult(None, True, "alice")
    assert service.delete("user", "prefs", ALICE) == WriteResult(True, "alice", removed=1)
    assert service.delete("user", "prefs", ALICE) == WriteResult(True, "alice", removed=0)
    assert service.read("user", "prefs", ALICE, default="d") == ReadResult("d", False, "alice")


def test_mem_6_users_have_separate_buckets(service: MemoryService) -> None:
    bob = ExecutionContext(user_id="bob", session_id="sess-1")
    service.write("user", "k", "alice's", ALICE)
    service.write("user", "k", "bob's", bob)
    assert service.read("user", "k", ALICE).value == "alice's"
    assert service.read("user", "k", bob).value == "bob's"
    assert service.read("global", "k", ALICE).found is False
    # Same session, different users: the session is alice's; bob reads it as he
    # writes it, refused (MEM-8, issue 38 §3, decision 0108).
    service.write("session", "k", "alice's", ALICE)
    assert service.read("session", "k", ALICE) == ReadResult("alice's", True, "sess-1")
    with pytest.raises(AccessDeniedError):
        service.read("session", "k", bob)
    with pytest.raises(AccessDeniedError):
        service.write("session", "k", "bob's", bob)


def test_mem_6_int_and_text_ids_share_one_bucket(service: MemoryService) -> None:
    service.write("user", "k", "seven", ExecutionContext(user_id=7))
    assert service.read("user", "k", ExecutionContext(user_id="7")).value == "seven"


@pytest.mark.parametrize("scope", IDENTITY)
def test_mem_6_mem_13_integer_spellings_are_separate_buckets(
    service: MemoryService, scope: str
) -> None:
    field = "user_id" if scope == "user" else "session_id"
    for spelling in ("7", "007", "+7"):
        service.write(scope, "k", spelling, ExecutionContext(**{field: spelling}))
    for spelling in ("7", "007", "+7"):
        read = service.read(scope, "k", ExecutionContext(**{field: spelling}))
        assert (read.value, read.resolved_scope_id) == (spelling, spelling)
    assert service.read(scope, "k", ExecutionContext(**{field: 7})).value == "7"


@pytest.mark.parametrize("scope", IDENTITY)
def test_mem_6_mem_13_nfc_and_nfd_spellings_share_one_bucket(
    service: MemoryService, scope: str
) -> None:
    field = "user_id" if scope == "user" else "session_id"
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    service.write(scope, "k", "mine", ExecutionContext(**{field: nfd}))
    read = service.read(scope, "k", ExecutionContext(**{field: nfc}))
    assert (read.value, read.resolved_scope_id) == ("mine", nfc)
    service.append(scope, "b", {"role": "user", "content": "hi"}, ExecutionContext(**{field: nfc}))
    assert service.load(scope, "b", ExecutionContext(**{field: nfd})).count == 1


def test_each_scope_is_its_own_bucket(service: MemoryService) -> None:
    for scope in ("global", "workflow", "pipeline", "execution", "session", "user"):
        service.write(scope, "k", scope, ALICE)
    for scope, scope_id in [
        ("global", ""),
        ("workflow", "wf-1"),
        ("pipeline", "pl-1"),
        ("execution", "ex-1"),
        ("session", "sess-1"),
        ("user", "alice"),
    ]:
        assert service.read(scope, "k", ALICE) == ReadResult(scope, True, scope_id)
        assert service.read_raw(scope, scope_id, "k").value == scope


def test_ttl_expires_by_the_injected_clock(service: MemoryService, clock: Clock) -> None:
    service.write("user", "token", "abc", ALICE, ttl=30)
    service.write("user", "forever", "x", ALICE)
    clock.now += 29.5
    assert service.read("user", "token", ALICE).value == "abc"
    clock.now += 0.5
    assert service.read("user", "token", ALICE, default="gone") == ReadResult(
        "gone", False, "alice"
    )
    clock.now += 10**6
    assert service.read("user", "forever", ALICE).found is True
    service.write("user", "token", "new", ALICE, ttl=1.5)
    assert service.read("user", "token", ALICE).value == "new"


def test_buffer_append_load_clear_round_trip(service: MemoryService, clock: Clock) -> None:
    first = service.append(
        "session", "chat", {"role": "user", "content": "hi"}, ALICE, return_messages=True
    )
    assert first.resolved_scope_id == "sess-1"
    assert (first.count, first.appended, first.appended_any) == (1, 1, True)
    assert first.messages == [
        {"role": "user", "content": "hi", "metadata": {}, "timestamp": int(clock.now)}
    ]
    clock.now += 3
    second = service.append(
        "session", "chat", [{"role": "assistant", "content": "hello"}], ALICE, return_messages=True
    )
    assert second.count == 2 and second.messages[1]["timestamp"] == int(clock.now)
    loaded = service.load("session", "chat", ALICE)
    assert loaded.messages == second.messages and loaded.count == 2 and loaded.appended == 0
    tail = service.load("session", "chat", ALICE, last=1)
    assert [m["content"] for m in tail.messages] == ["hello"] and tail.count == 2
    assert service.clear("session", "chat", ALICE) == WriteResult(True, "sess-1", removed=2)
    assert service.load("session", "chat", ALICE).count == 0


def test_iter_load_yields_the_buffer_batch_by_batch(service: MemoryService) -> None:
    turns = [{"role": "user", "content": f"m{n}"} for n in range(7)]
    service.append("session", "chat", turns, ALICE)
    stream = service.iter_load("session", "chat", ALICE, batch=3)
    assert stream.resolved_scope_id == "sess-1" and stream.refusal is None
    assert list(stream) == service.load("session", "chat", ALICE).messages
    early = service.iter_load("session", "chat", ALICE, batch=2)
    assert next(iter(early))["content"] == "m0"
    early.close()
    with pytest.raises(InvalidInputError):
        service.iter_load("session", "chat", ALICE, batch=0)


@pytest.mark.parametrize("reason", REASONS)
def test_mem_7_refused_iter_load_iterates_nothing_and_reports_the_refusal(
    service: MemoryService, reason: str
) -> None:
    service.append("session", "chat", {"role": "user", "content": "hi"}, ALICE)
    stream = service.iter_load("session", "chat", _refusing("session", reason))
    assert list(stream) == [] and stream.resolved_scope_id == ""
    assert isinstance(stream.refusal, Refusal) and stream.refusal.reason == reason


def test_mem_14_append_reports_how_much_was_new(service: MemoryService) -> None:
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f"}}],
    }
    result = service.append("user", "chat", [{"role": "user", "content": "go"}, call], ALICE)
    assert (result.appended, result.appended_any, result.count) == (2, True, 2)
    again = service.append(
        "user", "chat", [call, {"role": "tool", "content": "42", "tool_call_id": "c1"}], ALICE
    )
    assert (again.appended, again.appended_any, again.count) == (1, True, 3)
    dup = service.append(
        "user", "chat", {"role": "tool", "content": "43", "tool_call_id": "c1"}, ALICE
    )
    assert (dup.appended, dup.appended_any, dup.count) == (0, False, 3)


def test_mem_14_placeholder_replacement_counts_zero(service: MemoryService) -> None:
    call = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c9", "name": "f"}]}
    service.append("user", "chat", call, ALICE)
    healed = service.append(
        "user", "chat", {"role": "user", "content": "still there?"}, ALICE, return_messages=True
    )
    assert healed.count == 3 and healed.messages[1]["metadata"]["healed"] is True
    late = service.append(
        "user",
        "chat",
        {"role": "tool", "content": "ok", "tool_call_id": "c9"},
        ALICE,
        return_messages=True,
    )
    assert (late.appended, late.appended_any, late.count) == (0, False, 3)
    assert late.messages[1]["content"] == "ok" and "healed" not in late.messages[1]["metadata"]


def test_mem_14_windowed_append_counts_appends_not_growth(service: MemoryService) -> None:
    for n in range(3):
        service.append("user", "chat", {"role": "user", "content": f"m{n}"}, ALICE, max_messages=3)
    result = service.append(
        "user",
        "chat",
        [{"role": "user", "content": "m3"}, {"role": "user", "content": "m4"}],
        ALICE,
        max_messages=3,
        return_messages=True,
    )
    assert (result.appended, result.count) == (2, 3)
    assert [m["content"] for m in result.messages] == ["m2", "m3", "m4"]


def test_user_append_without_content_is_a_pure_read(service: MemoryService) -> None:
    call = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]}
    service.append("user", "chat", call, ALICE)
    result = service.append("user", "chat", {"role": "user", "content": ""}, ALICE)
    assert (result.appended, result.count) == (0, 1)  # nothing appended, nothing healed


def test_return_messages_false_skips_the_load(service: MemoryService) -> None:
    result = service.append(
        "user", "chat", {"role": "user", "content": "x"}, ALICE, return_messages=False
    )
    assert result.messages == [] and result.count == 1 and result.appended == 1
    assert len(service.load("user", "chat", ALICE).messages) == 1


def test_mem_14_default_append_reports_counts_without_reading_the_buffer(clock: Clock) -> None:
    class NoFullReads(MemoryStore):
        def load(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a default append must not read the whole buffer")

        def append(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            assert kwargs.get("snapshot") is False
            return super().append(*args, **kwargs)

    service = MemoryService(NoFullReads(), clock=clock)
    first = service.append("user", "chat", {"role": "user", "content": "x"}, ALICE)
    read = service.append("user", "chat", {"role": "user", "content": ""}, ALICE)
    raw = service.append_raw("user", "alice", "chat", {"role": "assistant", "content": "y"})
    assert (first.messages, first.count, first.appended, first.appended_any) == ([], 1, 1, True)
    assert (read.messages, read.count, read.appended, read.appended_any) == ([], 1, 0, False)
    assert (raw.messages, raw.count, raw.appended) == ([], 2, 1)


def test_append_passes_the_lock_timeout_and_address_to_the_store(clock: Clock) -> None:
    calls: list[tuple[Address, int, float, bool, WriteGuard | None]] = []

    class Recording(MemoryStore):
        def append(
            self,
            address: Address,
            rows: Any,
            max_messages: int = 0,
            lock_timeout: float = 5.0,
            snapshot: bool = False,
            guard: WriteGuard | None = None,
            max_bytes: int = 0,
        ) -> Any:  # type: ignore[override]
            calls.append((address, max_messages, lock_timeout, snapshot, guard))
            # the guard is only recorded: no token "t1" exists in this store
            return super().append(
                address, rows, max_messages, lock_timeout, snapshot, max_bytes=max_bytes
            )

    service = MemoryService(Recording(), lock_timeout=0.25, clock=clock)
    service.append("user", "chat", {"role": "user", "content": "x"}, ALICE, max_messages=7)
    guard = WriteGuard(token_id="t1")
    service.append("user", "chat", {"role": "user", "content": "y"}, ALICE, guard=guard)
    assert calls == [
        (Address("user", "alice", "chat"), 7, 0.25, False, None),
        (Address("user", "alice", "chat"), 0, 0.25, False, guard),
    ]


def test_a_pure_read_append_never_writes(clock: Clock) -> None:
    class ReadOnly(MemoryStore):
        def append(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            raise AssertionError("a user turn with no content must not reach store.append")

    store = ReadOnly()
    service = MemoryService(store, clock=clock)
    MemoryStore.append(
        store, Address("user", "alice", "chat"), prepare({"role": "user", "content": "hi"})
    )
    result = service.append(
        "user", "chat", {"role": "user", "content": ""}, ALICE, max_messages=1, return_messages=True
    )
    assert (result.count, result.appended, len(result.messages)) == (1, 0, 1)
    quiet = service.append("user", "chat", [], ALICE, return_messages=False)
    assert (quiet.count, quiet.messages) == (1, [])


def test_appended_buffer_and_count_come_from_one_snapshot(service: MemoryService) -> None:
    result = service.append(
        "user", "chat", [{"role": "user", "content": "a"}], ALICE, return_messages=True
    )
    assert result.count == len(result.messages) == 1


def test_raw_variants_skip_resolution(
    caplog: pytest.LogCaptureFixture, service: MemoryService
) -> None:
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        assert service.write_raw("user", "u-42", "k", [1]) == WriteResult(True, "u-42")
        assert service.read("user", "k", ExecutionContext(user_id="u-42")).value == [1]
        assert service.read_raw("user", "u-42", "k") == ReadResult([1], True, "u-42")
        appended = service.append_raw("session", "", "chat", {"role": "user", "content": "a"})
        assert appended.resolved_scope_id == "" and appended.count == 1
        assert service.load_raw("session", "", "chat", last=5).count == 1
        assert service.clear_raw("session", "", "chat").removed == 1
        assert service.delete_raw("user", "u-42", "k").removed == 1
    assert caplog.records == []


def test_results_to_dict() -> None:
    assert ReadResult("v", True, "s").to_dict() == {
        "value": "v",
        "found": True,
        "resolved_scope_id": "s",
    }
    assert WriteResult(True, "s", 2).to_dict() == {
        "success": True,
        "resolved_scope_id": "s",
        "removed": 2,
    }
    refused = BufferResult(refusal=Refusal("user", "no_id", "x"))
    assert refused == BufferResult() and refused.to_dict()["messages"] == []


# --- text that cannot be stored (issue 12): refused before any store call ----------------

LONE = "a\ud800"


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.write("user", LONE, 1, ALICE),
        lambda s: s.read("user", LONE, ALICE),
        lambda s: s.write("user", "k", LONE, ALICE),
        lambda s: s.write("user", "k", {LONE: 1}, ALICE),
        lambda s: s.write("user", "k", [{"deep": [LONE]}], ALICE),
        lambda s: s.append("user", "k", {"role": "user", "content": LONE}, ALICE),
        lambda s: s.append(
            "user", "k", {"role": "user", "content": "x", "metadata": {LONE: 1}}, ALICE
        ),
        lambda s: s.append(
            "user", "k", {"role": "tool", "content": "x", "tool_call_id": LONE}, ALICE
        ),
        lambda s: s.append(
            "user", "k", {"role": "assistant", "content": "", "tool_calls": [{"id": LONE}]}, ALICE
        ),
        lambda s: s.write("workflow", "k", 1, ExecutionContext(workflow_id=LONE)),
        lambda s: s.append("execution", "k", [], ExecutionContext(execution_id=LONE)),
        lambda s: s.write_raw("global", LONE, "k", 1),
        lambda s: s.append_raw("user", "u", LONE, []),
    ],
)
def test_unstorable_text_raises_invalid_text_before_any_store_call(call: Any) -> None:
    store = ForbiddenStore()
    with pytest.raises(InvalidTextError) as caught:
        call(MemoryService(store))  # type: ignore[arg-type]
    assert caught.value.code == "invalid_text"
    assert store.touched == []


def test_unstorable_text_raises_the_same_error_on_every_backend(service: MemoryService) -> None:
    with pytest.raises(InvalidTextError):
        service.write("user", "k", LONE, ALICE)
    with pytest.raises(InvalidTextError):
        service.append("user", "k", {"role": "user", "content": LONE}, ALICE)
    assert service.read("user", "k", ALICE).found is False
    assert service.load("user", "k", ALICE).count == 0
    # a surrogate pair written as one character is ordinary text
    service.write("user", "k", "😀", ALICE)
    assert service.read("user", "k", ALICE).value == "😀"


def test_an_identity_id_with_a_surrogate_is_unusable_and_refuses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = ForbiddenStore()
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        result = MemoryService(store).write("user", "k", 1, ExecutionContext(user_id=LONE))  # type: ignore[arg-type]
    assert result.success is False and result.refusal is not None
    assert result.refusal.reason == "unusable_id" and len(caplog.records) == 1
