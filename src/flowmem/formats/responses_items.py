"""Responses call and output items ↔ flowmem call entries and tool rows, by call kind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowmem.core import HEALED_CONTENT, Message
from flowmem.errors import InvalidMessageError
from flowmem.formats._common import (
    arguments_hint,
    arguments_text,
    call_entry,
    exact_arguments,
    extra_of,
    fields_of,
    kept_whole,
    note,
    parse_arguments,
    parse_data_url,
    put_extra,
    read_entry,
    read_parts,
    required_call_id,
    whole,
)
from flowmem.formats.fast import plain_call
from flowmem.formats.responses_parts import (
    FMT,
    content_from_responses,
    content_to_responses,
    part_to_responses,
)

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

CALL_TYPE = {kind: item for item, kind in CALL_ITEMS.items()}
OUTPUT_TYPE = {kind: item for item, kind in OUTPUT_ITEMS.items()}
CALL_ID_KEY = {"mcp_approval": "id"}  # every other kind names its call by ``call_id``
OUTPUT_ID_KEY = {"local_shell": "id", "mcp_approval": "approval_request_id"}
PAYLOAD = {  # the keys that make a non-function call's ``args``
    "computer": ("action", "actions"),
    "local_shell": ("action",),
    "shell": ("action",),
    "apply_patch": ("operation",),
}


def call_item(raw: Mapping[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
    """Return the Responses item of one call entry: the item type of its kind (recorded in ``kinds`` by id)."""
    plain = plain_call(raw)
    if plain is not None:  # the common entry, written as the general path below writes it
        cid, name, args = plain
        kinds.setdefault(cid, "function")
        return {"type": "function_call", "call_id": cid, "name": name, "arguments": arguments_text(args)}
    call = read_entry(raw)
    kinds.setdefault(call.id, call.kind)
    fields = extra_of(raw, FMT)
    kind = call.kind if call.kind in CALL_TYPE else "function"
    item: dict[str, Any] = {"type": CALL_TYPE[kind], CALL_ID_KEY.get(kind, "call_id"): call.id}
    if kind in ("function", "mcp_approval"):
        item["name"] = call.name
        item["arguments"] = exact_arguments(call.args, fields)
    elif kind == "custom":
        item["name"] = call.name
        item["input"] = call.args if isinstance(call.args, str) else exact_arguments(call.args, fields)
    elif isinstance(call.args, Mapping):
        item.update({k: v for k, v in call.args.items() if k in PAYLOAD[kind]})
    if fields:
        item.update(fields_of(fields))
    return item


def _output_text(content: Any) -> str:
    """The text of a result: its string, or its text parts joined."""
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in read_parts(content) if p.get("type") == "text" and isinstance(p.get("text"), str))


def _failed(row: Message) -> bool:
    """Whether a result reports a failure: ``is_error``, or a healed placeholder."""
    return row.get("is_error") is True or (row["content"] == HEALED_CONTENT and not extra_of(row, FMT))


def _function_output(row: Message, item: dict[str, Any], dropped: dict[str, int] | None) -> None:
    item["output"] = content_to_responses(row["content"], "user", dropped)
    if row.get("is_error") is True:
        note(dropped, "is_error")


def _computer_output(row: Message, item: dict[str, Any], dropped: dict[str, int] | None) -> None:
    screenshot: dict[str, Any] = {"type": "computer_screenshot"}
    for part in read_parts(row["content"]):
        if part.get("type") == "image":
            image = part_to_responses(part, "user") or {}
            screenshot.update({k: v for k, v in image.items() if k in ("image_url", "file_id")})
            screenshot.update(fields_of(extra_of(part, FMT)))
            break
    item["output"] = screenshot


def _local_shell_output(row: Message, item: dict[str, Any], dropped: dict[str, int] | None) -> None:
    item["output"] = _output_text(row["content"])


def _shell_output(row: Message, item: dict[str, Any], dropped: dict[str, int] | None) -> None:
    text, failed = _output_text(row["content"]), _failed(row)
    item["output"] = [
        {"stdout": "" if failed else text, "stderr": text if failed else "", "outcome": {"type": "exit", "exit_code": 1 if failed else 0}}
    ]


def _apply_patch_output(row: Message, item: dict[str, Any], dropped: dict[str, int] | None) -> None:
    item["status"] = "failed" if _failed(row) else "completed"
    text = _output_text(row["content"])
    if text:
        item["output"] = text


def _approval_output(row: Message, item: dict[str, Any], dropped: dict[str, int] | None) -> None:
    item["approve"] = False
    text = _output_text(row["content"])
    if text:
        item["reason"] = text


_OUTPUT_WRITERS: dict[str, Callable[[Message, dict[str, Any], dict[str, int] | None], None]] = {
    "function": _function_output,
    "custom": _function_output,
    "computer": _computer_output,
    "local_shell": _local_shell_output,
    "shell": _shell_output,
    "apply_patch": _apply_patch_output,
    "mcp_approval": _approval_output,
}
"""What each call kind's output item holds, written from the tool row."""


