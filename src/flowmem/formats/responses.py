"""OpenAI Responses API / Agents SDK input items ↔ flowmem rows (lossless within the format)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from flowmem.core import HEALED_CONTENT, Message, entry_id
from flowmem.errors import InvalidMessageError, UnknownRoleError, UnsupportedContentError
from flowmem.formats._common import (
    HINT,
    arguments_hint,
    call_entry,
    call_kinds,
    data_url,
    exact_arguments,
    extra_of,
    fields_of,
    is_provider_part,
    kept_whole,
    normalized,
    note,
    object_list,
    parse_arguments,
    parse_data_url,
    part_kind,
    parts_of,
    provider_part,
    put_extra,
    read_entry,
    require_list,
    require_map,
    required_call_id,
    whole,
)
from flowmem.formats.origins import Origins

FMT = "responses"

CALL_ITEMS: dict[str, str] = {
    "function_call": "function",
    "custom_tool_call": "custom",
    "computer_call": "computer",
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
    "mcp_approval_request": "mcp_approval",
}
"""Responses items that are tool calls needing a result, by call kind."""

OUTPUT_ITEMS: dict[str, str] = {
    "function_call_output": "function",
    "custom_tool_call_output": "custom",
    "computer_call_output": "computer",
    "local_shell_call_output": "local_shell",
    "shell_call_output": "shell",
    "apply_patch_call_output": "apply_patch",
    "mcp_approval_response": "mcp_approval",
}
"""Responses items that answer a call, by call kind."""

_CALL_TYPE = {kind: item for item, kind in CALL_ITEMS.items()}
_OUTPUT_TYPE = {kind: item for item, kind in OUTPUT_ITEMS.items()}
_CALL_ID_KEY = {"mcp_approval": "id"}  # every other kind names its call by ``call_id``
_OUTPUT_ID_KEY = {"local_shell": "id", "mcp_approval": "approval_request_id"}
_PAYLOAD = {  # the keys that make a non-function call's ``args``
    "computer": ("action", "actions"),
    "local_shell": ("action",),
    "shell": ("action",),
    "apply_patch": ("operation",),
}
_LAYOUT = HINT + "layout"  # the order of a row's items: p(art item), m(essage list), s(tring message), c(all)


# --- content parts -------------------------------------------------------------------------


def _text_type(role: str) -> str:
    return "output_text" if role == "assistant" else "input_text"


# Responses content-part types: a ``responses`` provider part holding one of these is
# a message's part (kept verbatim because no neutral part models it exactly)
_CONTENT_PART_TYPES = frozenset(
    {"input_text", "input_image", "input_file", "input_audio", "output_text", "refusal"}
)


def _part_to_responses(part: Mapping[str, Any], role: str) -> dict[str, Any] | None:
    """Return the Responses content part of a neutral part for ``role``, or None when there is none."""
    kind = part.get("type")
    fields = fields_of(extra_of(part, FMT))
    block: dict[str, Any] | None = None
    if kind == "text" and isinstance(part.get("text"), str):
        block = {"type": _text_type(role), "text": part["text"]}
        block.update(fields)
        if block["type"] == "output_text":
            block.setdefault("annotations", [])
        return block
    if kind == "image" and role != "assistant":
        block = {"type": "input_image", "detail": part.get("detail") or "auto"}
        if isinstance(part.get("url"), str):
            block["image_url"] = part["url"]
        elif isinstance(part.get("data"), str) and isinstance(part.get("media_type"), str):
            block["image_url"] = data_url(part["media_type"], part["data"])
        if isinstance(part.get("file_id"), str):
            block["file_id"] = part["file_id"]
        if "image_url" not in block and "file_id" not in block:
            return None
    elif kind == "file" and role != "assistant":
        block = {"type": "input_file"}
        if isinstance(part.get("data"), str):
            media = part.get("media_type")
            block["file_data"] = data_url(media, part["data"]) if isinstance(media, str) else part["data"]
        if isinstance(part.get("file_id"), str):
            block["file_id"] = part["file_id"]
        if isinstance(part.get("url"), str):
            block["file_url"] = part["url"]
        if len(block) == 1:
            return None
        if isinstance(part.get("filename"), str):
            block["filename"] = part["filename"]
    elif is_provider_part(part, FMT) and part["block"].get("type") in _CONTENT_PART_TYPES:
        return dict(part["block"])  # a content part kept verbatim goes back as it came
    if block is not None:
        block.update(fields)
    return block


def _part_from_responses(block: Mapping[str, Any], role: str, where: str = "part") -> dict[str, Any]:
    """Return the neutral part of a Responses content part (a provider part when not modeled exactly)."""
    kind = block["type"]
    if kind in ("input_text", "output_text") and not isinstance(block.get("text"), str):
        raise UnsupportedContentError(f"{where}: {kind} part without text", part=kind)
    part: dict[str, Any] | None = None
    consumed = {"type"}
    if kind in ("input_text", "output_text") and isinstance(block.get("text"), str):
        part = {"type": "text", "text": block["text"]}
        consumed = {"text"} | ({"type"} if kind == _text_type(role) else set())
        if kind == "output_text" and block.get("annotations") == []:
            consumed.add("annotations")
    elif kind == "input_image":
        part = {"type": "image"}
        url = block.get("image_url")
        if isinstance(url, str):
            parsed = parse_data_url(url)
            if parsed:
                part["data"], part["media_type"] = parsed[1], parsed[0]
            else:
                part["url"] = url
        if isinstance(block.get("file_id"), str):
            part["file_id"] = block["file_id"]
        if block.get("detail") is not None:
            part["detail"] = block["detail"]
        consumed = {"type", "image_url", "file_id", "detail"}
    elif kind == "input_file":
        part = {"type": "file"}
        raw = block.get("file_data")
        if isinstance(raw, str):
            parsed = parse_data_url(raw)
            if parsed:
                part["data"], part["media_type"] = parsed[1], parsed[0]
            else:
                part["data"] = raw
        for key, target in (("file_id", "file_id"), ("file_url", "url"), ("filename", "filename")):
            if isinstance(block.get(key), str):
                part[target] = block[key]
        consumed = {"type", "file_data", "file_id", "file_url", "filename"}
    if part is not None:
        put_extra(part, FMT, {k: v for k, v in block.items() if k not in consumed})
        if _part_to_responses(part, role) == dict(block):
            return part
    return provider_part(FMT, dict(block))


def _content_to_responses(content: Any, role: str, dropped: dict[str, int] | None) -> Any:
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for part in parts_of(content):
        block = _part_to_responses(part, role)
        if block is None:
            note(dropped, part_kind(part))
        else:
            out.append(block)
    return out


def _content_from_responses(content: object, role: str, where: str) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    return [
        _part_from_responses(block, role, f"{where}.content[{n}]")
        for n, block in enumerate(object_list(content, f"{where}.content"))
    ]


# --- items that are parts: reasoning and hosted tools ----------------------------------------


def _reasoning_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """Return a ``reasoning`` item as a reasoning part (a provider part when not modeled exactly)."""
    summary = item.get("summary")
    texts = [s.get("text") for s in summary] if isinstance(summary, list) else None
    if (
        texts is not None
        and all(isinstance(s, Mapping) and set(s) == {"text", "type"} and s.get("type") == "summary_text" for s in summary or [])
        and all(isinstance(t, str) for t in texts)
    ):
        part: dict[str, Any] = {"type": "reasoning", "provider": FMT, "summary": texts}
        if isinstance(item.get("encrypted_content"), str):
            part["encrypted_content"] = item["encrypted_content"]
        consumed = {"type", "summary"} | ({"encrypted_content"} if "encrypted_content" in part else set())
        put_extra(part, FMT, {k: v for k, v in item.items() if k not in consumed})
        if _item_of_part(part) == dict(item):
            return part
    return provider_part(FMT, dict(item))


def _item_of_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return the item a part stands for when it is an item of its own (reasoning, hosted tool)."""
    if part.get("type") == "reasoning" and part.get("provider") == FMT:
        item: dict[str, Any] = {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t} for t in part.get("summary") or []],
        }
        if isinstance(part.get("encrypted_content"), str):
            item["encrypted_content"] = part["encrypted_content"]
        item.update(fields_of(extra_of(part, FMT)))
        return item
    if is_provider_part(part, FMT) and part["block"].get("type") != "refusal":
        return dict(part["block"])
    return None


