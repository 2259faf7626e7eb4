"""Helpers shared by the provider formats: reading flowmem tool calls and text parts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from flowmem.core import Message, normalize, usable_call_id
from flowmem.core.fast import fast_entry_id
from flowmem.errors import InvalidInputError, InvalidMessageError, UnsupportedContentError


class ToolCall(NamedTuple):
    """One tool call read from either spelling: its id, function name and arguments."""

    id: str
    name: str
    args: Any


def normalized(messages: object, systems_first: bool = True) -> list[Message]:
    """Return the provider-flat normalized rows of ``messages`` (stored or flat rows).

    MEM-5 with ``keep_content=True`` (decision 0021): content parts, ``is_error``,
    ``extra`` and call kinds are kept; ``systems_first=False`` leaves every system
    row in its place. Raises ``InvalidInputError`` when ``messages`` is not a list.
    """
    if not isinstance(messages, (list, tuple)):
        raise InvalidInputError(f"messages must be a list, got {type(messages).__name__}")
    return normalize(list(messages), keep_content=True, systems_first=systems_first).messages


def _function(call: Mapping[str, Any]) -> Mapping[str, Any]:
    function = call.get("function")
    return function if isinstance(function, Mapping) else {}


def parse_arguments(text: str) -> Any:
    """Return the JSON value of a provider's arguments string, or the string when it is not JSON.

    A blank string (some models send one for a call without arguments) is ``{}``.
    """
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


def read_call(call: Mapping[str, Any]) -> ToolCall:
    """Read one tool call entry of a normalized row, in flowmem's or a provider's spelling.

    The id is read by ``flowmem.core.entry_id`` (``tool_call_id`` first, else ``id``);
    the name from ``name`` or ``function.name``; the arguments from ``args``,
    ``input``, ``arguments`` or ``function.arguments`` (a JSON string is parsed).
    Normalized rows only hold calls with a usable id.
    """
    cid = fast_entry_id(call)  # entry_id's speed twin in the core (MEM-11, its oracle test there)
    if cid is None:
        raise InvalidMessageError("tool call has no usable id")
    name = call["name"] if "name" in call else _function(call).get("name")
    if "args" in call:
        args = call["args"]
    elif "input" in call:
        args = call["input"]
    else:
        raw = call["arguments"] if "arguments" in call else _function(call).get("arguments")
        args = parse_arguments(raw) if isinstance(raw, str) else raw
    return ToolCall(cid, name if isinstance(name, str) else "", {} if args is None else args)


_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)  # json.dumps with these options, made once


def arguments_text(args: Any) -> str:
    """Return ``args`` as the JSON arguments string OpenAI formats carry.

    A string passes as is (it already is the arguments text), except a blank one,
    which is ``"{}"`` like a call without arguments.
    """
    if isinstance(args, str):
        return args if args.strip() else "{}"
    try:
        return _JSON.encode(args)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def input_object(args: Any) -> dict[str, Any]:
    """Return ``args`` as the JSON object Anthropic's ``tool_use.input`` requires.

    An object passes as is; a string holding a JSON object is parsed; any other value
    is wrapped as ``{"value": args}`` (a documented loss, ``docs/formats.md``).
    """
    if isinstance(args, Mapping):
        return dict(args)
    if isinstance(args, str):
        parsed = parse_arguments(args)
        if isinstance(parsed, dict):
            return parsed
    return {"value": args}


def required_call_id(value: object, where: str) -> str:
    """Return a provider's tool call id, read by ``flowmem.core.usable_call_id``; raise when unusable.

    Implements MEM-11 for the formats: an id the core treats as absent (missing,
    blank, ``"0"``/``0``, a bool) is refused with ``InvalidMessageError``, never
    read into a row that normalization would then silently drop.
    """
    cid = usable_call_id(value)
    if cid is None:
        raise InvalidMessageError(f"{where}: tool call has no usable id")
    return cid


def join_text(
    content: object, text_types: Iterable[str], where: str, text_key: str = "text"
) -> str:
    """Return the text of provider content: a string, ``None`` (empty) or a list of text parts.

    Text parts (``type`` in ``text_types``) are joined with a newline; ``refusal``
    parts contribute their refusal text. Any other part (an image, a file, audio)
    raises ``UnsupportedContentError``: flowmem content is text.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        raise InvalidMessageError(
            f"{where}: content must be a string or a list of parts, got {type(content).__name__}"
        )
    kinds = set(text_types)
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise InvalidMessageError(f"{where}: a content part must be an object")
        kind = part.get("type")
        if kind in kinds and isinstance(part.get(text_key), str):
            texts.append(part[text_key])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        else:
            raise UnsupportedContentError(
                f"{where}: content part of type {kind!r} cannot be carried as text", part=kind
            )
    return "\n".join(texts)


