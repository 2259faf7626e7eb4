"""Scope resolution and usable identities (MEM-6, MEM-13; DESIGN.md §3)."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.errors import InvalidInputError, UnknownScopeError
from flowmem.scope import (
    IDENTITY_SCOPES,
    REFUSAL_REASONS,
    SCOPES,
    ExecutionContext,
    Refusal,
    _has_forbidden_character,
    resolve_scope,
    stored_spellings,
    usable_identity,
)

MISSING = object()
UUID_TEXT = "3f2b8c1e-9a4d-4e6f-8b1a-2c3d4e5f6a7b"

# (label, id, expected refusal reason) — every id the issue names, and a few more.
REFUSED_IDS: list[tuple[str, Any, str]] = [
    ("none", None, "no_id"),
    ("missing", MISSING, "no_id"),
    ("empty", "", "no_id"),
    ("int_zero", 0, "no_one_id"),
    ("str_zero", "0", "no_one_id"),
    ("str_double_zero", "00", "no_one_id"),
    ("str_signed_zero", "-0", "no_one_id"),
    ("blank", "  ", "unusable_id"),
    ("int_negative", -1, "unusable_id"),
    ("str_negative", "-1", "unusable_id"),
    ("true", True, "unusable_id"),
    ("false", False, "unusable_id"),
    ("float", 1.5, "unusable_id"),
    ("float_integral", 7.0, "unusable_id"),
    ("list", [], "unusable_id"),
    ("dict", {}, "unusable_id"),
    ("inner_space", "a b", "unusable_id"),
    ("too_long", "x" * 256, "unusable_id"),
    ("nul", "\x00x", "unusable_id"),
    ("newline", "alice\n", "unusable_id"),
    ("zero_width_space", "ali\u200bce", "unusable_id"),
    ("nbsp", "ali\u00a0ce", "unusable_id"),
    ("bytes", b"alice", "unusable_id"),
    ("placeholder_none", "None", "placeholder_id"),
    ("placeholder_null", "null", "placeholder_id"),
    ("placeholder_undefined", "undefined", "placeholder_id"),
    ("placeholder_nil", "nil", "placeholder_id"),
    ("str_signed_double_zero", "+00", "no_one_id"),
    ("lone_surrogate", "ali\ud800ce", "unusable_id"),
]

USABLE_IDS: list[tuple[str, Any, str]] = [
    ("int", 7, "7"),
    ("str_int", "7", "7"),
    ("name", "alice", "alice"),
    ("uuid", UUID_TEXT, UUID_TEXT),
    ("leading_zeros", "007", "007"),
    ("plus_sign", "+7", "+7"),
    ("nfd_is_nfc", "Zoe\u0308", "Zo\u00eb"),
    ("a_placeholder_inside_a_longer_id", "nullable", "nullable"),
    ("max_length", "y" * 255, "y" * 255),
    ("unicode", "Zoë", "Zoë"),
    ("email", "a@example.org", "a@example.org"),
]


def _context(scope: str, value: Any) -> ExecutionContext:
    field = "user_id" if scope == "user" else "session_id"
    if value is MISSING:
        return ExecutionContext(workflow_id="w1", pipeline_id="p1", node_id="n1")
    return ExecutionContext(workflow_id="w1", pipeline_id="p1", node_id="n1", **{field: value})


@pytest.mark.parametrize("label,value,reason", REFUSED_IDS, ids=[r[0] for r in REFUSED_IDS])
def test_mem_6_user_scope_refuses_unusable_ids(label: str, value: Any, reason: str) -> None:
    result = resolve_scope("user", _context("user", value))
    assert isinstance(result, Refusal)
    assert result.scope == "user"
    assert result.reason == reason
    assert "user" in result.sentence


@pytest.mark.parametrize("label,value,reason", REFUSED_IDS, ids=[r[0] for r in REFUSED_IDS])
def test_mem_13_session_scope_refuses_unusable_ids(label: str, value: Any, reason: str) -> None:
    result = resolve_scope("session", _context("session", value))
    assert isinstance(result, Refusal)
    assert result.scope == "session"
    assert result.reason == reason
    assert "session" in result.sentence


@pytest.mark.parametrize("scope", IDENTITY_SCOPES)
def test_mem_6_mem_13_absent_context_refuses(scope: str) -> None:
    result = resolve_scope(scope, None)
    assert result == Refusal(
        scope, "no_context", f"the {scope} scope refuses: there is no execution context"
    )


@pytest.mark.parametrize("label,value,expected", USABLE_IDS, ids=[u[0] for u in USABLE_IDS])
def test_mem_6_user_scope_resolves_usable_ids(label: str, value: Any, expected: str) -> None:
    assert resolve_scope("user", _context("user", value)) == expected


@pytest.mark.parametrize("label,value,expected", USABLE_IDS, ids=[u[0] for u in USABLE_IDS])
def test_mem_13_session_scope_resolves_usable_ids(label: str, value: Any, expected: str) -> None:
    assert resolve_scope("session", _context("session", value)) == expected


def test_mem_6_user_scope_reads_only_the_user_id() -> None:
    context = ExecutionContext(session_id="s1", workflow_id="w", execution_id="e", node_id="u")
    result = resolve_scope("user", context)
    assert isinstance(result, Refusal) and result.reason == "no_id"
    assert resolve_scope("session", ExecutionContext(user_id="alice")) == Refusal(
        "session", "no_id", "the session scope refuses: the execution context carries no session id"
    )


def test_refusal_reasons_are_a_closed_set() -> None:
    assert set(REFUSAL_REASONS) == {
        "no_context",
        "no_id",
        "unusable_id",
        "no_one_id",
        "placeholder_id",
    }
    reasons = {
        r.reason
        for scope in IDENTITY_SCOPES
        for _, value, _ in REFUSED_IDS
        if isinstance(r := resolve_scope(scope, _context(scope, value)), Refusal)
    }
    assert reasons | {"no_context"} == set(REFUSAL_REASONS)


def test_mem_6_non_identity_scopes_resolve_to_empty_without_ids() -> None:
    for context in (None, ExecutionContext()):
        for scope in ("global", "workflow", "pipeline", "execution"):
            assert resolve_scope(scope, context) == ""


def test_non_identity_scopes_resolve_to_their_ids() -> None:
    context = ExecutionContext(
        workflow_id="wf", pipeline_id=12, execution_id="ex-1", session_id="s", user_id="u"
    )
    assert resolve_scope("global", context) == ""
    assert resolve_scope("workflow", context) == "wf"
    assert resolve_scope("pipeline", context) == "12"
    assert resolve_scope("execution", context) == "ex-1"


def test_non_identity_scope_with_an_id_that_is_not_text_raises() -> None:
    with pytest.raises(InvalidInputError):
        resolve_scope("workflow", ExecutionContext(workflow_id=["w"]))
    with pytest.raises(InvalidInputError):
        resolve_scope("pipeline", ExecutionContext(pipeline_id=True))


@pytest.mark.parametrize("scope", ["", "User", "tenant", None, 3, ["user"]])
def test_unknown_scope_raises(scope: Any) -> None:
    with pytest.raises(UnknownScopeError) as caught:
        resolve_scope(scope, ExecutionContext(user_id="alice"))
    assert caught.value.code == "unknown_scope"


def test_context_of_the_wrong_type_raises() -> None:
    with pytest.raises(InvalidInputError):
        resolve_scope("user", {"user_id": "alice"})  # type: ignore[arg-type]


def test_scopes_are_the_six_of_the_design() -> None:
    assert SCOPES == ("global", "workflow", "pipeline", "execution", "session", "user")


def test_execution_context_is_frozen_and_defaults_empty() -> None:
    context = ExecutionContext()
    assert context.user_id is None and context.session_id is None
    assert dict(context.metadata) == {}
    with pytest.raises(AttributeError):
        context.user_id = "x"  # type: ignore[misc]


def test_execution_context_from_mapping() -> None:
    context = ExecutionContext.from_mapping(
        {"user_id": "alice", "node_id": "n", "metadata": {"k": 1}}
    )
    assert context.user_id == "alice" and context.node_id == "n"
    assert dict(context.metadata) == {"k": 1}
    with pytest.raises(InvalidInputError):
        ExecutionContext.from_mapping({"user": "alice"})
    with pytest.raises(InvalidInputError):
        ExecutionContext.from_mapping({"metadata": 3})
    with pytest.raises(InvalidInputError):
        ExecutionContext.from_mapping([("user_id", "a")])  # type: ignore[arg-type]


def test_usable_identity_text() -> None:
    assert usable_identity(7) == usable_identity("7") == "7"
    assert (usable_identity("007"), usable_identity("+7")) == ("007", "+7")
    assert usable_identity(10**300) is None  # more than 255 digits
    assert usable_identity("1" * 255) == "1" * 255
    assert usable_identity("1.0") == "1.0"  # not an integer literal: an ordinary name


_anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.from_regex(r"[+-]?[0-9]{1,5}", fullmatch=True),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@given(value=_anything, scope=st.sampled_from(IDENTITY_SCOPES))
def test_mem_6_mem_13_identity_scopes_never_resolve_to_empty(value: Any, scope: str) -> None:
    result = resolve_scope(scope, _context(scope, value))
    if isinstance(result, Refusal):
        assert result.reason in REFUSAL_REASONS
        assert result.sentence
    else:
        assert isinstance(result, str) and result != ""
        assert result == usable_identity(value)


@given(value=_anything)
def test_mem_6_refusal_is_never_the_empty_string(value: Any) -> None:
    result = resolve_scope("user", ExecutionContext(user_id=value))
    assert result != ""
    assert isinstance(result, Refusal) == (usable_identity(value) is None)


@given(value=_anything)
def test_usable_identity_is_bounded_text_without_whitespace(value: Any) -> None:
    text = usable_identity(value)
    if text is not None:
        assert 1 <= len(text) <= 255
        assert not any(ch.isspace() for ch in text)
        assert text not in ("0", "")


@given(number=st.integers(min_value=1, max_value=10**20))
def test_mem_6_int_and_its_text_name_the_same_identity(number: int) -> None:
    assert resolve_scope("user", ExecutionContext(user_id=number)) == resolve_scope(
        "user", ExecutionContext(user_id=str(number))
    )


def _forbidden_by_category(text: str) -> bool:
    """The rule spelled out per code point (the reference for the ASCII fast path)."""
    return any(
        char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zs", "Zl", "Zp")
        for char in text
    )


def test_every_ascii_character_is_judged_as_the_per_character_rule_judges_it() -> None:
    for code in range(128):
        text = f"user{chr(code)}1"
        assert _has_forbidden_character(text) is _forbidden_by_category(text), repr(text)


@given(st.text(max_size=40))
def test_forbidden_character_fast_path_agrees_with_the_rule(text: str) -> None:
    assert _has_forbidden_character(text) is _forbidden_by_category(text)


# --- decision 0016: identities compare exactly, in NFC; placeholders refused -------------


@pytest.mark.parametrize("scope", IDENTITY_SCOPES)
def test_mem_6_mem_13_integer_spellings_are_distinct_identities(scope: str) -> None:
    resolved = {
        value: resolve_scope(scope, _context(scope, value)) for value in (7, "7", "007", "+7")
    }
    assert resolved == {7: "7", "7": "7", "007": "007", "+7": "+7"}


@pytest.mark.parametrize("scope", IDENTITY_SCOPES)
def test_mem_6_mem_13_nfc_and_nfd_are_one_identity(scope: str) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "José"), unicodedata.normalize("NFD", "José")
    assert nfc != nfd
    assert (
        resolve_scope(scope, _context(scope, nfd))
        == resolve_scope(scope, _context(scope, nfc))
        == nfc
    )


@pytest.mark.parametrize("scope", IDENTITY_SCOPES)
@pytest.mark.parametrize(
    "placeholder", ["None", "null", "undefined", "nil", "NULL", "NONE", "Null", "UNDEFINED", "Nil"]
)
def test_mem_6_mem_13_placeholder_ids_refuse(scope: str, placeholder: str) -> None:
    result = resolve_scope(scope, _context(scope, placeholder))
    assert isinstance(result, Refusal) and result.reason == "placeholder_id"
    assert repr(placeholder) in result.sentence
    assert usable_identity(placeholder) is None


def test_usable_identity_length_counts_nfc_code_points() -> None:
    assert usable_identity("e\u0301" * 255) == "\u00e9" * 255  # 510 code points in NFD
    assert usable_identity("\u00e9" * 256) is None


@given(value=st.text(min_size=1, max_size=20))
def test_usable_identity_is_nfc_and_idempotent(value: str) -> None:
    text = usable_identity(value)
    if text is not None:
        assert unicodedata.is_normalized("NFC", text)
        assert usable_identity(text) == text
        assert usable_identity(unicodedata.normalize("NFD", value)) == text


def test_stored_spellings_add_only_what_was_stored_as_given_before_0016() -> None:
    nfd = unicodedata.normalize("NFD", "José")
    assert stored_spellings("alice") == ("alice",)
    assert stored_spellings(nfd) == (unicodedata.normalize("NFC", nfd), nfd)
    assert stored_spellings("None") == ("None",)
    assert stored_spellings("007") == ("007",)  # its old stored form "7" is user 7's
    assert stored_spellings("0") == stored_spellings("a b") == stored_spellings(None) == ()
