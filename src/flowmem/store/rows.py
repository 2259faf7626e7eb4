"""Conversions shared by the stores and the services: address checks, JSON text and its size, rows.

A size limit counts what is stored: the UTF-8 bytes of the JSON text ``dump_json``
writes (``utf8_size``; the limits are ``flowmem.limits``, checked by the services:
``flowmem.service.check_size``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from flowmem.core.messages import ROLES, Message
from flowmem.core.storable import check_storable, storable_text
from flowmem.errors import (
    AccessDeniedError,
    AuthenticationError,
    BufferFullError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    NotSerializableError,
    SessionDeletedError,
    StoreCorruptError,
    TooManySessionsError,
)
from flowmem.store.base import Address, SessionClaim, SessionRecord, TokenRecord, WriteGuard

MAX_CODE_POINT = "\U0010ffff"


def successor(key: str) -> str:
    """The smallest key after ``key`` (keys hold no NUL): where the page after ``key`` starts."""
    return key + "\x01"


def prefix_end(prefix: str) -> str | None:
    """The smallest key after every key starting with ``prefix``; None when there is none."""
    stripped = prefix.rstrip(MAX_CODE_POINT)
    if not stripped:
        return None
    return stripped[:-1] + chr(ord(stripped[-1]) + 1)


def check_address(address: Address) -> None:
    """Refuse an address whose parts are not storable strings without NUL characters."""
    if len(address) != 3:
        raise InvalidInputError(f"an address is (scope, scope_id, key), got {address!r}")
    for part in address:  # ASCII strings without NUL pass at once; anything else is checked below
        if type(part) is not str or "\x00" in part or not part.isascii():
            break
    else:
        return
    for name, part in zip(("scope", "scope_id", "key"), address, strict=True):
        if not isinstance(part, str):
            raise InvalidInputError(f"address parts must be strings, got {part!r}")
        if "\x00" in part:
            raise InvalidInputError("address parts must not contain NUL characters")
        if not part.isascii():  # ASCII text is always storable (no surrogates)
            check_storable(part, name)


def check_rows(rows: Any) -> None:
    """Refuse rows holding text that cannot be stored (``InvalidTextError``), before any lock.

    Rows that are all ``DumpedRow`` were checked when their text was made (``dumped_rows``).
    """
    if isinstance(rows, list) and rows:
        for row in rows:
            if type(row) is not DumpedRow:
                break
        else:
            return
    check_storable(rows, "messages")


def check_texts(**fields: object) -> None:
    """Refuse (``InvalidTextError``) any of the named string fields that is not storable."""
    for name, value in fields.items():
        if isinstance(value, str):
            check_storable(value, name)


def check_last(last: int | None) -> None:
    """Refuse a ``last`` that is not None or an integer >= 0."""
    if last is None:
        return
    if isinstance(last, bool) or not isinstance(last, int) or last < 0:
        raise InvalidInputError(f"last must be an integer >= 0, got {last!r}")


def check_batch(batch: int) -> None:
    """Refuse a batch size that is not an integer >= 1."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidInputError(f"batch must be an integer >= 1, got {batch!r}")


def check_lock_timeout(seconds: float) -> float:
    """Return a lock timeout as seconds >= 0; InvalidInputError for a non-number or NaN."""
    if type(seconds) is float and 0.0 <= seconds <= 86400.0:  # in bounds already (not NaN)
        return seconds
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds:
        raise InvalidInputError(f"lock_timeout must be a number of seconds, got {seconds!r}")
    return min(max(float(seconds), 0.0), 86400.0)


def check_none_running(sessions: Iterable[tuple[str, str]]) -> None:
    """Refuse an erasure (ConflictError) while one of the user's ``(id, status)`` sessions runs."""
    for session_id, status in sessions:
        if status == "running":
            raise ConflictError(
                f"session {session_id} of this user is running a turn; stop it first"
            )


