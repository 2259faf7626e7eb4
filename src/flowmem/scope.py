"""Execution context and memory-scope resolution (pure: no I/O, no logging).

``resolve_scope`` is the ONE place that decides whether a memory scope resolves to a
scope id or refuses (MEM-6, MEM-13, DESIGN.md §3). Every consumer — the memory
service and through it the nodes, the HTTP API, the runtime and the CLI — asks it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from flowmem.core.storable import check_storable
from flowmem.errors import InvalidInputError, UnknownScopeError

SCOPES: Final[tuple[str, ...]] = ("global", "workflow", "pipeline", "execution", "session", "user")
IDENTITY_SCOPES: Final[tuple[str, ...]] = ("session", "user")
NAME_MAX: Final = 255  # code points of a key, a scope id or an identity (DESIGN.md §3)
MAX_IDENTITY_LENGTH: Final = NAME_MAX

# The closed set of reasons a scope refuses, with the sentence each stands for.
REFUSAL_REASONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "no_context": "there is no execution context",
        "no_id": "the execution context carries no {what} id",
        "unusable_id": "the execution context's {what} id is not a usable identifier",
        "no_one_id": "the execution context's {what} id is the id that denotes no {what}",
        "placeholder_id": "the execution context's {what} id is {value}, what a client sends "
        "when its id is empty",
    }
)
# What a client sends when its id variable is empty (DESIGN.md §3, decision 0016):
# never a real identity, or every such client would share one memory. Compared exactly.
PLACEHOLDER_IDS: Final[frozenset[str]] = frozenset({"none", "null", "undefined", "nil"})
"""The placeholders a client sends for an empty id variable, in lower case: unusable in any case."""

# An integer literal: optional sign, ASCII digits only.
_INTEGER_LITERAL = re.compile(r"[+-]?[0-9]+")
# Context fields read by each scope other than global.
_SCOPE_FIELD: Final[Mapping[str, str]] = MappingProxyType(
    {
        "workflow": "workflow_id",
        "pipeline": "pipeline_id",
        "execution": "execution_id",
        "session": "session_id",
        "user": "user_id",
    }
)
_CONTEXT_FIELDS: Final[tuple[str, ...]] = (
    "workflow_id",
    "pipeline_id",
    "execution_id",
    "node_id",
    "session_id",
    "user_id",
)


def _empty_metadata() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ExecutionContext:
    """Who and where a memory operation runs for; every field is optional.

    Ids are kept exactly as the host passed them: whether one is usable is decided
    by ``resolve_scope``, never when the context is built.
    """

    workflow_id: Any = None
    pipeline_id: Any = None
    execution_id: Any = None
    node_id: Any = None
    session_id: Any = None
    user_id: Any = None
    metadata: Mapping[str, Any] = field(default_factory=_empty_metadata, hash=False)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ExecutionContext:
        """Build a context from a plain mapping (unknown keys raise ``InvalidInputError``)."""
        if not isinstance(data, Mapping):
            raise InvalidInputError(
                f"an execution context must be an object, got {type(data).__name__}"
            )
        unknown = sorted(str(k) for k in data if k not in (*_CONTEXT_FIELDS, "metadata"))
        if unknown:
            raise InvalidInputError(f"unknown execution context field(s): {', '.join(unknown)}")
        metadata = data.get("metadata")
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, Mapping):
            raise InvalidInputError("execution context metadata must be an object")
        ids = {name: data.get(name) for name in _CONTEXT_FIELDS}
        return cls(**ids, metadata=MappingProxyType(dict(metadata)))


@dataclass(frozen=True)
class Refusal:
    """A scope that refused to resolve: which scope, a reason code, and a sentence."""

    scope: str
    reason: str
    sentence: str

    @property
    def code(self) -> str:
        """The refusal as one stable code naming its scope: ``no_session_id``, ``unusable_user_id`` …

        What the HTTP API reports as ``refused`` (and ``X-Flowmem-Refused``) and the
        results' ``refused`` is: the reason with ``id`` spelled as the scope's id
        (``REFUSAL_CODES``); ``no_context`` names no scope.
        """
        if self.reason.endswith("_id") and self.scope:
            return f"{self.reason[:-2]}{self.scope}_id"
        return self.reason

    @classmethod
    def from_code(cls, code: str) -> Refusal:
        """The refusal a ``refused`` code stands for (``flowmem.client`` reads the server's).

        A code this version does not know is kept as the reason, with no scope.
        """
        scope, reason = REFUSAL_CODES.get(code, ("", code))
        if reason not in REFUSAL_REASONS:
            return cls(scope=scope, reason=reason, sentence=f"the scope refuses: {code}")
        text = REFUSAL_REASONS[reason].format(what=scope or "scope", value="a placeholder")
        where = f"the {scope} scope" if scope else "the scope"
        return cls(scope=scope, reason=reason, sentence=f"{where} refuses: {text}")

    def to_dict(self) -> dict[str, str]:
        """Return the refusal as a plain dict."""
        return {"scope": self.scope, "reason": self.reason, "sentence": self.sentence}


REFUSAL_CODES: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        Refusal(scope, reason, "").code: ("" if reason == "no_context" else scope, reason)
        for scope in IDENTITY_SCOPES
        for reason in REFUSAL_REASONS
    }
)
"""Every ``Refusal.code`` → (scope, reason): ``no_session_id``, ``placeholder_user_id``, ``no_context`` …"""


def _has_forbidden_character(text: str) -> bool:
    """True when ``text`` holds whitespace or a control, format or surrogate code point."""
    if text.isascii():  # the common case, in C: ASCII's forbidden ones are controls and space
        return not text.isprintable() or " " in text
    for char in text:
        if char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zs", "Zl", "Zp"):
            return True
    return False


def usable_identity(value: object) -> str | None:
    """Return the identity text of a usable id, or None when it is not usable.

    The one decision of DESIGN.md §3 (decision 0016): an ``int`` > 0 (never ``bool``)
    is its plain decimal text; a ``str`` is taken in Unicode NFC and is usable when it
    has 1–255 code points, no whitespace or control characters, is not a placeholder
    (``"None"``, ``"null"``, ``"undefined"``, ``"nil"``, in any letter case) and, if it is an integer
    literal, denotes a positive integer. Ids compare exactly as this text: ``7`` and
    ``"7"`` are one identity, ``"007"`` and ``"+7"`` are two others; ``"é"`` in NFC
    and in NFD is one.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if value <= 0 or value.bit_length() > 850:  # more than 255 digits
            return None
        text = str(int(value))
        return text if len(text) <= MAX_IDENTITY_LENGTH else None
    if not isinstance(value, str):
        return None
    text = str(value)
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    if not 1 <= len(text) <= MAX_IDENTITY_LENGTH or _has_forbidden_character(text):
        return None
    if len(text) <= 9 and text.lower() in PLACEHOLDER_IDS:
        return None
    if _INTEGER_LITERAL.fullmatch(text) and int(text) <= 0:
        return None
    return text


def stored_spellings(value: object) -> tuple[str, ...]:
    """Return every spelling under which data of the id ``value`` may be stored (erasure).

    The usable id's text first (``usable_identity``); then, for text flowmem stored
    exactly as given before decision 0016 — a spelling not in NFC, or a placeholder
    such as ``"None"`` — that text too, so erasing it leaves nothing behind. An
    integer literal has no other spelling: before 0016 ``"007"`` was stored as ``"7"``,
    the id ``"7"`` still names.
    """
    usable = usable_identity(value)
    spellings = [] if usable is None else [usable]
    if (
        isinstance(value, str)
        and value != usable
        and 1 <= len(value) <= MAX_IDENTITY_LENGTH
        and not _has_forbidden_character(value)
        and not _INTEGER_LITERAL.fullmatch(value)
    ):
        spellings.append(str(value))
    return tuple(spellings)


def _denotes_no_one(value: object) -> bool:
    """True for the id that denotes nobody: ``0`` or an integer literal of zero."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value == 0
    return isinstance(value, str) and bool(_INTEGER_LITERAL.fullmatch(value)) and int(value) == 0


def _refusal(scope: str, reason: str, value: object = None) -> Refusal:
    text = REFUSAL_REASONS[reason].format(what=scope, value=repr(value))
    sentence = f"the {scope} scope refuses: " + text
    return Refusal(scope=scope, reason=reason, sentence=sentence)


def _identity(scope: str, context: ExecutionContext | None) -> str | Refusal:
    """Resolve an identity scope to its usable id, or refuse.

    Implements MEM-6 (``user``). Implements MEM-13 (``session``). Refuses when the
    context is absent, carries no id, carries an unusable id, or carries the id
    that denotes nobody, or a placeholder for a missing id. A refusal is never the
    empty string.
    """
    if context is None:
        return _refusal(scope, "no_context")
    value = getattr(context, _SCOPE_FIELD[scope])
    if value is None or (isinstance(value, str) and value == ""):
        return _refusal(scope, "no_id")
    if _denotes_no_one(value):
        return _refusal(scope, "no_one_id")
    if isinstance(value, str) and value.lower() in PLACEHOLDER_IDS:
        return _refusal(scope, "placeholder_id", value)
    usable = usable_identity(value)
    if usable is None:
        return _refusal(scope, "unusable_id")
    return usable


def _plain_id(scope: str, context: ExecutionContext | None) -> str:
    """Return the workflow/pipeline/execution id as text, ``""`` when absent.

    Text that cannot be stored raises ``InvalidTextError`` (``check_storable``).
    """
    if context is None:
        return ""
    value = getattr(context, _SCOPE_FIELD[scope])
    if value is None:
        return ""
    if isinstance(value, str):
        check_storable(value, _SCOPE_FIELD[scope])
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(int(value))
    raise InvalidInputError(
        f"the execution context's {_SCOPE_FIELD[scope]} must be text or an integer, "
        f"got {type(value).__name__}",
        argument=_SCOPE_FIELD[scope],
    )


def check_scope(scope: object) -> str:
    """Return ``scope`` when it names one of the six scopes; raise ``UnknownScopeError``."""
    if not isinstance(scope, str) or scope not in SCOPES:
        raise UnknownScopeError(
            f"unknown memory scope {scope!r}: expected one of {', '.join(SCOPES)}",
            argument="scope",
            scope=scope if isinstance(scope, str) else repr(scope),
        )
    return str(scope)


def resolve_scope(scope: object, context: ExecutionContext | None) -> str | Refusal:
    """Resolve a memory scope against a context to a scope id, or return a ``Refusal``.

    Implements MEM-6. Implements MEM-13. DESIGN.md §3: ``global`` → ``""``; ``workflow`` /
    ``pipeline`` / ``execution`` → that id as text, ``""`` when absent; ``session``
    and ``user`` → the usable id's text (``usable_identity``), or a refusal (never ``""``). An unknown
    scope name raises ``UnknownScopeError``; a context that is not an
    ``ExecutionContext`` (or None) raises ``InvalidInputError``.
    """
    name = check_scope(scope)
    if context is not None and not isinstance(context, ExecutionContext):
        raise InvalidInputError(
            f"context must be an ExecutionContext or None, got {type(context).__name__}"
        )
    if name == "global":
        return ""
    if name in IDENTITY_SCOPES:
        return _identity(name, context)
    return _plain_id(name, context)