# --- rows → items ---------------------------------------------------------------------------


def _call_item(raw: Mapping[str, Any]) -> dict[str, Any]:
    call = read_entry(raw)
    fields = extra_of(call.entry, FMT)
    kind = call.kind if call.kind in _CALL_TYPE else "function"
    item: dict[str, Any] = {"type": _CALL_TYPE[kind], _CALL_ID_KEY.get(kind, "call_id"): call.id}
    if kind in ("function", "mcp_approval"):
        item["name"] = call.name
        item["arguments"] = exact_arguments(call.args, fields)
    elif kind == "custom":
        item["name"] = call.name
        item["input"] = call.args if isinstance(call.args, str) else exact_arguments(call.args, fields)
    elif isinstance(call.args, Mapping):
        item.update({k: v for k, v in call.args.items() if k in _PAYLOAD[kind]})
    item.update(fields_of(fields))
    return item


def _default_layout(content: Any, item_parts: int, message_parts: list[dict[str, Any]], calls: int) -> str:
    if isinstance(content, str):
        return ("s" if content != "" or not calls else "") + "c" * calls
    return "p" * item_parts + ("m" if message_parts else "") + "c" * calls


def _layout_fits(layout: object, item_parts: int, message_parts: list[dict[str, Any]], calls: int) -> bool:
    if not isinstance(layout, str) or set(layout) - set("pmsc"):
        return False
    messages = layout.count("m") + layout.count("s")
    return (
        layout.count("p") == item_parts
        and layout.count("c") == calls
        and messages <= 1
        and (messages == 1 or not message_parts)
        and ("s" not in layout or all(p.get("type") == "text" for p in message_parts))
    )