def guard_form(guard: WriteGuard | None) -> tuple[str, tuple[Any, ...]]:
    """Return the guard's kind and its parameters.

    Kinds: ``""``, ``token``, ``session``, ``both``; with a claim that names the owner
    (``SessionClaim``) ``owned`` and ``both_owned``, and ``same`` and ``both_same``
    for a claim of an existing session that also names its ``created_at`` (the
    session the request loaded, not one deleted and made again). The SQL backends
    name a guarded statement ``name@kind``; its guard condition takes the
    parameters in this order (the session, its owner, its creation, the token).
    """
    if guard is None:
        return "", ()
    claim = guard.claim
    if guard.session_id is not None and claim is not None and not claim.any_owner:
        if not claim.create and claim.created_at:  # this very session, not one made again
            if guard.token_id is not None:
                return "both_same", (
                    guard.session_id,
                    claim.owner,
                    claim.created_at,
                    guard.token_id,
                )
            return "same", (guard.session_id, claim.owner, claim.created_at)
        if guard.token_id is not None:
            return "both_owned", (guard.session_id, claim.owner, guard.token_id)
        return "owned", (guard.session_id, claim.owner)
    if guard.token_id is not None and guard.session_id is not None:
        return "both", (guard.session_id, guard.token_id)
    if guard.token_id is not None:
        return "token", (guard.token_id,)
    if guard.session_id is not None:
        return "session", (guard.session_id,)
    return "", ()


def ensure_form(guard: WriteGuard | None) -> tuple[str, tuple[Any, ...]] | None:
    """Return the statement name and parameters that create a claimed session, or None.

    None when the guard creates no session. The statement (``session_ensure``, with
    ``@token`` when the guard has a token, checked first: the lock order of
    docs/decisions/0014) inserts the session unless it exists, the token is not
    valid, or its owner already owns ``limit`` sessions; it never fails.
    """
    if guard is None or guard.session_id is None or guard.claim is None or not guard.claim.create:
        return None
    claim, sid = guard.claim, guard.session_id
    owner = None if claim.any_owner else claim.owner
    head = (sid, owner, claim.created_at, claim.created_at)
    tail = (sid, sid, claim.limit, owner, owner, claim.limit)
    if guard.token_id is not None:
        return "session_ensure@token", (*head, guard.token_id, *tail)
    return "session_ensure", (*head, *tail)


def guard_failed(
    token_valid: bool,
    guard: WriteGuard | None = None,
    owner: tuple[str | None] | None = None,
    owned: int = 0,
    deleted: bool = False,
) -> AuthenticationError | NotFoundError | AccessDeniedError | TooManySessionsError:
    """The error of a write whose guard failed: the token first (401), else the session's.

    With a claim (``SessionClaim``): ``owner`` is the session's ``(owner,)`` as found
    after the failure (None: no session) and ``owned`` how many sessions the claimed
    owner has. Another owner is AccessDeniedError (MEM-8), NotFoundError for a
    concealing claim; a session to create past the limit is TooManySessionsError;
    otherwise NotFoundError.
    """
    if not token_valid:
        return AuthenticationError("invalid token")
    if deleted and owner is None:
        return _deleted_error("" if guard is None else guard.session_id)
    claim = None if guard is None else guard.claim
    if claim is None:
        return NotFoundError("no such session")
    sid = guard.session_id if guard is not None else None
    if owner is not None and _held_by_another(claim, owner[0]):
        return _another_owners_error(claim, sid)
    if owner is None and claim.create and claim.limit and owned >= claim.limit:
        return TooManySessionsError(
            f"this user owns {owned} sessions, the limit is {claim.limit}: delete some first",
            limit=claim.limit,
        )
    return NotFoundError("no such session")


def _deleted_error(session_id: str | None) -> SessionDeletedError:
    """The error of a write to a deleted session: it is refused and does not create it again."""
    return SessionDeletedError(
        f"session {session_id} was deleted: a write to it is refused and does not create it "
        "again; use a new session id",
        session_id=session_id,
    )


def _held_by_another(claim: SessionClaim, found: str | None) -> bool:
    """Whether a session found owned by ``found`` is another owner's than ``claim`` asks for."""
    # a request's own session gone (deleted, perhaps made again) is 404 whoever owns it now
    gone = not claim.create and bool(claim.created_at)
    return not claim.any_owner and not gone and found != claim.owner


def _another_owners_error(
    claim: SessionClaim, session_id: str | None
) -> NotFoundError | AccessDeniedError:
    """Another owner's session: AccessDeniedError (MEM-8), NotFoundError for a concealing claim."""
    if claim.conceal:  # the caller found no session: it must not learn of this one
        return NotFoundError("no such session")
    return AccessDeniedError(
        f"session {session_id} belongs to another owner than the context's user",
        rule="MEM-8",
    )