def output_item(row: Message, kind: str, dropped: dict[str, int] | None) -> dict[str, Any]:
    """Return the output item of a tool row answering a call of ``kind``."""
    output_type = OUTPUT_TYPE.get(kind, "function_call_output")
    if type(row["content"]) is not str:  # (kept whole: a list of one provider part)
        kept = kept_whole(row, FMT, lambda block: block.get("type") == output_type)
        if kept is not None:
            return kept
    item: dict[str, Any] = {"type": output_type, OUTPUT_ID_KEY.get(kind, "call_id"): row["tool_call_id"]}
    _OUTPUT_WRITERS.get(kind, _approval_output)(row, item, dropped)  # (a kind not listed: as the last)
    if "extra" in row:
        item.update(fields_of(extra_of(row, FMT)))
    return item


def call_from_item(item: Mapping[str, Any], kind: str, where: str) -> dict[str, Any]:
    """Return the call entry of a call item of ``kind``."""
    id_key = CALL_ID_KEY.get(kind, "call_id")
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
    payload = {k: item[k] for k in PAYLOAD[kind] if k in item}
    fields = {k: v for k, v in fields.items() if k not in payload}
    return call_entry(cid, kind, payload, kind, FMT, fields)


def _function_result(item: Mapping[str, Any], row: Message, fields: dict[str, Any], where: str) -> None:
    output = item.get("output", "")
    row["content"] = output if isinstance(output, str) else content_from_responses(output, "user", where)
    fields.pop("output", None)


def _computer_result(item: Mapping[str, Any], row: Message, fields: dict[str, Any], where: str) -> None:
    output = item.get("output")
    if not (isinstance(output, Mapping) and output.get("type") == "computer_screenshot"):
        return
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


def _local_shell_result(item: Mapping[str, Any], row: Message, fields: dict[str, Any], where: str) -> None:
    output = item.get("output")
    if isinstance(output, str) and output:
        row["content"] = output
        fields.pop("output")


def _apply_patch_result(item: Mapping[str, Any], row: Message, fields: dict[str, Any], where: str) -> None:
    _local_shell_result(item, row, fields, where)
    if item.get("status") == "failed":
        row["is_error"] = True


def _shell_result(item: Mapping[str, Any], row: Message, fields: dict[str, Any], where: str) -> None:
    output = item.get("output")
    if isinstance(output, list):
        row["content"] = "".join(
            str(o.get("stdout", "")) + str(o.get("stderr", "")) for o in output if isinstance(o, Mapping)
        )


def _approval_result(item: Mapping[str, Any], row: Message, fields: dict[str, Any], where: str) -> None:
    reason = item.get("reason")
    if isinstance(reason, str) and reason:
        row["content"] = reason
        fields.pop("reason")


_OUTPUT_READERS: dict[str, Callable[[Mapping[str, Any], Message, dict[str, Any], str], None]] = {
    "function": _function_result,
    "custom": _function_result,
    "computer": _computer_result,
    "local_shell": _local_shell_result,
    "shell": _shell_result,
    "apply_patch": _apply_patch_result,
    "mcp_approval": _approval_result,
}
"""How each call kind's output item is read into the tool row (the fields it consumes popped)."""


def output_row(item: Mapping[str, Any], kind: str, where: str) -> Message:
    """Return the tool row of an output item answering a call of ``kind``."""
    id_key = OUTPUT_ID_KEY.get(kind, "call_id")
    row: Message = {"role": "tool", "content": "", "tool_call_id": required_call_id(item.get(id_key), where)}
    fields = {k: v for k, v in item.items() if k not in ("type", id_key)}
    _OUTPUT_READERS.get(kind, _approval_result)(item, row, fields, where)
    # keep every field whose re-spelling from the row would differ (verbatim, so exact)
    base = output_item(row, kind, None)
    put_extra(row, FMT, {k: v for k, v in fields.items() if k not in base or base[k] != v})
    return whole(row, FMT, item)