def _plain_text(parts: list[dict[str, Any]], fields: Mapping[str, Any]) -> bool:
    """True when an assistant message would be spelled with string content by default."""
    return "id" not in fields and all(p.get("type") == "text" and not extra_of(p, FMT) for p in parts)


def _assistant_items(row: Message, dropped: dict[str, int] | None) -> list[dict[str, Any]]:
    extra = extra_of(row, FMT)
    fields = fields_of(extra)
    content = row["content"]
    item_parts: list[dict[str, Any]] = []
    message_parts: list[dict[str, Any]] = []
    for part in parts_of(content) if isinstance(content, list) else []:
        item = _item_of_part(part)
        if item is not None:
            item_parts.append(item)
        elif part.get("type") == "text" or is_provider_part(part, FMT):
            message_parts.append(part)  # an image or file (a Gemini model's) has no place here
        else:
            note(dropped, part_kind(part))
    calls = [_call_item(call) for call in row.get("tool_calls") or []]
    layout: Any = extra.get(_LAYOUT)
    if not _layout_fits(layout, len(item_parts), message_parts, len(calls)):
        layout = _default_layout(content, len(item_parts), message_parts, len(calls))
        if "m" in layout and _plain_text(message_parts, fields):
            layout = layout.replace("m", "s")
    out: list[dict[str, Any]] = []
    parts_iter, calls_iter = iter(item_parts), iter(calls)
    for token in str(layout):
        if token == "p":
            out.append(next(parts_iter))
        elif token == "c":
            out.append(next(calls_iter))
        else:
            if isinstance(content, str):
                body: Any = content
            elif token == "s":
                body = "".join(p["text"] for p in message_parts if isinstance(p.get("text"), str))
            else:
                body = _content_to_responses(message_parts, "assistant", dropped)
            message = {"role": "assistant", "content": body}
            message.update(fields)
            out.append(message)
    return out


