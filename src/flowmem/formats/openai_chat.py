"""OpenAI Chat Completions messages ↔ flowmem rows (lossless within the format)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowmem.core import Message
from flowmem.errors import InvalidMessageError, UnknownRoleError, UnsupportedContentError
from flowmem.formats._common import (
    HINT,
    Call,
    arguments_hint,
    arguments_text,
    call_entry,
    data_url,
    entries,
    exact_arguments,
    extra_of,
    fields_of,
    is_provider_part,
    kept_whole,
    lossless_part,
    note,
    object_list,
    parse_arguments,
    parse_data_url,
    part_kind,
    parts_of,
    provider_part,
    put_extra,
    read_entry,
    read_parts,
    require_map,
    required_call_id,
    whole,
)
from flowmem.formats.fast import plain_call, provider_rows
from flowmem.formats.origins import Origins

FMT = "openai"
CALL_KINDS = ("function", "custom")
"""The call kinds Chat Completions carries; any other kind is dropped with its results."""

_CONTENT_HINT = HINT + "content"  # "string" | "null" | "absent" | "list": the content's spelling
_SIDE_FIELDS = ("refusal", "function_call")  # message fields kept as provider parts


# --- parts -----------------------------------------------------------------------------


Block = dict[str, Any]


def _text_to(part: Mapping[str, Any], role: str) -> Block | None:
    return {"type": "text", "text": part["text"]} if isinstance(part.get("text"), str) else None


def _image_to(part: Mapping[str, Any], role: str) -> Block | None:
    if role != "user":
        return None
    url = part.get("url")
    if not isinstance(url, str) and isinstance(part.get("data"), str):
        media = part.get("media_type")
        url = data_url(media, part["data"]) if isinstance(media, str) else None
    if not isinstance(url, str):
        return None
    image: Block = {"url": url}
    if part.get("detail") is not None:
        image["detail"] = part["detail"]
    return {"type": "image_url", "image_url": image}


def _audio_to(part: Mapping[str, Any], role: str) -> Block | None:
    if role != "user" or not isinstance(part.get("data"), str) or part.get("format") not in ("wav", "mp3"):
        return None
    return {"type": "input_audio", "input_audio": {"data": part["data"], "format": part["format"]}}


def _file_to(part: Mapping[str, Any], role: str) -> Block | None:
    if role != "user":
        return None
    file: Block = {}
    if isinstance(part.get("data"), str):
        media = part.get("media_type")
        file["file_data"] = data_url(media, part["data"]) if isinstance(media, str) else part["data"]
    if isinstance(part.get("file_id"), str):
        file["file_id"] = part["file_id"]
    if file and isinstance(part.get("filename"), str):
        file["filename"] = part["filename"]
    return {"type": "file", "file": file} if file else None


_PART_TO: dict[str, Callable[[Mapping[str, Any], str], Block | None]] = {
    "text": _text_to,
    "image": _image_to,
    "audio": _audio_to,
    "file": _file_to,
}
"""The writer of each neutral part kind Chat models (its ``extra.openai`` fields added after)."""


def _part_to_openai(part: Mapping[str, Any], role: str) -> Block | None:
    """Return the Chat content part of a neutral part for ``role``, or None when Chat has none."""
    kind = part.get("type")
    if kind == "provider":
        if is_provider_part(part, FMT) and isinstance(part["block"].get("type"), str):
            return dict(part["block"])
        return None
    write = _PART_TO.get(kind) if isinstance(kind, str) else None
    block = None if write is None else write(part, role)
    if block is not None:
        block.update(fields_of(extra_of(part, FMT)))
    return block


_REQUIRED = {"image_url": "url", "input_audio": "data"}  # the string a part's object cannot be without


def _checked(block: Mapping[str, Any], where: str) -> None:
    """Raise ``UnsupportedContentError`` for a content part invalid in Chat's own format."""
    kind = block["type"]
    if kind == "text" and not isinstance(block.get("text"), str):
        raise UnsupportedContentError(f"{where}: text part without text", part=kind)
    if kind in ("image_url", "input_audio", "file"):
        inner = block.get(kind)
        needed = _REQUIRED.get(kind)
        if not isinstance(inner, Mapping) or (needed and not isinstance(inner.get(needed), str)):
            raise UnsupportedContentError(f"{where}: {kind!r} part without its {kind} object", part=kind)