def require_list(value: object, what: str) -> list[Any]:
    """Return ``value`` as a list; raise ``InvalidInputError`` naming ``what`` otherwise."""
    if not isinstance(value, (list, tuple)):
        hint = ""
        if callable(getattr(value, "model_dump", None)):
            hint = f" (one SDK object: pass a list of them, [{type(value).__name__.lower()}])"
        raise InvalidInputError(f"{what} must be a list, got {type(value).__name__}{hint}")
    return list(value)


def entries(value: object, what: str, noun: str = "") -> Iterator[tuple[int, str, Mapping[str, Any]]]:
    """Each entry of the list ``value`` (``what``) as an object, with its index and where it is.

    Where it is: ``<noun> <index>`` (``message 3``), or ``<what>[<index>]`` without a
    noun. ``InvalidInputError`` when ``value`` is not a list (``require_list``);
    ``InvalidMessageError`` naming the entry when it is not an object (``require_map``).
    """
    for index, raw in enumerate(require_list(value, what)):
        where = f"{noun} {index}" if noun else f"{what}[{index}]"
        yield index, where, require_map(raw, where)


def sdk_dump(value: object) -> object:
    """Return an SDK's pydantic object as the JSON map the SDK itself would send; else ``value``.

    The OpenAI and Anthropic SDKs send a model object given back to them as
    ``model_dump(mode="json", by_alias=True, exclude_unset=True)`` without the
    fields its ``__api_exclude__`` names (``parsed`` …): a ``ChatCompletionMessage``,
    a ``TextBlock`` or a Responses output item is read exactly as the SDK would
    have sent it. Anything else (a map, a string …) is returned as it is.
    """
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if not callable(dump):
        return value
    try:
        dumped = dump(
            mode="json",
            by_alias=True,
            exclude_unset=True,
            exclude=getattr(value, "__api_exclude__", None),
        )
    except Exception as exc:  # a model_dump that is not pydantic's, or fails on its data
        raise InvalidMessageError(
            f"{type(value).__name__} could not be read as JSON ({exc}): pass "
            "value.model_dump(mode='json') instead"
        ) from exc
    return dumped if isinstance(dumped, Mapping) else value


def _what(value: object) -> str:
    """Name a value that should have been an object, saying what to pass instead."""
    kind = type(value).__name__
    if isinstance(value, (str, int, float, bool, list, tuple)) or value is None:
        return kind
    return f"{kind}; pass a dict (its JSON form: a pydantic model's model_dump(mode='json'))"


def require_map(value: object, where: str) -> Mapping[str, Any]:
    """Return ``value`` as a map; raise ``InvalidMessageError`` naming ``where`` otherwise.

    An SDK's pydantic object is read as the SDK would send it (``sdk_dump``).
    """
    value = sdk_dump(value)
    if not isinstance(value, Mapping):
        raise InvalidMessageError(f"{where}: must be an object, got {_what(value)}")
    return value


# --- the lossless content model (decision 0021) -------------------------------------

NEUTRAL_PARTS: tuple[str, ...] = ("text", "image", "audio", "file", "reasoning", "provider")
"""The part kinds of decision 0021, provider-neutral except ``provider``."""

HINT = "_"
"""Keys of ``extra[<format>]`` starting with this are the format's own shape hints.

They record how a provider object was spelled where the neutral model cannot (a
string content next to an audio part, the order of parts and calls in one
message) and are never emitted; every other key is a provider field, re-emitted
verbatim.
"""

