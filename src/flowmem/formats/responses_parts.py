"""Responses content parts ↔ neutral parts, and the items that are parts of a model turn (reasoning, hosted tools)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowmem.errors import UnsupportedContentError
from flowmem.formats._common import (
    data_url,
    extra_of,
    fields_of,
    is_provider_part,
    lossless_part,
    note,
    object_list,
    parse_data_url,
    part_kind,
    read_parts,
)

FMT = "responses"


# --- content parts -------------------------------------------------------------------------


def _text_type(role: str) -> str:
    return "output_text" if role == "assistant" else "input_text"


# Responses content-part types: a ``responses`` provider part holding one of these is
# a message's part (kept verbatim because no neutral part models it exactly)
_CONTENT_PART_TYPES = frozenset(
    {"input_text", "input_image", "input_file", "input_audio", "output_text", "refusal"}
)


Block = dict[str, Any]


def _text_to(part: Mapping[str, Any], role: str) -> Block | None:
    if not isinstance(part.get("text"), str):
        return None
    block = {"type": _text_type(role), "text": part["text"]}
    if part.get("extra") is not None:
        block.update(fields_of(extra_of(part, FMT)))
    if block["type"] == "output_text":
        block.setdefault("annotations", [])
    return block


def _image_to(part: Mapping[str, Any], role: str) -> Block | None:
    if role == "assistant":
        return None
    block: Block = {"type": "input_image", "detail": part.get("detail") or "auto"}
    if isinstance(part.get("url"), str):
        block["image_url"] = part["url"]
    elif isinstance(part.get("data"), str) and isinstance(part.get("media_type"), str):
        block["image_url"] = data_url(part["media_type"], part["data"])
    if isinstance(part.get("file_id"), str):
        block["file_id"] = part["file_id"]
    if "image_url" not in block and "file_id" not in block:
        return None
    if part.get("extra") is not None:
        block.update(fields_of(extra_of(part, FMT)))
    return block


def _file_to(part: Mapping[str, Any], role: str) -> Block | None:
    if role == "assistant":
        return None
    block: Block = {"type": "input_file"}
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
    block.update(fields_of(extra_of(part, FMT)))
    return block


def _provider_to(part: Mapping[str, Any], role: str) -> Block | None:
    if is_provider_part(part, FMT) and part["block"].get("type") in _CONTENT_PART_TYPES:
        return dict(part["block"])  # a content part kept verbatim goes back as it came
    return None


_PART_TO: dict[str, Callable[[Mapping[str, Any], str], Block | None]] = {
    "text": _text_to,
    "image": _image_to,
    "file": _file_to,
    "provider": _provider_to,
}
"""The writer of each neutral part kind; a kind not here has no Responses content part."""


def part_to_responses(part: Mapping[str, Any], role: str) -> Block | None:
    """Return the Responses content part of a neutral part for ``role``, or None when there is none."""
    kind = part.get("type")
    write = _PART_TO.get(kind) if isinstance(kind, str) else None
    return None if write is None else write(part, role)


Read = tuple[Block, set[str]]  # a neutral part and the block's keys it holds


def _text_from(block: Mapping[str, Any], role: str) -> Read:
    kind = block["type"]
    consumed = {"text"} | ({"type"} if kind == _text_type(role) else set())
    if kind == "output_text" and block.get("annotations") == []:
        consumed.add("annotations")
    return {"type": "text", "text": block["text"]}, consumed


def _data_or_url(part: Block, value: object, url_key: str) -> None:
    """Set a part's base64 data and media type from a ``data:`` URL, else the value as ``url_key``."""
    if not isinstance(value, str):
        return
    parsed = parse_data_url(value)
    if parsed:
        part["data"], part["media_type"] = parsed[1], parsed[0]
    else:
        part[url_key] = value


def _image_from(block: Mapping[str, Any], role: str) -> Read:
    part: Block = {"type": "image"}
    _data_or_url(part, block.get("image_url"), "url")
    if isinstance(block.get("file_id"), str):
        part["file_id"] = block["file_id"]
    if block.get("detail") is not None:
        part["detail"] = block["detail"]
    return part, {"type", "image_url", "file_id", "detail"}


def _file_from(block: Mapping[str, Any], role: str) -> Read:
    part: Block = {"type": "file"}
    _data_or_url(part, block.get("file_data"), "data")
    for key, target in (("file_id", "file_id"), ("file_url", "url"), ("filename", "filename")):
        if isinstance(block.get(key), str):
            part[target] = block[key]
    return part, {"type", "file_data", "file_id", "file_url", "filename"}


_PART_FROM: dict[str, Callable[[Mapping[str, Any], str], Read]] = {
    "input_text": _text_from,
    "output_text": _text_from,
    "input_image": _image_from,
    "input_file": _file_from,
}
"""The reader of each Responses content part type flowmem models; any other is kept verbatim."""


def part_from_responses(block: Mapping[str, Any], role: str, where: str = "part") -> Block:
    """Return the neutral part of a Responses content part (a provider part when not modeled exactly)."""
    kind = block["type"]
    if kind in ("input_text", "output_text") and not isinstance(block.get("text"), str):
        raise UnsupportedContentError(f"{where}: {kind} part without text", part=kind)
    read = _PART_FROM.get(kind)
    found = None if read is None else read(block, role)
    return lossless_part(FMT, block, found, lambda part: part_to_responses(part, role))


def content_to_responses(content: Any, role: str, dropped: dict[str, int] | None) -> Any:
    """Return row content as Responses content (parts Responses cannot take dropped and counted)."""
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for part in read_parts(content):
        block = part_to_responses(part, role)
        if block is None:
            note(dropped, part_kind(part))
        else:
            out.append(block)
    return out


def content_from_responses(content: object, role: str, where: str) -> Any:
    """Return Responses content as row content: a string stays, a list becomes neutral parts."""
    if content is None or isinstance(content, str):
        return content or ""
    return [
        part_from_responses(block, role, f"{where}.content[{n}]")
        for n, block in enumerate(object_list(content, f"{where}.content"))
    ]


# --- items that are parts: reasoning and hosted tools ----------------------------------------


def reasoning_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """Return a ``reasoning`` item as a reasoning part (a provider part when not modeled exactly)."""
    summary = item.get("summary")
    texts = [s.get("text") for s in summary] if isinstance(summary, list) else None
    found = None
    if (
        texts is not None
        and all(isinstance(s, Mapping) and set(s) == {"text", "type"} and s.get("type") == "summary_text" for s in summary or [])
        and all(isinstance(t, str) for t in texts)
    ):
        part: dict[str, Any] = {"type": "reasoning", "provider": FMT, "summary": texts}
        if isinstance(item.get("encrypted_content"), str):
            part["encrypted_content"] = item["encrypted_content"]
        found = part, {"type", "summary"} | ({"encrypted_content"} if "encrypted_content" in part else set())
    return lossless_part(FMT, item, found, item_of_part)


def item_of_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
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