Read = tuple[Block, set[str]]  # a neutral part and the block's keys it holds


def _text_from(block: Mapping[str, Any]) -> Read | None:
    if not isinstance(block.get("text"), str):
        return None
    return {"type": "text", "text": block["text"]}, {"type", "text"}


def _image_from(block: Mapping[str, Any]) -> Read | None:
    image = block.get("image_url")
    if not isinstance(image, Mapping):
        return None
    url = image.get("url")
    if not isinstance(url, str):
        return None
    parsed = parse_data_url(url)
    part: Block = (
        {"type": "image", "data": parsed[1], "media_type": parsed[0]} if parsed else {"type": "image", "url": url}
    )
    if image.get("detail") is not None:
        part["detail"] = image["detail"]
    return part, {"type", "image_url"}


def _audio_from(block: Mapping[str, Any]) -> Read | None:
    audio = block.get("input_audio")
    if not isinstance(audio, Mapping):
        return None
    return {"type": "audio", "data": audio.get("data"), "format": audio.get("format")}, {"type", "input_audio"}


def _file_from(block: Mapping[str, Any]) -> Read | None:
    file = block.get("file")
    if not isinstance(file, Mapping):
        return None
    part: Block = {"type": "file"}
    raw = file.get("file_data")
    if isinstance(raw, str):
        parsed = parse_data_url(raw)
        if parsed:
            part["data"], part["media_type"] = parsed[1], parsed[0]
        else:
            part["data"] = raw
    for key in ("file_id", "filename"):
        if key in file:
            part[key] = file[key]
    return part, {"type", "file"}


_PART_FROM: dict[str, Callable[[Mapping[str, Any]], Read | None]] = {
    "text": _text_from,
    "image_url": _image_from,
    "input_audio": _audio_from,
    "file": _file_from,
}
"""The reader of each Chat content part type flowmem models; any other is kept verbatim."""


def _part_from_openai(block: Mapping[str, Any], role: str, where: str = "part") -> Block:
    """Return the neutral part of a Chat content part (a provider part when not modeled exactly)."""
    _checked(block, where)
    read = _PART_FROM.get(block["type"])
    found = None if read is None else read(block)
    return lossless_part(FMT, block, found, lambda part: _part_to_openai(part, role))


# --- rows → messages ---------------------------------------------------------------------


def _function_call(call: Call, fields: Mapping[str, Any]) -> Block:
    arguments = exact_arguments(call.args, fields)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _custom_call(call: Call, fields: Mapping[str, Any]) -> Block:
    text = call.args if isinstance(call.args, str) else exact_arguments(call.args, fields)
    return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": text}}


_CALL_TO: dict[str, Callable[[Call, Mapping[str, Any]], Block]] = {
    "function": _function_call,
    "custom": _custom_call,
}
"""The writer of each call kind Chat carries (``CALL_KINDS``)."""


def _calls_to_openai(row: Message, dropped: dict[str, int] | None, skipped: dict[str, str]) -> list[Block]:
    out: list[Block] = []
    for raw in row.get("tool_calls") or []:
        plain = plain_call(raw)
        if plain is not None:  # the common entry, written as _function_call writes it
            cid, name, args = plain
            out.append({"id": cid, "type": "function", "function": {"name": name, "arguments": arguments_text(args)}})
            continue
        call = read_entry(raw)
        write = _CALL_TO.get(call.kind)
        if write is None:
            note(dropped, call.kind)
            skipped[call.id] = call.kind
            continue
        fields = extra_of(raw, FMT)
        entry = write(call, fields)
        if fields:
            entry.update(fields_of(fields))
        out.append(entry)
    return out


