"""Google Gemini ``contents`` and ``system_instruction`` ↔ flowmem rows (lossless within the format).

The shape of ``google.genai.types.Content`` (role ``user`` or ``model``, ``parts``),
read in the Python SDK's snake_case or the REST API's camelCase. A model content
is one assistant row (its ``function_call`` parts the calls); a user content is
split like an Anthropic user message: each ``function_response`` a tool row, the
parts between user rows. How rows were grouped into contents, and each content's
role, are recorded where the defaults would not give them back.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from flowmem.core import Message
from flowmem.errors import InvalidMessageError, UnknownRoleError, UnsupportedContentError
from flowmem.formats._common import (
    HINT,
    call_entry,
    extra_of,
    fields_of,
    input_object,
    kept_whole,
    note,
    part_kind,
    provider_part,
    put_extra,
    read_entry,
    read_parts,
    require_list,
    require_map,
    whole,
)
from flowmem.formats.fast import plain_call, provider_rows
from flowmem.formats.gemini_ids import CallIds
from flowmem.formats.gemini_parts import (
    FMT,
    data_fields,
    merged,
    part_from_gemini,
    part_to_gemini,
    read_spelling,
    remainder,
    require_name,
    write_camel,
)

CALL_KINDS = ("function",)
"""The call kinds Gemini carries (``function_call``); any other kind is dropped with its results."""

ROLES = ("user", "model", "tool", "function")
"""The content roles read: ``user``, ``model``, and ``tool``/``function`` for function responses."""

_ORDER = HINT + "order"  # the order of a model content's parts (p) and function calls (c)
_ROLE = HINT + "role"  # the content's role when not the default (False: the content had none)
_NEW = HINT + "new"  # this row started a content where the default would have joined the last
_JOIN = HINT + "join"  # this row continued a content where the default would have started one
_CAMEL = HINT + "camel"  # the content (or system instruction) was spelled in camelCase
_NO_ID = HINT + "no_id"  # a call or response sent without an id (decision 0055)
_NO_ARGS = HINT + "no_args"  # a function call sent without args
_RESPONSE = HINT + "response"  # "object": the response's JSON is the content; "absent": none
_KEY = HINT + "key"  # "result": the response's one text field was ``result``, not ``output``
_STRING = HINT + "string"  # the system instruction was a string
_CONTENT_KEYS = frozenset({"role", "parts"})
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})  # a row without extras (read only)


def _side(role: object) -> str:
    return "model" if role == "model" else "user"


def _plain_text(parts: list[dict[str, Any]]) -> str | None:
    """Return the text of content that is exactly one text part without extra fields."""
    if len(parts) == 1 and parts[0].keys() == {"type", "text"} and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return None


def _row_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    text = _plain_text(parts)
    return parts if text is None else text


# --- rows → contents ------------------------------------------------------------------------


def _blocks(content: Any, dropped: dict[str, int] | None) -> list[dict[str, Any]]:
    if type(content) is str:  # one text part, as read_parts and part_to_gemini would make it
        return [{"text": content}] if content else []
    out: list[dict[str, Any]] = []
    for part in read_parts(content):
        block = part_to_gemini(part)
        if block is None:
            note(dropped, part_kind(part))
        elif block != {"text": ""}:  # Gemini rejects an empty text part
            out.append(block)
    return out


def _model_parts(
    row: Message, dropped: dict[str, int] | None, skipped: dict[str, str], unnamed: set[str], names: dict[str, str]
) -> list[dict[str, Any]]:
    """Return an assistant row's Gemini parts; record each call's name (its response names it) and those left out."""
    blocks = _blocks(row["content"], dropped)
    calls: list[dict[str, Any]] = []
    for raw in row.get("tool_calls") or []:
        plain = plain_call(raw)
        if plain is not None:  # the common entry, written as the general path below writes it
            cid, name, args = plain
            names[cid] = name
            calls.append({"function_call": {"id": cid, "name": name, "args": input_object(args)}})
            continue
        call = read_entry(raw)
        names[call.id] = call.name
        if call.kind not in CALL_KINDS:
            note(dropped, call.kind)
            skipped[call.id] = call.kind
            continue
        extra = extra_of(raw, FMT)
        function: dict[str, Any] = {} if extra.get(_NO_ID) else {"id": call.id}
        if not function:
            unnamed.add(call.id)
        function["name"] = call.name
        if not (extra.get(_NO_ARGS) and call.args == {}):
            function["args"] = input_object(call.args)
        calls.append(_with_fields({"function_call": function}, extra))
    order = None if row.get("extra") is None else extra_of(row, FMT).get(_ORDER)
    if order is None:
        return blocks + calls
    if not (
        isinstance(order, str)
        and set(order) <= {"p", "c"}
        and order.count("p") == len(blocks)
        and order.count("c") == len(calls)
    ):
        order = "p" * len(blocks) + "c" * len(calls)
    parts, uses = iter(blocks), iter(calls)
    return [next(parts) if token == "p" else next(uses) for token in order]


def _with_fields(block: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``block`` with the Gemini fields of an ``extra.gemini`` merged in (``merged``), when there are any."""
    fields = fields_of(extra)
    return merged(block, fields) if fields else block