def check_not_running(session_id: str, status: str | None) -> None:
    """Refuse a change to a running session's buffer (ConflictError); ``status`` None: no session."""
    if status == "running":
        raise ConflictError(f"session {session_id} is running a turn; stop it first")
def check_buffer_bytes(address: Address, before: int, after: int, limit: int) -> None:
    """Refuse (BufferFullError) an append that grew a buffer to more than ``limit`` bytes.

    An append that leaves a buffer over the limit without growing it (a window
    evicted as much as it added, or the limit was lowered) is allowed.
    """
    if limit and after > limit and after > before:
        scope, _, key = address
        raise BufferFullError(
            f"buffer {scope}/{key} would hold {after} bytes, over the limit of {limit} bytes "
            "(clear it, or append with max_messages to keep a window)",
            limit=limit,
            size=after,
        )


def check_page(limit: int, offset: int = 0) -> None:
    """Refuse a negative (or non-integer) page limit or offset."""
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{name} must be an integer >= 0, got {value!r}")


# built once: json.dumps with any option set builds a new encoder on every call
_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_SPACED = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _row_encoder() -> Callable[[Any, int], Sequence[str]]:
    """``_COMPACT``'s C encoder, built once: ``"".join(it(row, 0))`` is ``_COMPACT.encode(row)`` for a dict.

    ``JSONEncoder.encode`` runs two Python frames and builds this encoder on every call
    (decision 0168). Built once it has no circular check (``markers``: a shared table
    would be shared by threads), so a cyclic row ends in ``RecursionError`` where
    ``_COMPACT`` says ``ValueError``: both are a failed fast path, which the callers
    hand to the plain checks. Without the C encoder: ``_COMPACT.encode`` itself.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover (CPython has it)
        return lambda row, _: (_COMPACT.encode(row),)
    encoder: Callable[[Any, int], Sequence[str]] = make(
        None, _COMPACT.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return encoder


_ROW_CHUNKS = _row_encoder()


def dump_json(value: Any, what: str, compact: bool = True) -> str:
    """Serialize ``value`` strictly (compact unless told).

    NotSerializableError naming ``what`` for what JSON cannot hold, InvalidTextError
    for text UTF-8 cannot encode (every backend alike: the memory store too).
    """
    try:
        text: str = (_COMPACT if compact else _SPACED).encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotSerializableError(f"{what} is not JSON-serializable: {exc}") from exc
    if not storable_text(text):
        check_storable(value, what.replace(" ", "_"))  # raises, naming the field
    return text


class DumpedRow(dict):  # type: ignore[type-arg]
    """A prepared row with its stored JSON text, made once (``dumped_rows``; decision 0161).

    It is the row (a ``dict``, written and read as any row) and ``text`` is exactly what
    ``dump_json(row, "message")`` returns for it, proven storable. The stores write
    ``text`` instead of serializing the row again (``flowmem.store.editor.dump_row``)
    and skip its storability walk (``check_rows``). Made only by ``dumped_rows`` from a
    row nobody else holds; a copy (``dict(row)``) is a plain row again.
    """

    __slots__ = ("text",)

    text: str


def dumped_rows(rows: list[Message]) -> list[Message]:
    """Each prepared row with its JSON text (``DumpedRow``), or the plain checks' error.

    One serialization a row proves it JSON and storable (a lone surrogate shows in the
    text as itself). The errors are the plain path's, in its order: ``InvalidTextError``
    naming the field as ``check_storable(rows, "messages")`` does, then
    ``NotSerializableError`` as ``dump_json(row, "message")`` does.
    """
    made: list[Message] = []
    for row in rows:
        try:
            text: str = "".join(_ROW_CHUNKS(row, 0))
        except (TypeError, ValueError, RecursionError):
            break
        if not storable_text(text):
            break
        dumped = DumpedRow(row)
        dumped.text = text
        made.append(dumped)
    else:
        return made
    check_storable(rows, "messages")
    for row in rows:
        dump_json(row, "message")
    return list(rows)  # the checks passed after all: the plain rows, which the store checks again


def dumped_ahead(rows: Any) -> Any:
    """``rows`` with each plain row serialized now (``DumpedRow``), or ``rows`` as given.

    A store's own fast path (decision 0163): the text the editor would make while the
    append holds its lock, made once before it, which also proves the rows storable, so
    ``check_rows`` need not walk them. Only when every row is a ``dict`` (or a
    ``DumpedRow`` already) whose text serializes and is storable; any other input is
    returned as given, and the plain checks decide and word its error as before (a row
    that is not JSON fails only if the rules write it, as before).
    """
    if type(rows) is not list:
        return rows
    made: list[Message] = []
    for row in rows:
        kind = type(row)
        if kind is DumpedRow:
            made.append(row)
            continue
        if kind is not dict:
            return rows
        try:
            text: str = "".join(_ROW_CHUNKS(row, 0))
        except (TypeError, ValueError, RecursionError):
            return rows
        if not storable_text(text):
            return rows
        dumped = DumpedRow(row)
        dumped.text = text
        made.append(dumped)
    return made


def utf8_size(text: str) -> int:
    """Return the UTF-8 length of ``text`` (O(1) for ASCII text, which knows it is ASCII)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def to_json(value: Any) -> str:
    """Serialize a memory value strictly; raise NotSerializableError when it is not JSON."""
    return dump_json(value, "value", compact=False)