def _output_item(row: Message, kind: str, dropped: dict[str, int] | None) -> dict[str, Any]:
    output_type = _OUTPUT_TYPE.get(kind, "function_call_output")
    kept = kept_whole(row, FMT, lambda block: block.get("type") == output_type)
    if kept is not None:
        return kept
    extra = extra_of(row, FMT)
    fields = fields_of(extra)
    content = row["content"]
    cid = row["tool_call_id"]
    item: dict[str, Any] = {"type": _OUTPUT_TYPE.get(kind, "function_call_output"), _OUTPUT_ID_KEY.get(kind, "call_id"): cid}
    text = content if isinstance(content, str) else "".join(
        p["text"] for p in parts_of(content) if p.get("type") == "text" and isinstance(p.get("text"), str)
    )
    failed = row.get("is_error") is True or (content == HEALED_CONTENT and not extra)
    if kind in ("function", "custom"):
        item["output"] = _content_to_responses(content, "user", dropped)
        if row.get("is_error") is True:
            note(dropped, "is_error")
    elif kind == "computer":
        screenshot: dict[str, Any] = {"type": "computer_screenshot"}
        for part in parts_of(content):
            if part.get("type") == "image":
                image = _part_to_responses(part, "user") or {}
                screenshot.update({k: v for k, v in image.items() if k in ("image_url", "file_id")})
                screenshot.update(fields_of(extra_of(part, FMT)))
                break
        item["output"] = screenshot
    elif kind == "local_shell":
        item["output"] = text
    elif kind == "shell":
        item["output"] = [
            {"stdout": "" if failed else text, "stderr": text if failed else "", "outcome": {"type": "exit", "exit_code": 1 if failed else 0}}
        ]
    elif kind == "apply_patch":
        item["status"] = "failed" if failed else "completed"
        if text:
            item["output"] = text
    else:  # mcp_approval
        item["approve"] = False
        if text:
            item["reason"] = text
    item.update(fields)
    return item


def _row_items(row: Message, kinds: Mapping[str, str], dropped: dict[str, int] | None) -> list[dict[str, Any]]:
    role = row["role"]
    if role == "assistant":
        return _assistant_items(row, dropped)
    if role == "tool":
        return [_output_item(row, kinds.get(row["tool_call_id"], "function"), dropped)]
    content = _content_to_responses(row["content"], role, dropped)
    if content == [] and row["content"] != []:
        return []
    message = {"role": role, "content": content}
    message.update(fields_of(extra_of(row, FMT)))
    return [message]