_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def parse_data_url(url: str) -> tuple[str, str] | None:
    """Return ``(media_type, base64 data)`` of a ``data:<type>;base64,<data>`` URL, else None."""
    found = _DATA_URL.fullmatch(url)
    return (found.group(1), found.group(2)) if found else None


def data_url(media_type: str, data: str) -> str:
    """Return the ``data:`` URL of base64 ``data`` (the inverse of ``parse_data_url``)."""
    return f"data:{media_type};base64,{data}"


def extra_of(obj: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """Return a copy of ``obj["extra"][fmt]`` (fields and hints of format ``fmt``), or ``{}``."""
    extra = obj.get("extra")
    if extra is None:
        return {}
    if isinstance(extra, Mapping):
        mine = extra.get(fmt)
        if isinstance(mine, Mapping):
            return dict(mine)
    return {}


def fields_of(extra: Mapping[str, Any]) -> dict[str, Any]:
    """Return the provider fields of an ``extra[fmt]`` dict (its hints left out)."""
    if not extra:
        return {}
    return {key: value for key, value in extra.items() if not key.startswith(HINT)}


def put_extra(obj: dict[str, Any], fmt: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Set ``obj["extra"] = {fmt: fields}`` when ``fields`` is not empty; return ``obj``."""
    if fields:
        obj["extra"] = {fmt: dict(fields)}
    return obj


def provider_part(fmt: str, block: Any) -> dict[str, Any]:
    """Return a ``provider`` part keeping ``block`` of format ``fmt`` verbatim."""
    return {"type": "provider", "provider": fmt, "block": block}


def unread(block: Mapping[str, Any], consumed: Container[str]) -> dict[str, Any]:
    """Return the fields of ``block`` that are not in ``consumed``."""
    return {key: value for key, value in block.items() if key not in consumed}


def lossless_part(
    fmt: str,
    block: Mapping[str, Any],
    read: tuple[dict[str, Any], Any] | None,
    write: Callable[[dict[str, Any]], object],
    rest: Callable[[Mapping[str, Any], Any], Mapping[str, Any]] = unread,
) -> dict[str, Any]:
    """Return the neutral part read from ``block`` when it writes back to ``block`` exactly, else a provider part.

    ``read`` is the part and what of ``block`` it consumed (None: no part models the
    block); what ``rest(block, consumed)`` leaves goes to the part's ``extra[fmt]``.
    A block that ``write`` does not give back exactly is kept verbatim (``provider_part``).
    """
    if read is not None:
        part, consumed = read
        put_extra(part, fmt, rest(block, consumed))
        if write(part) == dict(block):
            return part
    return provider_part(fmt, dict(block))


def is_provider_part(part: Mapping[str, Any], fmt: str) -> bool:
    """Return True for a ``provider`` part of format ``fmt`` whose block is an object."""
    return (
        part.get("type") == "provider"
        and part.get("provider") == fmt
        and isinstance(part.get("block"), Mapping)
    )  # the type test first: most parts are not provider parts


def parts_of(content: object) -> list[dict[str, Any]]:
    """Return row content as a list of parts: a non-empty string is one text part."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [dict(part) for part in content if type(part) is dict or isinstance(part, Mapping)]
    return []


def read_parts(content: object) -> list[Mapping[str, Any]]:
    """Return row content's parts to read, not copied (``parts_of`` copies): a non-empty string is one text part."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [part for part in content if type(part) is dict or isinstance(part, Mapping)]
    return []


def part_kind(part: Mapping[str, Any]) -> str:
    """Return the kind a part is counted under in ``dropped``.

    A neutral part counts under its ``type``; a ``provider`` part under its block's
    type (``web_search_call``, ``server_tool_use``, ``refusal`` …), or the one
    field it keeps (an OpenAI ``refusal``/``function_call`` field), else ``provider``.
    """
    kind = part.get("type")
    if kind == "provider":
        block = part.get("block")
        if isinstance(block, Mapping):
            inner = block.get("type")
            if isinstance(inner, str):
                return inner
            if block.get("role") == "function":
                return "function_message"
            if len(block) == 1:
                return str(next(iter(block)))
        return "provider"
    return kind if isinstance(kind, str) else "part"


def note(dropped: dict[str, int] | None, kind: str, count: int = 1) -> None:
    """Count ``count`` entries of ``kind`` left out by a conversion, when ``dropped`` is a dict."""
    if dropped is not None and count:
        dropped[kind] = dropped.get(kind, 0) + count


class Call(NamedTuple):
    """One tool call entry of a normalized row: id, name, arguments, kind and extras."""

    id: str
    name: str
    args: Any
    kind: str
    entry: Mapping[str, Any]


def entry_kind(call: Mapping[str, Any]) -> str:
    """Return a call entry's kind: ``kind``, else ``custom`` for an OpenAI ``{"type": "custom"}`` entry, else ``function``."""
    kind = call.get("kind")
    if not isinstance(kind, str) or not kind:
        kind = "custom" if call.get("type") == "custom" else "function"
    return kind


def read_entry(call: Mapping[str, Any]) -> Call:
    """Read one call entry (flowmem's or a provider's spelling) with its ``kind`` (``entry_kind``).

    A custom call's arguments are its ``custom.input`` text.
    """
    cid, name, args = read_call(call)
    custom = call.get("custom")
    if custom is not None and isinstance(custom, Mapping) and "args" not in call:
        name = custom.get("name", name) if isinstance(custom.get("name"), str) else name
        args = custom.get("input", args)
    return Call(cid, name, args, entry_kind(call), call)


def call_entry(
    cid: str, name: str, args: Any, kind: str, fmt: str, fields: Mapping[str, Any]
) -> dict[str, Any]:
    """Return a flowmem call entry; ``kind`` is left out for a function call."""
    entry: dict[str, Any] = {"tool_call_id": cid, "name": name, "args": args}
    if kind != "function":
        entry["kind"] = kind
    return put_extra(entry, fmt, fields)


_ARGUMENTS = HINT + "arguments"  # a provider's own arguments text, when flowmem would spell it otherwise


def exact_arguments(args: Any, extra: Mapping[str, Any]) -> str:
    """Return the arguments text of a call: the provider's own text when it still parses to ``args``."""
    raw = extra.get(_ARGUMENTS) if extra else None
    if isinstance(raw, str) and parse_arguments(raw) == args:
        return raw
    return arguments_text(args)


def arguments_hint(raw: str, args: Any) -> dict[str, Any]:
    """Return the hint keeping a provider's arguments text when flowmem would spell it differently."""
    return {} if arguments_text(args) == raw else {_ARGUMENTS: raw}


def object_list(value: object, where: str) -> list[Mapping[str, Any]]:
    """Return a provider content list, each part an object; raise ``UnsupportedContentError`` otherwise.

    A part that is an SDK's pydantic object (a ``TextBlock``) is read as the SDK
    would send it (``sdk_dump``).
    """
    if not isinstance(value, (list, tuple)):
        raise InvalidMessageError(
            f"{where}: content must be a string or a list of parts, got {type(value).__name__}"
        )
    out: list[Mapping[str, Any]] = []
    for n, given in enumerate(value):
        part = sdk_dump(given)
        if not isinstance(part, Mapping):
            raise UnsupportedContentError(
                f"{where}[{n}]: a content part must be an object with a string type, "
                f"got {_what(part)}",
                part=type(part).__name__,
            )
        if not isinstance(part.get("type"), str):
            raise UnsupportedContentError(
                f"{where}[{n}]: a content part must be an object with a string type",
                part=type(part).__name__,
            )
        out.append(part)
    return out


def kept_whole(row: Mapping[str, Any], fmt: str, test: Any) -> dict[str, Any] | None:
    """Return the provider object a result row keeps whole, when it does.

    A result whose content is empty is skipped by the append's empty-content rule,
    so a format keeps such a result (an empty tool output, an MCP approval) as its
    content's one ``provider`` part; ``test`` says whether the block is that result.
    """
    content = row.get("content")
    if isinstance(content, list) and len(content) == 1 and is_provider_part(content[0], fmt):
        block = content[0]["block"]
        if test(block):
            return dict(block)
    return None


def whole(row: dict[str, Any], fmt: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Keep a result row whose content is empty as its provider object, whole (see ``kept_whole``)."""
    if row["content"] in ("", []):
        row["content"] = [provider_part(fmt, dict(obj))]
        row.pop("extra", None)
    return row