def _assistant_parts(content: Any, dropped: dict[str, int] | None) -> tuple[list[Block], Block]:
    """Return an assistant row's parts as Chat content parts, and the message fields parts keep (audio, refusal …)."""
    blocks: list[Block] = []
    side: Block = {}
    for part in read_parts(content) if isinstance(content, list) else []:
        if part.get("type") == "audio" and isinstance(part.get("id"), str) and "data" not in part:
            side["audio"] = {"id": part["id"], **fields_of(extra_of(part, FMT))}
        elif is_provider_part(part, FMT) and "type" not in part["block"]:
            side.update(part["block"])
        else:
            block = _part_to_openai(part, "assistant")
            if block is None or block.get("type") not in ("text", "refusal"):
                note(dropped, part_kind(part))
            else:
                blocks.append(block)
    return blocks, side


def _spelled(content: Any, form: object, blocks: list[Block]) -> tuple[bool, Any]:
    """Return whether an assistant message has a ``content`` in spelling ``form``, and that content."""
    if form == "string":
        texts = [b["text"] for b in blocks if b.get("type") == "text"]
        return True, content if isinstance(content, str) else "".join(texts)
    if form == "null":
        return True, None
    if form == "list":
        return True, blocks if isinstance(content, list) else parts_of(content)
    return False, None  # "absent"


def _assistant_message(row: Message, dropped: dict[str, int] | None, skipped: dict[str, str]) -> Block | None:
    """Return the Chat message of an assistant row (None when nothing of it is left)."""
    extra = extra_of(row, FMT)
    content = row["content"]
    blocks, side = _assistant_parts(content, dropped) if type(content) is list else ([], {})
    calls = _calls_to_openai(row, dropped, skipped) if row.get("tool_calls") else []
    if not calls and not side and not blocks and not (isinstance(content, str) and content):
        return None
    message: Block = {"role": "assistant"}
    form = extra.get(_CONTENT_HINT)
    if form is None:
        form = _default_form(content, bool(calls), bool(side), bool(blocks))
    has, message["content"] = _spelled(content, form, blocks)
    if not has:
        del message["content"]
    if side:
        message.update(side)
    if calls:
        message["tool_calls"] = calls
    if extra:
        message.update(fields_of(extra))
    return message


def _text_content(row: Message, role: str, dropped: dict[str, int] | None) -> Any:
    """Return a system, user or tool row's content as Chat content (parts Chat cannot take dropped)."""
    content = row["content"]
    if isinstance(content, str):
        return content
    blocks: list[Block] = []
    for part in read_parts(content):
        block = _part_to_openai(part, role)
        if block is None or (role != "user" and block.get("type") != "text"):
            note(dropped, part_kind(part))
        else:
            blocks.append(block)
    return blocks


def _with_fields(message: Block, row: Message) -> Block:
    """``message`` with the Chat fields ``from_openai`` kept in the row's ``extra.openai``."""
    if "extra" in row:
        message.update(fields_of(extra_of(row, FMT)))
    return message


def _tool_message(row: Message, dropped: dict[str, int] | None, skipped: dict[str, str]) -> Block | None:
    cid = row["tool_call_id"]
    if cid in skipped:
        note(dropped, f"{skipped[cid]}_result")
        return None
    if row.get("is_error") is True:
        note(dropped, "is_error")
    content = row["content"]
    if type(content) is not str:
        kept = kept_whole(row, FMT, lambda block: block.get("role") == "tool")
        if kept is not None:
            return kept
        content = _text_content(row, "tool", dropped)
        if content == [] and row["content"] != []:
            content = ""
    return _with_fields({"role": "tool", "tool_call_id": cid, "content": content}, row)


def _user_message(row: Message, dropped: dict[str, int] | None, skipped: dict[str, str]) -> Block | None:
    parts = row["content"]
    if isinstance(parts, list) and len(parts) == 1 and is_provider_part(parts[0], FMT):
        block = parts[0]["block"]
        if block.get("role") == "function":  # a legacy function-role message, kept whole
            return dict(block)
    return _system_message(row, dropped, skipped)