def row_to_items(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return the Responses items of one flowmem row (flat or stored), without normalizing.

    A ``tool`` row is one output item (``function_call_output`` unless its extras
    say otherwise); any other row is spelled as ``to_responses`` spells it. Raises
    ``UnknownRoleError`` for an entry that is not a message.
    """
    flat = _flat(row)
    kinds = {flat["tool_call_id"]: "function"} if flat["role"] == "tool" else {}
    return _row_items(flat, kinds, None)


def _flat(row: Mapping[str, Any]) -> Message:
    """Return one flat or stored row as a provider-flat row (no normalization)."""
    if not isinstance(row, Mapping) or row.get("role") not in ("system", "user", "assistant", "tool"):
        raise UnknownRoleError(f"not a flowmem message: {row!r}")
    meta = row.get("metadata") if isinstance(row.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    content = row.get("content")
    flat: Message = {"role": row["role"], "content": content if isinstance(content, (str, list)) else ""}
    for key in ("tool_calls", "tool_call_id", "extra", "is_error"):
        value = row.get(key, meta.get(key))
        if value is not None:
            flat[key] = value
    if flat["role"] == "tool":
        flat["tool_call_id"] = str(flat.get("tool_call_id", "")).strip()
    if flat.get("tool_calls"):
        flat["tool_calls"] = [c for c in flat["tool_calls"] if isinstance(c, Mapping) and entry_id(c)]
    return flat


def to_responses(
    messages: object, dropped: dict[str, int] | None = None, *, systems_first: bool = True
) -> list[dict[str, Any]]:
    """Return ``messages`` (flowmem stored or flat rows) as Responses input items.

    Normalizes first (MEM-5, keeping content parts). An assistant row gives its
    reasoning and hosted-tool items, its message and its calls in the order
    ``from_responses`` recorded (else items, message, calls); each call is the
    item of its kind (``function_call``, ``custom_tool_call``, ``computer_call``,
    ``local_shell_call``, ``shell_call``, ``apply_patch_call``,
    ``mcp_approval_request``) and each ``tool`` row the output item of its call's
    kind. What Responses cannot carry (other providers' reasoning and blocks,
    audio, ``is_error`` outside ``apply_patch``) is left out and counted per kind
    in ``dropped`` when given. ``systems_first=False`` keeps each system and
    developer message where it is (the Responses API takes them anywhere): only
    tool pairing is repaired.
    """
    rows = normalized(messages, systems_first)
    kinds = call_kinds(rows)
    return [item for row in rows for item in _row_items(row, kinds, dropped)]


# --- items → rows ---------------------------------------------------------------------------


def _message_row(item: Mapping[str, Any], where: str) -> tuple[str, Any, dict[str, Any]]:
    role = item.get("role")
    if role not in ("system", "developer", "user", "assistant"):
        raise UnknownRoleError(f"{where}: unknown message role {role!r}", role=role)
    flat_role = "system" if role == "developer" else role
    content = _content_from_responses(item.get("content"), flat_role, where)
    modeled = {"content"} | ({"role"} if role != "developer" else set())
    return flat_role, content, {k: v for k, v in item.items() if k not in modeled}


def _call_from_item(item: Mapping[str, Any], kind: str, where: str) -> dict[str, Any]:
    id_key = _CALL_ID_KEY.get(kind, "call_id")
    cid = required_call_id(item.get(id_key), where)
    fields = {k: v for k, v in item.items() if k not in ("type", id_key)}
    if kind in ("function", "mcp_approval"):
        name, raw = item.get("name"), item.get("arguments", "")
        if not isinstance(name, str):
            raise InvalidMessageError(f"{where}: tool call has no name")
        if not isinstance(raw, str):
            raise InvalidMessageError(f"{where}: arguments must be a JSON string")
        args: Any = parse_arguments(raw)
        fields = {k: v for k, v in fields.items() if k not in ("name", "arguments")}
        fields.update(arguments_hint(raw, args))
        return call_entry(cid, name, args, kind, FMT, fields)
    if kind == "custom":
        name, text = item.get("name"), item.get("input", "")
        if not isinstance(name, str) or not isinstance(text, str):
            raise InvalidMessageError(f"{where}: a custom tool call needs a name and an input text")
        fields = {k: v for k, v in fields.items() if k not in ("name", "input")}
        return call_entry(cid, name, text, kind, FMT, fields)
    payload = {k: item[k] for k in _PAYLOAD[kind] if k in item}
    fields = {k: v for k, v in fields.items() if k not in payload}
    return call_entry(cid, kind, payload, kind, FMT, fields)


def _output_row(item: Mapping[str, Any], kind: str, where: str) -> Message:
    id_key = _OUTPUT_ID_KEY.get(kind, "call_id")
    row: Message = {"role": "tool", "content": "", "tool_call_id": required_call_id(item.get(id_key), where)}
    fields = {k: v for k, v in item.items() if k not in ("type", id_key)}
    if kind in ("function", "custom"):
        output = item.get("output", "")
        row["content"] = output if isinstance(output, str) else _content_from_responses(output, "user", where)
        fields.pop("output", None)
    elif kind == "computer":
        output = item.get("output")
        if isinstance(output, Mapping) and output.get("type") == "computer_screenshot":
            url = output.get("image_url")
            image: dict[str, Any] = {"type": "image"}
            parsed = parse_data_url(url) if isinstance(url, str) else None
            if parsed:
                image["data"], image["media_type"] = parsed[1], parsed[0]
            elif isinstance(url, str):
                image["url"] = url
            if isinstance(output.get("file_id"), str):
                image["file_id"] = output["file_id"]
            put_extra(image, FMT, {k: v for k, v in output.items() if k not in ("type", "image_url", "file_id")})
            row["content"] = [image]
    elif kind in ("local_shell", "apply_patch"):
        output = item.get("output")
        if isinstance(output, str) and output:
            row["content"] = output
            fields.pop("output")
        if kind == "apply_patch" and item.get("status") == "failed":
            row["is_error"] = True
    elif kind == "shell":
        output = item.get("output")
        if isinstance(output, list):
            row["content"] = "".join(
                str(o.get("stdout", "")) + str(o.get("stderr", "")) for o in output if isinstance(o, Mapping)
            )
    else:  # mcp_approval
        reason = item.get("reason")
        if isinstance(reason, str) and reason:
            row["content"] = reason
            fields.pop("reason")
    # keep every field whose re-spelling from the row would differ (verbatim, so exact)
    base = _output_item(row, kind, None)
    put_extra(row, FMT, {k: v for k, v in fields.items() if k not in base or base[k] != v})
    return whole(row, FMT, item)


def _open_assistant(rows: list[Message]) -> Message:
    """Return the assistant row items of the current model turn join, starting one if needed."""
    if rows and rows[-1]["role"] == "assistant":
        return rows[-1]
    row: Message = {"role": "assistant", "content": []}
    rows.append(row)
    return row


def from_responses(
    items: object, *, ignore_types: Collection[str] = (), origins: Origins | None = None
) -> list[Message]:
    """Return Responses input items as flowmem flat rows (no normalization).

    Lossless: ``to_responses(from_responses(h))`` gives ``h`` back for a sendable
    ``h``. A user, system or developer ``message`` is one row (``developer`` and
    item fields such as ``id``, ``status``, ``type`` go to ``extra.responses``).
    The items of one model turn (reasoning, hosted-tool items, at most one
    assistant message, calls of every kind) make one assistant row: reasoning
    items become ``reasoning`` parts (summary, ``encrypted_content``), hosted-tool
    and any other items ``provider`` parts, calls become call entries with their
    kind; their order is recorded when it is not the default. Each output item is
    a ``tool`` row (``apply_patch_call_output`` with status ``failed`` sets
    ``is_error``). Items whose type is in ``ignore_types`` are skipped. The SDK's
    own objects (``response.output``'s items) are read as the SDK sends them back
    (``model_dump``, ``require_map``). Raises ``InvalidMessageError``/``UnknownRoleError``
    for a malformed item. ``origins``, when given, gets each row's item position
    (a model turn's first item) and the position of each of its calls.
    """
    rows: list[Message] = []
    layouts: dict[int, str] = {}
    strings: dict[int, str] = {}
    first: dict[int, int] = {}  # id(row) -> the position of its first item
    call_items: dict[int, list[int]] = {}  # id(row) -> the position of each of its call items
    for index, raw in enumerate(require_list(items, "items")):
        where = f"item {index}"
        item = require_map(raw, where)
        kind = item.get("type", "message" if "role" in item else "item_reference" if "id" in item else None)
        if kind in ignore_types:
            continue
        if kind == "message" and item.get("role") != "assistant":
            role, content, fields = _message_row(item, where)
            rows.append(put_extra({"role": role, "content": content}, FMT, fields))
            first[id(rows[-1])] = index
            continue
        if kind in OUTPUT_ITEMS and item.get(_OUTPUT_ID_KEY.get(OUTPUT_ITEMS[kind], "call_id")) is not None:
            rows.append(_output_row(item, OUTPUT_ITEMS[kind], where))
            first[id(rows[-1])] = index
            continue
        if kind == "message":
            _, content, fields = _message_row(item, where)
            row = rows[-1] if rows and rows[-1]["role"] == "assistant" else None
            if row is None or set(layouts.get(id(row), "")) & {"m", "s"}:
                row = {"role": "assistant", "content": []}
                rows.append(row)
            first.setdefault(id(row), index)
            if isinstance(content, str):
                strings[id(row)] = content
                row["content"].extend(parts_of(content))
            else:
                row["content"].extend(content)
            layouts[id(row)] = layouts.get(id(row), "") + ("s" if isinstance(content, str) else "m")
            put_extra(row, FMT, fields)
            continue
        row = _open_assistant(rows)
        first.setdefault(id(row), index)
        if kind in CALL_ITEMS:
            row.setdefault("tool_calls", []).append(_call_from_item(item, CALL_ITEMS[kind], where))
            call_items.setdefault(id(row), []).append(index)
            token = "c"
        elif kind == "reasoning":
            row["content"].append(_reasoning_part(item))
            token = "p"
        else:
            row["content"].append(provider_part(FMT, dict(item)))
            token = "p"
        layouts[id(row)] = layouts.get(id(row), "") + token
    for row in rows:
        layout = layouts.get(id(row))
        if layout is None:
            continue
        if set(layout) <= {"s", "c"}:
            row["content"] = strings.get(id(row), "")
        extra = extra_of(row, FMT)
        message_parts = [p for p in parts_of(row["content"]) if _item_of_part(p) is None] if isinstance(row["content"], list) else []
        default = _default_layout(row["content"], layout.count("p"), message_parts, layout.count("c"))
        if "m" in default and _plain_text(message_parts, fields_of(extra)):
            default = default.replace("m", "s")
        if default != layout:
            extra[_LAYOUT] = layout
            put_extra(row, FMT, extra)
    if origins is not None:
        for row in rows:
            origins.add(first[id(row)], call_items.get(id(row)))
    return rows
