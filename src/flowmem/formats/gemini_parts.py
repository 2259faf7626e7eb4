"""Gemini ``Part`` objects ↔ flowmem content parts, and the two spellings of Gemini JSON (pure).

A Gemini part holds one datum (``text``, ``inline_data``, ``file_data``,
``function_call`` …) beside metadata (``thought``, ``thought_signature``,
``video_metadata`` …). Text, thoughts and media become neutral parts; the part's
other fields are kept in ``extra.gemini`` shaped as the part itself (a nested
field under its parent's key), so writing the part back is the built part with
``extra.gemini`` merged in. Anything not modeled exactly is a ``provider`` part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flowmem.errors import InvalidMessageError, UnsupportedContentError
from flowmem.formats._common import extra_of, fields_of, is_provider_part, lossless_part

FMT = "gemini"

DATA_FIELDS = frozenset(
    {
        "text",
        "inline_data",
        "file_data",
        "function_call",
        "function_response",
        "executable_code",
        "code_execution_result",
        "tool_call",
        "tool_response",
    }
)
"""The fields of a Gemini ``Part`` that are its datum; a part holds one of them."""

META_FIELDS = frozenset(
    {
        "thought",
        "thought_signature",
        "video_metadata",
        "media_resolution",
        "part_metadata",
        "media_processing",
        "audio_transcription",
        "speech_metadata",
        "document_metadata",
        "spreadsheet_metadata",
        "audio_metadata",
    }
)
"""The other fields of a Gemini ``Part`` (google-genai 3.6): metadata beside the datum."""

PART_FIELDS = DATA_FIELDS | META_FIELDS

# Values under these keys are the caller's own JSON (arguments, responses, metadata):
# their keys are never respelled and their nulls never dropped.
_OPAQUE = frozenset({"args", "response", "part_metadata"})

_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


# --- spelling: snake_case (the Python SDK) or camelCase (REST, JavaScript) -------------------


def _snake(key: str) -> str:
    return _CAMEL_HUMP.sub(lambda m: "_" + m.group(1).lower(), key)


def camel_key(key: str) -> str:
    """Return a snake_case key in camelCase (``inline_data`` → ``inlineData``)."""
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def read_spelling(value: Any) -> tuple[Any, bool]:
    """Return Gemini JSON in snake_case without null fields, and whether any key was camelCase.

    The google-genai SDK reads both spellings and ``model_dump`` writes every unset
    field as null: both read as the SDK reads them. Values under ``args``,
    ``response`` and ``part_metadata`` are the caller's JSON and pass unchanged.
    """
    camel = False

    def walk(node: Any) -> Any:
        nonlocal camel
        if isinstance(node, Mapping):
            out: dict[str, Any] = {}
            for key, item in node.items():
                if item is None:
                    continue
                name = _snake(key) if isinstance(key, str) else key
                camel = camel or name != key
                out[name] = item if name in _OPAQUE else walk(item)
            return out
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(value), camel


def write_camel(value: Any) -> Any:
    """Return snake_case Gemini JSON in camelCase (the inverse of ``read_spelling``'s respelling)."""
    if isinstance(value, Mapping):
        return {
            camel_key(key): item if key in _OPAQUE else write_camel(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [write_camel(item) for item in value]
    return value


def merged(base: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``fields`` merged in, nested objects merged key by key."""
    out = dict(base)
    for key, value in fields.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(dict(out[key]), value)
        else:
            out[key] = value
    return out


def remainder(obj: Mapping[str, Any], consumed: Mapping[str, Any]) -> dict[str, Any]:
    """Return what of ``obj`` is not ``consumed`` (a key set to True, or a nested map of them)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        used = consumed.get(key)
        if used is True:
            continue
        if isinstance(used, Mapping) and isinstance(value, Mapping):
            rest = remainder(value, used)
            if rest:
                out[key] = rest
        else:
            out[key] = value
    return out


# --- media types ---------------------------------------------------------------------------

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3"}


def _kind_of(mime: object) -> str:
    if isinstance(mime, str) and mime.startswith("image/"):
        return "image"
    if isinstance(mime, str) and mime.startswith("audio/"):
        return "audio"
    return "file"


def _audio_format(mime: str) -> str:
    return _AUDIO_FORMATS.get(mime, mime.split("/", 1)[-1])


# --- neutral part → Gemini part --------------------------------------------------------------


def _media_to_gemini(part: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    data, media = part.get("data"), part.get("media_type")
    if kind == "audio" and isinstance(data, str):
        fmt = part.get("format")
        mime = media if isinstance(media, str) else f"audio/{fmt}" if isinstance(fmt, str) and fmt else None
        return None if mime is None else {"inline_data": {"mime_type": mime, "data": data}}
    if isinstance(data, str) and isinstance(media, str):
        return {"inline_data": {"mime_type": media, "data": data}}
    url = part.get("url")
    if isinstance(url, str):
        file_data: dict[str, Any] = {"file_uri": url}
        if isinstance(media, str):
            file_data["mime_type"] = media
        return {"file_data": file_data}
    return None


def part_to_gemini(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return the Gemini part of a neutral part, or None when Gemini has none for it.

    Text; Gemini reasoning as a ``thought`` part with its ``thought_signature``;
    images, audio and files with base64 data (and a media type) as ``inline_data``,
    by URL as ``file_data``; a ``gemini`` provider part as it came. A file id,
    another provider's reasoning or block, audio known only by id: None.
    """
    kind = part.get("type")
    block: dict[str, Any] | None = None
    if kind == "text" and isinstance(part.get("text"), str):
        block = {"text": part["text"]}
    elif kind == "reasoning" and part.get("provider") == FMT:
        block = {"text": part.get("text") or "", "thought": True}
        if isinstance(part.get("signature"), str):
            block["thought_signature"] = part["signature"]
    elif kind in ("image", "audio", "file"):
        block = _media_to_gemini(part)
    elif is_provider_part(part, FMT):
        return dict(part["block"])
    if block is None or part.get("extra") is None:
        return block
    fields = fields_of(extra_of(part, FMT))
    return merged(block, fields) if fields else block


# --- Gemini part → neutral part --------------------------------------------------------------


def data_fields(block: Mapping[str, Any]) -> list[str]:
    """Return the datum fields a Gemini part sets (a valid part sets at most one)."""
    return [key for key in block if key in DATA_FIELDS]


def _media_from_gemini(block: Mapping[str, Any], key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    inner = block.get(key)
    if not isinstance(inner, Mapping):
        return None
    mime = inner.get("mime_type")
    kind = _kind_of(mime)
    if key == "inline_data":
        if not (isinstance(inner.get("data"), str) and isinstance(mime, str)):
            return None
        part: dict[str, Any] = {"type": kind, "data": inner["data"], "media_type": mime}
        if kind == "audio":
            part["format"] = _audio_format(mime)
        return part, {key: {"data": True, "mime_type": True}}
    if not isinstance(inner.get("file_uri"), str):
        return None
    part = {"type": "image" if kind == "image" else "file", "url": inner["file_uri"]}
    if isinstance(mime, str):
        part["media_type"] = mime
    return part, {key: {"file_uri": True, "mime_type": True}}


def part_from_gemini(block: Mapping[str, Any], where: str = "part") -> dict[str, Any]:
    """Return the neutral part of a Gemini part that is not a call or a response.

    ``block`` is in snake_case without nulls (``read_spelling``). A text part is
    ``text``, a ``thought`` part ``reasoning`` (its ``thought_signature`` as the
    signature), ``inline_data``/``file_data`` an image, audio or file part by
    media type; the part's other fields go to ``extra.gemini``. A part that
    does not read back exactly (two data fields, code execution, server tools,
    any part flowmem does not model) is a ``provider`` part, kept verbatim.
    """
    if not isinstance(block, Mapping):
        raise UnsupportedContentError(f"{where}: a part must be an object", part=type(block).__name__)
    if "text" in block and not isinstance(block["text"], str):
        raise UnsupportedContentError(f"{where}: text must be a string", part="text")
    fields = data_fields(block)
    read: tuple[dict[str, Any], dict[str, Any]] | None = None
    if fields == ["text"]:
        if block.get("thought") is True:
            part = {"type": "reasoning", "provider": FMT, "text": block["text"]}
            consumed: dict[str, Any] = {"text": True, "thought": True}
            if isinstance(block.get("thought_signature"), str):
                part["signature"] = block["thought_signature"]
                consumed["thought_signature"] = True
            read = part, consumed
        else:
            read = {"type": "text", "text": block["text"]}, {"text": True}
    elif fields in (["inline_data"], ["file_data"]):
        read = _media_from_gemini(block, fields[0])
    return lossless_part(FMT, block, read, part_to_gemini, remainder)


def require_name(value: object, where: str) -> str:
    """Return a function call's or response's name; raise ``InvalidMessageError`` when it has none."""
    if not isinstance(value, str):
        raise InvalidMessageError(f"{where}: has no name")
    return value