def _response(row: Message, text: str, extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return the ``response`` object of a tool row (None when the response had none)."""
    form = extra.get(_RESPONSE)
    if row.get("is_error") is True:
        return {"error": text}
    if form == "object":
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
    if form == "absent" and text == "":
        return None
    return {"result" if extra.get(_KEY) == "result" else "output": text}


def _response_part(
    row: Message, names: Mapping[str, str], dropped: dict[str, int] | None, unnamed: Collection[str] = ()
) -> dict[str, Any]:
    """Return a tool row's ``function_response`` part; no id when it had none or its call was sent without."""
    content, cid = row["content"], row["tool_call_id"]
    if type(content) is str and row.get("extra") is None:  # a text result without hints, written at once
        function: dict[str, Any] = {} if cid in unnamed else {"id": cid}
        function["name"] = names.get(cid, "")
        function["response"] = {"error": content} if row.get("is_error") is True else {"output": content}
        return {"function_response": function}
    if type(content) is not str:  # (kept whole: a list of one provider part)
        kept = kept_whole(row, FMT, lambda block: "function_response" in block)
        if kept is not None:
            return kept
    extra = extra_of(row, FMT)
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    for part in read_parts(row["content"]):
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
            continue
        block = part_to_gemini(part)
        if block is None or not {"inline_data", "file_data"} & set(data_fields(block)) or len(data_fields(block)) != 1:
            note(dropped, part_kind(part))
        else:
            media.append(block)
    function = {} if extra.get(_NO_ID) or cid in unnamed else {"id": cid}
    function["name"] = names.get(cid, "")
    response = _response(row, "\n".join(texts), extra)
    if response is not None:
        function["response"] = response
    if media:
        function["parts"] = media
    return _with_fields({"function_response": function}, extra)


def _role_hint(extra: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Return whether a row names its content's role, and that role (None: no role)."""
    if _ROLE not in extra:
        return False, None
    role = extra[_ROLE]
    return True, role if isinstance(role, str) else None


def _joins(extra: Mapping[str, Any], last: Mapping[str, Any], default: str) -> bool:
    """Whether a row's parts join the last content: its side, and its hints or the default say so."""
    if _side(last.get("role")) != _side(default):
        return False
    if extra.get(_JOIN) is True:
        return True
    return _ROLE not in extra and not extra.get(_NEW) and last.get("role") == default


def _place(out: list[dict[str, Any]], row: Message, parts: list[dict[str, Any]]) -> None:
    """Add a row's parts to the last content, or start one, as its hints and role say."""
    extra = _NO_EXTRA if row.get("extra") is None else extra_of(row, FMT)
    default = "model" if row["role"] == "assistant" else "user"
    if out and _joins(extra, out[-1], default):
        out[-1]["parts"].extend(parts)
        return
    out.append(_new_content(extra, default, parts))


def _new_content(extra: Mapping[str, Any], default: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The content a row's parts start: the role its hints name (none if they name None), else ``default``."""
    named, role = _role_hint(extra)
    content: dict[str, Any] = {}
    if not named:
        content["role"] = default
    elif role is not None:
        content["role"] = role
    content["parts"] = parts
    if extra.get(_CAMEL) is True:
        content[_CAMEL] = True
    return content


def _finished(content: dict[str, Any]) -> dict[str, Any]:
    camel = content.pop(_CAMEL, False)
    return write_camel(content) if camel else content


def _system_instruction(rows: list[Message], dropped: dict[str, int] | None) -> str | dict[str, Any] | None:
    parts: list[dict[str, Any]] = []
    for row in rows:
        for block in _blocks(row["content"], dropped):
            if data_fields(block) == ["text"] and block.get("thought") is not True:
                parts.append(block)
            else:
                note(dropped, "system_part")
    if not parts:
        return None
    extra = extra_of(rows[0], FMT)
    if extra.get(_STRING) is True and len(parts) == 1 and parts[0].keys() == {"text"}:
        return str(parts[0]["text"])
    named, role = _role_hint(extra)
    content: dict[str, Any] = {"role": role} if named and role is not None else {}
    content["parts"] = parts
    return write_camel(content) if extra.get(_CAMEL) is True else content


def to_gemini(
    messages: object, dropped: dict[str, int] | None = None
) -> tuple[str | dict[str, Any] | None, list[dict[str, Any]]]:
    """Return ``messages`` (flowmem stored or flat rows) as Gemini ``(system_instruction, contents)``.

    Normalizes first (MEM-5, keeping content parts). ``system_instruction`` is a
    ``Content`` of the system rows' text parts (a string when it came as one),
    ``None`` when there is none. An assistant row is a ``model`` content: its parts
    (a Gemini thought first, as recorded), then its ``function_call`` parts (with
    the call's id, unless it came without one); each tool row is a
    ``function_response`` (its text as ``response.output``, or ``error`` when
    ``is_error``) in the next ``user`` content. Consecutive rows of one side share
    a content unless recorded otherwise. What Gemini cannot carry (other
    providers' reasoning and blocks, file ids, audio by id, call kinds other than
    function with their results) is left out and counted per kind in ``dropped``.
    """
    return rows_to_gemini(provider_rows(messages), dropped)


def rows_to_gemini(rows: list[Message], dropped: dict[str, int] | None = None) -> tuple[str | dict[str, Any] | None, list[dict[str, Any]]]:
    """Return normalized provider-flat rows (``flowmem.formats.fast.provider_rows``) as Gemini ``(system_instruction, contents)``."""
    names: dict[str, str] = {}  # a response names the function it answers (its call comes first)
    out: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}  # the calls left out (their results go too), by kind
    unnamed: set[str] = set()  # calls written without an id: their responses are too
    for row in rows:
        role = row["role"]
        if role == "system":
            continue
        if role == "assistant":
            parts = _model_parts(row, dropped, skipped, unnamed, names)
        elif role == "user":
            parts = _blocks(row["content"], dropped)
        elif row["tool_call_id"] in skipped:
            note(dropped, f"{skipped[row['tool_call_id']]}_result")
            continue
        else:
            parts = [_response_part(row, names, dropped, unnamed)]
        if parts:
            _place(out, row, parts)
    systems = [row for row in rows if row["role"] == "system"]
    return _system_instruction(systems, dropped), [_finished(content) for content in out]


# --- contents → rows ------------------------------------------------------------------------


def _part_map(raw: object, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise UnsupportedContentError(f"{where}: a part must be an object", part=type(raw).__name__)
    return dict(raw)


def _call(block: Mapping[str, Any], ids: CallIds, index: int, where: str) -> dict[str, Any]:
    function = require_map(block["function_call"], f"{where}.function_call")
    name = require_name(function.get("name"), f"{where}.function_call")
    args = function.get("args", {})
    if not isinstance(args, Mapping):
        raise InvalidMessageError(f"{where}.function_call: args must be an object")
    cid, derived = ids.call(function.get("id"), name, index, where)
    fields = remainder(block, {"function_call": {"id": True, "name": True, "args": True}})
    if derived:
        fields[_NO_ID] = True
    if "args" not in function:
        fields[_NO_ARGS] = True
    return call_entry(cid, name, dict(args), "function", FMT, fields)


def _content_parts(
    parts: list[Any], where: str, misplaced: str, belongs: str
) -> Iterator[tuple[int, str, dict[str, Any], list[str]]]:
    """Each part of a content: its index, where it stands, the part and its datum fields.

    A ``misplaced`` part (the other role's function part) is refused: it belongs in a
    ``belongs`` content.
    """
    for n, raw in enumerate(parts):
        at = f"{where}.parts[{n}]"
        block = _part_map(raw, at)
        found = data_fields(block)
        if misplaced in found:
            raise UnsupportedContentError(f"{at}: a {misplaced} belongs in a {belongs} content", part=misplaced)
        yield n, at, block, found


def _model_row(parts: list[Any], ids: CallIds, where: str) -> Message:
    content: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    order = ""
    for n, at, block, found in _content_parts(parts, where, "function_response", "user"):
        if found == ["function_call"]:
            calls.append(_call(block, ids, n, at))
            order += "c"
        else:
            content.append(part_from_gemini(block, at))
            order += "p"
    row: Message = {"role": "assistant", "content": _row_content(content) if content else ""}
    if calls:
        row["tool_calls"] = calls
    if order != "p" * len(content) + "c" * len(calls):
        put_extra(row, FMT, {_ORDER: order})
    return row


def _read_response(response: Mapping[str, Any] | None) -> tuple[str, bool, dict[str, Any]]:
    """Return a response's text, whether it is an error, and the hints that write it back."""
    if response is None:
        return "", False, {_RESPONSE: "absent"}
    if len(response) == 1:
        (key, value), = response.items()
        if key in ("output", "result", "error") and isinstance(value, str):
            return value, key == "error", ({_KEY: "result"} if key == "result" else {})
    text = json.dumps(response, ensure_ascii=False, allow_nan=False)
    return text, False, {_RESPONSE: "object"}


def _tool_row(block: Mapping[str, Any], ids: CallIds, where: str) -> Message:
    at = f"{where}.function_response"
    function = require_map(block["function_response"], at)
    name = require_name(function.get("name"), at)
    cid, by_name = ids.response(function.get("id"), name, at)
    response = function.get("response")
    if response is not None and not isinstance(response, Mapping):
        raise InvalidMessageError(f"{at}: response must be an object")
    try:
        text, is_error, hints = _read_response(response)
    except ValueError:  # a NaN or an infinity: not JSON, kept whole below
        text, is_error, hints = "", False, {}
    media = [
        part_from_gemini(_part_map(raw, f"{at}.parts[{n}]"), f"{at}.parts[{n}]")
        for n, raw in enumerate(require_list(function.get("parts", []), f"{at}.parts"))
    ]
    content: str | list[dict[str, Any]] = text
    if media:
        content = [{"type": "text", "text": text}, *media] if text else media
    row: Message = {"role": "tool", "content": content, "tool_call_id": cid}
    if is_error:
        row["is_error"] = True
    consumed: dict[str, Any] = {"id": True, "response": True, "parts": True}
    if ids.names.get(cid) == name:
        consumed["name"] = True
    fields = remainder(block, {"function_response": consumed})
    fields.update(hints)
    if by_name:
        fields[_NO_ID] = True
    whole(put_extra(row, FMT, fields), FMT, block)
    if _response_part(row, ids.names, None) != dict(block):
        row = {"role": "tool", "content": [provider_part(FMT, dict(block))], "tool_call_id": cid}
    return row


def _user_rows(parts: list[Any], ids: CallIds, where: str) -> list[Message]:
    """Split a user content: each ``function_response`` is a tool row; the parts between make user rows."""
    rows: list[Message] = []
    for _, at, block, found in _content_parts(parts, where, "function_call", "model"):
        if found == ["function_response"]:
            rows.append(_tool_row(block, ids, at))
        elif rows and rows[-1]["role"] == "user":
            rows[-1]["content"].append(part_from_gemini(block, at))
        else:
            rows.append({"role": "user", "content": [part_from_gemini(block, at)]})
    for row in rows:
        if row["role"] == "user":
            row["content"] = _row_content(row["content"])
    return rows


def _grouped(rows: list[Message], role: str | None, last: object, camel: bool) -> None:
    """Record the hints that make ``to_gemini`` group ``rows`` into one content with ``role``."""
    for n, row in enumerate(rows):
        default = "model" if row["role"] == "assistant" else "user"
        hints: dict[str, Any] = {}
        if n == 0:
            if role != default:
                hints[_ROLE] = role if role is not None else False
            elif last == default:
                hints[_NEW] = True
            if camel:
                hints[_CAMEL] = True
        elif role != default:
            hints[_JOIN] = True
        if hints:
            put_extra(row, FMT, {**extra_of(row, FMT), **hints})


def _content(raw: object, where: str, roles: tuple[str, ...] = ROLES) -> tuple[str | None, list[Any], bool, dict[str, Any]]:
    """Return a content's role, parts, spelling and snake_case form; raise when it is not a Content.

    ``roles`` are the roles taken (a system instruction's role is any string).
    """
    content, camel = read_spelling(require_map(raw, where))
    unknown = sorted(str(key) for key in content if key not in _CONTENT_KEYS)
    if unknown:
        raise InvalidMessageError(f"{where}: a Gemini content has role and parts, not {', '.join(unknown)}")
    role = content.get("role")
    if role is not None and not (role in roles or (not roles and isinstance(role, str))):
        raise UnknownRoleError(f"{where}: unknown role {role!r}: expected one of {', '.join(ROLES)}", role=role)
    parts = content.get("parts", [])
    if not isinstance(parts, list):
        raise InvalidMessageError(f"{where}: parts must be a list, got {type(parts).__name__}")
    return role, parts, camel, content


def _system_rows(value: object) -> list[Message]:
    if isinstance(value, str):
        return [put_extra({"role": "system", "content": value}, FMT, {_STRING: True})] if value else []
    role, parts, camel, _ = _content(value, "system_instruction", ())
    content = [part_from_gemini(_part_map(raw, f"system_instruction.parts[{n}]"), f"system_instruction.parts[{n}]") for n, raw in enumerate(parts)]
    if not content:
        return []
    hints: dict[str, Any] = {}
    if role is not None:
        hints[_ROLE] = role
    if camel:
        hints[_CAMEL] = True
    return [put_extra({"role": "system", "content": _row_content(content)}, FMT, hints)]


def from_gemini(system_instruction: object, contents: object) -> list[Message]:
    """Return Gemini ``system_instruction`` + ``contents`` as flowmem flat rows (no normalization).

    Lossless: ``to_gemini(...)`` of the rows gives the payload back for a sendable
    one (snake_case or camelCase, as given; null fields read as absent, as the SDK
    reads them). ``system_instruction`` (a string or a ``Content``) becomes one
    leading system row. Text, ``thought`` parts (with their ``thought_signature``)
    and ``inline_data``/``file_data`` become neutral parts, their other fields
    kept in ``extra.gemini``; code execution, server-tool and other parts are
    ``provider`` parts. Each ``function_call`` becomes a call (an absent id
    derived from the history, decision 0055), each ``function_response`` a tool
    row paired by id, else by name and order. Raises ``InvalidMessageError``,
    ``UnknownRoleError`` or ``UnsupportedContentError`` for a malformed content.
    """
    rows: list[Message] = []
    if system_instruction is not None:
        rows.extend(_system_rows(system_instruction))
    ids = CallIds()
    last: object = ()  # the role of the last content that made rows; () before the first
    for index, raw in enumerate(require_list(contents, "contents")):
        where = f"content {index}"
        role, parts, camel, snake = _content(raw, where)
        ids.content(snake)
        made = [_model_row(parts, ids, where)] if role == "model" else _user_rows(parts, ids, where)
        if made:
            _grouped(made, role, last, camel)
            rows.extend(made)
            last = role
    return rows
