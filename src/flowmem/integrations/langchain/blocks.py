"""LangChain content blocks as flowmem parts, and back (decision 0021).

Imported by ``flowmem.integrations.langchain``, which needs the ``langchain`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from flowmem.errors import InvalidMessageError

LANGCHAIN = "langchain"

# Blocks kept as ``provider`` parts under the provider whose shape they have.
_ANTHROPIC_BLOCKS = frozenset(
    {"server_tool_use", "mcp_tool_use", "mcp_tool_result", "search_result", "container_upload"}
)
_RESPONSES_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "computer_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "image_generation_call",
        "local_shell_call",
    }
)
_AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/x-wav": "wav"}


# --- content blocks <-> parts --------------------------------------------------------
#
# A *form* is one spelling of a block kind (a v1 standard ``image`` block, an OpenAI
# ``image_url`` block, an Anthropic ``image`` block with a ``source`` …). Each form
# reads its block into a neutral part plus the block's remaining fields, and writes
# them back. A block is mapped by the first form that reads it *and* writes it back
# equal; any other block is a ``provider`` part holding it verbatim.

Fields = dict[str, Any]
_Reader = Callable[[dict[str, Any]], "tuple[dict[str, Any], Fields] | None"]
_Writer = Callable[[dict[str, Any], Fields], Any]


def fields_but(block: Mapping[str, Any], *used: str) -> Fields:
    """The fields of ``block`` but ``used``: what a form keeps beside its neutral part."""
    return {k: v for k, v in block.items() if k not in used}


def _one_of(block: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    found = [k for k in keys if isinstance(block.get(k), str)]
    return found[0] if len(found) == 1 else None


def _read_text(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "text" or not isinstance(block.get("text"), str):
        return None
    return {"type": "text", "text": block["text"]}, fields_but(block, "type", "text")


def _write_text(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "text", "text": part.get("text", ""), **fields}


def _source_part(kind: str, block: Mapping[str, Any], media_key: str) -> dict[str, Any] | None:
    """Read a v1 standard ``url``/``base64``/``file_id`` source into a neutral part."""
    key = _one_of(block, ("url", "base64", "file_id"))
    if key is None:
        return None
    if key == "base64":
        part = {"type": kind, "data": block["base64"]}
        if isinstance(block.get("mime_type"), str):
            part[media_key] = block["mime_type"]
        return part
    return {"type": kind, key: block[key]}


def _v1_source(part: Mapping[str, Any], media_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "data" in part:
        out["base64"] = part["data"]
        if media_key in part:
            out["mime_type"] = part[media_key]
    elif "url" in part:
        out["url"] = part["url"]
    elif "file_id" in part:
        out["file_id"] = part["file_id"]
    return out


def _is_v1(block: Mapping[str, Any]) -> bool:
    return "source" not in block and "source_type" not in block


def _read_v1_source(kind: str, block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    """Read a v1 standard ``image`` or ``file`` block (``kind``): a url, base64 or file_id source.

    A ``file`` block with a ``file`` member is OpenAI's (``openai_file``), not this form.
    """
    if block.get("type") != kind or not _is_v1(block) or (kind == "file" and "file" in block):
        return None
    part = _source_part(kind, block, "media_type")
    if part is None:
        return None
    used = ("type", "url", "file_id") if "data" not in part else ("type", "base64", "mime_type")
    return part, fields_but(block, *used)


def _write_v1_source(kind: str, part: dict[str, Any], fields: Fields) -> Any:
    return {"type": kind, **_v1_source(part, "media_type"), **fields}


def _read_v1_audio(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "audio" or not _is_v1(block) or not isinstance(block.get("base64"), str):
        return None
    if "url" in block or "file_id" in block:
        return None
    part: dict[str, Any] = {"type": "audio", "data": block["base64"]}
    mime = block.get("mime_type")
    if isinstance(mime, str) and mime.startswith("audio/"):
        part["format"] = _AUDIO_FORMATS.get(mime, mime.split("/", 1)[1])
    # the MIME type is kept as given: ``format`` alone cannot restore ``audio/mpeg``
    return part, fields_but(block, "type", "base64")


def _write_v1_audio(part: dict[str, Any], fields: Fields) -> Any:
    block: dict[str, Any] = {"type": "audio", "base64": part.get("data", "")}
    if "mime_type" not in fields and isinstance(part.get("format"), str):
        block["mime_type"] = f"audio/{part['format']}"
    return {**block, **fields}


def _read_anthropic_source(
    block: dict[str, Any], block_type: str, kind: str
) -> tuple[dict[str, Any], Fields] | None:
    source = block.get("source")
    if block.get("type") != block_type or not isinstance(source, Mapping):
        return None
    stype = source.get("type")
    if stype == "base64" and set(source) == {"type", "media_type", "data"}:
        part = {"type": kind, "data": source["data"], "media_type": source["media_type"]}
    elif stype == "url" and set(source) == {"type", "url"}:
        part = {"type": kind, "url": source["url"]}
    elif stype == "file" and set(source) == {"type", "file_id"}:
        part = {"type": kind, "file_id": source["file_id"]}
    else:
        return None
    return part, fields_but(block, "type", "source")


def _anthropic_source(part: Mapping[str, Any]) -> dict[str, Any]:
    if "data" in part:
        return {"type": "base64", "media_type": part.get("media_type"), "data": part["data"]}
    if "url" in part:
        return {"type": "url", "url": part["url"]}
    return {"type": "file", "file_id": part.get("file_id")}


def _read_anthropic_image(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    return _read_anthropic_source(block, "image", "image")


def _write_anthropic_image(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "image", "source": _anthropic_source(part), **fields}


def _read_anthropic_document(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    return _read_anthropic_source(block, "document", "file")


def _write_anthropic_document(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "document", "source": _anthropic_source(part), **fields}


_V0_KEYS = {"url": "url", "base64": "data", "id": "id"}


def _read_v0(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    kind = block.get("type")
    source_type = block.get("source_type")
    if kind not in ("image", "file", "audio") or source_type not in _V0_KEYS:
        return None
    value = block.get(_V0_KEYS[str(source_type)])
    if not isinstance(value, str):
        return None
    if source_type == "url":
        part: dict[str, Any] = {"type": kind, "url": value}
    elif source_type == "base64":
        part = {"type": kind, "data": value}
    elif kind == "audio":
        return None  # a v0 audio id is not a provider audio id
    else:
        part = {"type": kind, "file_id": value}
    return part, fields_but(block, "type", _V0_KEYS[str(source_type)])


def _write_v0(part: dict[str, Any], fields: Fields) -> Any:
    source_type = fields.get("source_type")
    key = _V0_KEYS.get(str(source_type), "url")
    value = part.get({"url": "url", "data": "data", "id": "file_id"}[key])
    return {"type": part["type"], key: value, **fields}


def _read_image_url(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    inner = block.get("image_url")
    if block.get("type") != "image_url":
        return None
    if isinstance(inner, str):
        return {"type": "image", "url": inner}, fields_but(block, "type", "image_url")
    if not isinstance(inner, Mapping) or not isinstance(inner.get("url"), str):
        return None
    if set(inner) - {"url", "detail"}:
        return None
    part: dict[str, Any] = {"type": "image", "url": inner["url"]}
    if "detail" in inner:
        part["detail"] = inner["detail"]
    return part, fields_but(block, "type", "image_url")


def _write_image_url(part: dict[str, Any], fields: Fields) -> Any:
    inner: dict[str, Any] = {"url": part.get("url")}
    if "detail" in part:
        inner["detail"] = part["detail"]
    return {"type": "image_url", "image_url": inner, **fields}


def _write_image_url_str(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "image_url", "image_url": part.get("url"), **fields}


def _read_input_audio(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    inner = block.get("input_audio")
    if block.get("type") != "input_audio" or not isinstance(inner, Mapping):
        return None
    if set(inner) != {"data", "format"}:
        return None
    part = {"type": "audio", "data": inner["data"], "format": inner["format"]}
    return part, fields_but(block, "type", "input_audio")


def _write_input_audio(part: dict[str, Any], fields: Fields) -> Any:
    inner = {"data": part.get("data"), "format": part.get("format")}
    return {"type": "input_audio", "input_audio": inner, **fields}


def _read_openai_file(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    inner = block.get("file")
    if block.get("type") != "file" or not isinstance(inner, Mapping):
        return None
    if set(inner) - {"file_data", "file_id", "filename"}:
        return None
    part: dict[str, Any] = {"type": "file"}
    data = inner.get("file_data")
    if isinstance(data, str):
        head, sep, payload = data.partition(";base64,")
        if not sep or not head.startswith("data:"):
            return None
        part["media_type"] = head[len("data:") :]
        part["data"] = payload
    if "file_id" in inner:
        part["file_id"] = inner["file_id"]
    if "filename" in inner:
        part["filename"] = inner["filename"]
    return part, fields_but(block, "type", "file")


def _write_openai_file(part: dict[str, Any], fields: Fields) -> Any:
    inner: dict[str, Any] = {}
    if "data" in part:
        inner["file_data"] = f"data:{part.get('media_type', '')};base64,{part['data']}"
    if "file_id" in part:
        inner["file_id"] = part["file_id"]
    if "filename" in part:
        inner["filename"] = part["filename"]
    return {"type": "file", "file": inner, **fields}


def _read_v1_reasoning(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "reasoning" or "summary" in block:
        return None
    part: dict[str, Any] = {"type": "reasoning", "provider": LANGCHAIN}
    if isinstance(block.get("reasoning"), str):
        part["text"] = block["reasoning"]
        return part, fields_but(block, "type", "reasoning")
    return part, fields_but(block, "type")


def _write_v1_reasoning(part: dict[str, Any], fields: Fields) -> Any:
    block: dict[str, Any] = {"type": "reasoning"}
    if isinstance(part.get("text"), str):
        block["reasoning"] = part["text"]
    if "signature" in part and "extras" not in fields:
        # a thinking block written by another format: LangChain keeps its signature here
        block["extras"] = {"signature": part["signature"]}
    return {**block, **fields}


def _read_thinking(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "thinking" or not isinstance(block.get("thinking"), str):
        return None
    part: dict[str, Any] = {"type": "reasoning", "text": block["thinking"], "provider": "anthropic"}
    if isinstance(block.get("signature"), str):
        part["signature"] = block["signature"]
        return part, fields_but(block, "type", "thinking", "signature")
    return part, fields_but(block, "type", "thinking")


def _write_thinking(part: dict[str, Any], fields: Fields) -> Any:
    block: dict[str, Any] = {"type": "thinking", "thinking": part.get("text", "")}
    if "signature" in part:
        block["signature"] = part["signature"]
    return {**block, **fields}


def _read_redacted(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    if block.get("type") != "redacted_thinking" or not isinstance(block.get("data"), str):
        return None
    part = {"type": "reasoning", "redacted_data": block["data"], "provider": "anthropic"}
    return part, fields_but(block, "type", "data")


def _write_redacted(part: dict[str, Any], fields: Fields) -> Any:
    return {"type": "redacted_thinking", "data": part.get("redacted_data", ""), **fields}


def _read_responses_reasoning(block: dict[str, Any]) -> tuple[dict[str, Any], Fields] | None:
    summary = block.get("summary")
    if block.get("type") != "reasoning" or not isinstance(summary, list):
        return None
    texts: list[str] = []
    for item in summary:
        if not isinstance(item, Mapping) or set(item) != {"type", "text"}:
            return None
        if item["type"] != "summary_text" or not isinstance(item["text"], str):
            return None
        texts.append(item["text"])
    part: dict[str, Any] = {"type": "reasoning", "summary": texts, "provider": "responses"}
    if isinstance(block.get("encrypted_content"), str):
        part["encrypted_content"] = block["encrypted_content"]
        return part, fields_but(block, "type", "summary", "encrypted_content")
    return part, fields_but(block, "type", "summary")


def _write_responses_reasoning(part: dict[str, Any], fields: Fields) -> Any:
    summary = [{"type": "summary_text", "text": t} for t in part.get("summary", [])]
    block: dict[str, Any] = {"type": "reasoning", "summary": summary}
    if "encrypted_content" in part:
        block["encrypted_content"] = part["encrypted_content"]
    return {**block, **fields}


# form name -> (reader, writer). A part names its form in extra.langchain.form only
# when the form is not the one named after the part's type (the v1 standard block).
_FORMS: dict[str, tuple[_Reader, _Writer]] = {
    "text": (_read_text, _write_text),
    "image": (partial(_read_v1_source, "image"), partial(_write_v1_source, "image")),
    "file": (partial(_read_v1_source, "file"), partial(_write_v1_source, "file")),
    "audio": (_read_v1_audio, _write_v1_audio),
    "reasoning": (_read_v1_reasoning, _write_v1_reasoning),
    "v0": (_read_v0, _write_v0),
    "image_url": (_read_image_url, _write_image_url),
    "image_url_str": (_read_image_url, _write_image_url_str),
    "input_audio": (_read_input_audio, _write_input_audio),
    "openai_file": (_read_openai_file, _write_openai_file),
    "anthropic_image": (_read_anthropic_image, _write_anthropic_image),
    "anthropic_document": (_read_anthropic_document, _write_anthropic_document),
    "thinking": (_read_thinking, _write_thinking),
    "redacted_thinking": (_read_redacted, _write_redacted),
    "responses_reasoning": (_read_responses_reasoning, _write_responses_reasoning),
}
_PART_FORM = {"text": "text", "image": "image", "file": "file", "audio": "audio"}


def _provider_of(block: Mapping[str, Any]) -> str:
    """Return the provider whose shape a block has: anthropic, responses, or langchain."""
    kind = block.get("type")
    if isinstance(kind, str):
        if kind in _ANTHROPIC_BLOCKS or (kind.endswith("_tool_result") and kind != "tool_result"):
            return "anthropic"
        if kind == "document":
            return "anthropic"
        if kind in _RESPONSES_ITEMS:
            return "responses"
    return LANGCHAIN


def _with_lc(part: dict[str, Any], lc: dict[str, Any]) -> dict[str, Any]:
    if lc:
        part["extra"] = {LANGCHAIN: lc}
    return part


def block_to_part(block: object) -> dict[str, Any]:
    """Return one LangChain content block as a flowmem part (neutral where one exists).

    The part keeps in ``extra.langchain`` (``form``, ``fields``) whatever it needs
    to give the block back equal; a block no form reads is a ``provider`` part.
    """
    if isinstance(block, str):
        return _with_lc({"type": "text", "text": block}, {"form": "str"})
    if not isinstance(block, dict):
        raise InvalidMessageError(f"a content block must be a string or an object: {block!r}")
    for form, (read, write) in _FORMS.items():
        found = read(block)
        if found is None:
            continue
        part, fields = found
        if write(part, fields) != block:
            continue
        lc: dict[str, Any] = {}
        if form != part["type"]:
            lc["form"] = form
        if fields:
            lc["fields"] = fields
        return _with_lc(part, lc)
    return {"type": "provider", "provider": _provider_of(block), "block": block}


def _natural_block(part: Mapping[str, Any]) -> Any:
    """Return a part that no LangChain form wrote as a LangChain v1 standard block."""
    kind = part.get("type")
    if kind == "provider":
        return part.get("block")
    if kind == "reasoning":
        return _write_v1_reasoning(dict(part), {})
    if kind == "audio" and "data" not in part and "id" in part:
        return {"type": "audio", "id": part["id"]}
    writer = _FORMS.get(_PART_FORM.get(str(kind), ""), (None, None))[1]
    if writer is None:
        return {"type": "non_standard", "value": dict(part)}
    block = writer(dict(part), {})
    if kind == "file" and "filename" in part:
        block["extras"] = {"filename": part["filename"]}
    return block


def part_to_block(part: object) -> Any:
    """Return one flowmem part as the LangChain content block it was (or its v1 form)."""
    if not isinstance(part, Mapping):
        return part
    extra = part.get("extra")
    lc = extra.get(LANGCHAIN) if isinstance(extra, Mapping) else None
    if not isinstance(lc, Mapping):
        return _natural_block(part)
    form = lc.get("form", part.get("type"))
    if form == "str":
        return part.get("text", "")
    writer = _FORMS.get(str(form), (None, None))[1]
    if writer is None:
        return _natural_block(part)
    neutral = {k: v for k, v in part.items() if k != "extra"}
    return writer(neutral, dict(lc.get("fields") or {}))


__all__ = ["LANGCHAIN", "block_to_part", "fields_but", "part_to_block"]