def _system_message(row: Message, dropped: dict[str, int] | None, skipped: dict[str, str]) -> Block | None:
    role = row["role"]
    content = row["content"]
    if type(content) is not str:
        content = _text_content(row, role, dropped)
        if content == [] and row["content"] != []:
            return None  # nothing Chat can carry is left
    return _with_fields({"role": role, "content": content}, row)


_ROW_TO: dict[str, Callable[[Message, dict[str, int] | None, dict[str, str]], Block | None]] = {
    "system": _system_message,
    "user": _user_message,
    "assistant": _assistant_message,
    "tool": _tool_message,
}
"""The writer of each row role (the rows of ``provider_rows``: these four only)."""


def to_openai(messages: object, dropped: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Return ``messages`` (flowmem stored or flat rows) as Chat Completions messages.

    Normalizes first (MEM-5, keeping content parts), so the output is sendable:
    every ``tool_calls[].id`` is answered by the ``tool`` message right after its
    turn. Parts and fields read by ``from_openai`` come back as they were.
    What Chat cannot carry (reasoning, other providers' blocks, call kinds other
    than function and custom with their results, an image in a tool result,
    ``is_error``) is left out and counted per kind in ``dropped`` when given.
    """
    return rows_to_openai(provider_rows(messages), dropped)


def rows_to_openai(rows: list[Message], dropped: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Return normalized provider-flat rows (``flowmem.formats.fast.provider_rows``) as Chat Completions messages."""
    skipped: dict[str, str] = {}  # the calls left out (their results go too), by kind
    out: list[dict[str, Any]] = []
    for row in rows:
        message = _ROW_TO[row["role"]](row, dropped, skipped)
        if message is not None:
            out.append(message)
    return out


# --- messages → rows ---------------------------------------------------------------------


def _from_call(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    kind = entry.get("type", "function")
    cid = required_call_id(entry.get("id"), where)
    if kind == "custom":
        custom = require_map(entry.get("custom"), f"{where}.custom")
        name, text = custom.get("name"), custom.get("input", "")
        if not isinstance(name, str) or not isinstance(text, str):
            raise InvalidMessageError(f"{where}: a custom tool call needs a name and an input text")
        fields = {k: v for k, v in entry.items() if k not in ("id", "type", "custom")}
        return call_entry(cid, name, text, "custom", FMT, fields)
    if kind != "function":
        raise InvalidMessageError(f"{where}: unknown tool call type {kind!r}")
    function = require_map(entry.get("function"), f"{where}.function")
    name, raw = function.get("name"), function.get("arguments", "")
    if not isinstance(name, str):
        raise InvalidMessageError(f"{where}: tool call has no function name")
    if not isinstance(raw, str):
        raise InvalidMessageError(f"{where}: function.arguments must be a JSON string")
    args = parse_arguments(raw)
    fields = {k: v for k, v in entry.items() if k not in ("id", "type", "function")}
    fields.update(arguments_hint(raw, args))
    return call_entry(cid, name, args, "function", FMT, fields)


def _content_parts(content: object, role: str, where: str) -> Any:
    """Return Chat content as row content: a string stays, a list becomes neutral parts."""
    if content is None or isinstance(content, str):
        return content or ""
    return [
        _part_from_openai(block, role, f"{where}.content[{n}]")
        for n, block in enumerate(object_list(content, f"{where}.content"))
    ]


def _content_form(message: Mapping[str, Any]) -> str:
    if "content" not in message:
        return "absent"
    content = message["content"]
    return "null" if content is None else "string" if isinstance(content, str) else "list"


def _side_parts(message: Mapping[str, Any]) -> tuple[list[Block], set[str]]:
    """Return the parts an assistant message's side fields make (audio, refusal, function_call), and those fields."""
    side: list[Block] = []
    modeled: set[str] = set()
    audio = message.get("audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("id"), str):
        side.append(
            put_extra({"type": "audio", "id": audio["id"]}, FMT, {k: v for k, v in audio.items() if k != "id"})
        )
        modeled.add("audio")
    for key in _SIDE_FIELDS:
        if message.get(key) is not None:
            side.append(provider_part(FMT, {key: message[key]}))
            modeled.add(key)
    return side, modeled


def _has_blocks(content: Any) -> bool:
    """Whether row content holds a part ``to_openai`` writes as a content part (not a side field)."""
    return isinstance(content, list) and any(
        not (is_provider_part(part, FMT) and "type" not in part["block"]) and part.get("type") != "audio"
        for part in content
    )


def _from_assistant(message: Mapping[str, Any], where: str) -> Message:
    content = _content_parts(message.get("content"), "assistant", where)
    side, modeled = _side_parts(message)
    if side:
        content = (parts_of(content) if isinstance(content, str) else content) + side
    row: Message = {"role": "assistant", "content": content}
    calls = message.get("tool_calls")
    if calls:
        row["tool_calls"] = [_from_call(entry, at) for _, at, entry in entries(calls, f"{where}.tool_calls")]
    modeled |= {"role", "content", "tool_calls"}
    fields = {k: v for k, v in message.items() if k not in modeled}
    if calls == []:
        fields["tool_calls"] = []
    put_extra(row, FMT, fields)
    given = _content_form(message)
    if given != _default_form(content, bool(calls), bool(side), _has_blocks(content)):
        fields[_CONTENT_HINT] = given
        put_extra(row, FMT, fields)
    return row


def _default_form(content: Any, calls: bool, side: bool, blocks: bool) -> str:
    """How ``to_openai`` spells an assistant row's content when no hint says otherwise."""
    if isinstance(content, str):
        return "null" if content == "" and calls else "string"
    if blocks:
        return "list"
    return "absent" if side else "null" if calls else "list"


def from_openai(messages: object, *, origins: Origins | None = None) -> list[Message]:
    """Return Chat Completions messages as flowmem flat rows (no normalization).

    Lossless: ``to_openai(from_openai(h))`` gives ``h`` back for a sendable ``h``.
    Text, ``image_url`` (a ``data:`` URL becomes base64 data with its media type),
    ``input_audio`` and ``file`` parts become neutral parts; an assistant ``audio``
    becomes an ``audio`` part with its id (so an audio-only turn is not empty);
    ``refusal`` (part or field), ``function_call`` and a legacy ``function``
    message are ``provider`` parts; ``developer``, ``name`` and any other field go
    to ``extra.openai``. Tool calls (``function`` and ``custom``) become call
    entries with parsed arguments. The SDK's own objects (a ``ChatCompletionMessage``)
    are read as the SDK sends them back (``model_dump``, ``require_map``). Raises
    ``InvalidMessageError``/``UnknownRoleError`` for a malformed message.
    ``origins``, when given, gets each row's message position (one row a message).
    """
    rows: list[Message] = []
    for index, where, message in entries(messages, "messages", "message"):
        if origins is not None:
            origins.add(index)
        role = message.get("role")
        if role == "function":
            rows.append({"role": "user", "content": [provider_part(FMT, dict(message))]})
            continue
        if role == "assistant":
            rows.append(_from_assistant(message, where))
            continue
        if role not in ("system", "developer", "user", "tool"):
            raise UnknownRoleError(f"{where}: unknown role {role!r}", role=role)
        flat_role = "system" if role == "developer" else role
        row: Message = {"role": flat_role, "content": _content_parts(message.get("content"), flat_role, where)}
        modeled = {"content", "tool_call_id"} | ({"role"} if role != "developer" else set())
        if role == "tool":
            row["tool_call_id"] = required_call_id(message.get("tool_call_id"), where)
        put_extra(row, FMT, {k: v for k, v in message.items() if k not in modeled})
        rows.append(whole(row, FMT, message) if role == "tool" else row)
    return rows