def session_from_row(row: Sequence[Any]) -> SessionRecord:
    """Build a SessionRecord from (id, name, owner, status, agent, metadata, created, updated)."""
    return SessionRecord(
        id=row[0],
        name=row[1],
        owner=row[2],
        status=row[3],
        agent=row[4],
        metadata=stored_json(row[5]),
        created_at=float(row[6]),
        updated_at=float(row[7]),
    )


def token_from_row(row: Sequence[Any]) -> TokenRecord:
    """Build a TokenRecord from (id, hash, user_id, permissions JSON, created, revoked, label)."""
    return TokenRecord(
        id=row[0],
        token_hash=row[1],
        user_id=row[2],
        permissions=frozenset(stored_json(row[3])),
        created_at=float(row[4]),
        revoked=bool(row[5]),
        label=row[6],
    )


# One object per role text: ``json.loads`` shares the keys of one document but makes
# a new string for every value, and every row repeats its role (about 55 bytes each).
_ROLE_TEXT: dict[str, str] = {role: sys.intern(role) for role in ROLES}
_NAMES_MAX = 4096  # distinct call texts one decode shares at most (tool names are few)


def stored_json(text: str | bytes) -> Any:
    """Parse JSON flowmem stored; StoreCorruptError when it no longer parses (the database is damaged).

    flowmem writes only JSON it produced: text that does not parse was changed on
    the disk, and is named as damage (503 ``store_corrupt``), not a fault of the
    request (issue 38 §5).
    """
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreCorruptError(f"a stored row is not JSON ({exc.__class__.__name__}): the database is damaged") from None


def decode_rows(bodies: Iterable[str]) -> list[Message]:
    """Parse stored row texts into rows, sharing the texts every row repeats.

    The texts are parsed as one JSON array (one decoder call: about 3x faster than
    row by row, and every key is one object for the whole batch). Role texts, and
    the ``type`` and (function) ``name`` of tool call entries, are then replaced by one
    shared string object each: equal immutable values, so nothing a caller sees
    changes, only fewer bytes per loaded row. Each row keeps its own dicts (its
    ``metadata`` too), so mutating one loaded row never touches another.
    """
    rows: list[Message] = stored_json("[" + ",".join(bodies) + "]")
    roles = _ROLE_TEXT
    names: dict[str, str] = {}
    for row in rows:
        role = row.get("role")
        if role in roles:
            row["role"] = roles[role]
        meta = row.get("metadata")
        calls = meta.get("tool_calls") if type(meta) is dict else None
        if type(calls) is list:
            for call in calls:
                _share_call_texts(call, names)
    return rows


def _share_call_texts(call: object, names: dict[str, str]) -> None:
    """Replace a tool call entry's ``type`` and (function) ``name`` by their shared strings."""
    if type(call) is not dict:
        return
    for field in ("type", "name"):
        text = call.get(field)
        if type(text) is str:
            call[field] = _shared(text, names)
    function = call.get("function")
    if type(function) is dict:
        name = function.get("name")
        if type(name) is str:
            function["name"] = _shared(name, names)


def _shared(text: str, names: dict[str, str]) -> str:
    """Return the shared string equal to ``text`` (remembering it while there is room)."""
    found = names.get(text)
    if found is not None:
        return found
    if len(names) < _NAMES_MAX:
        names[text] = text
    return text
