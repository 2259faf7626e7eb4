"""The default token counter: an offline estimate of one stored row's tokens (issue 28 §1).

It needs no tokenizer file and no network, so it works everywhere and is the count
flowmem stores per row at append time. It is an estimate, documented part by part
in docs/memory.md ("Counting tokens"):

- text (content, reasoning text and summaries, tool-call names and arguments, a
  tool result): one token per four UTF-8 bytes, rounded up; English prose averages
  about four bytes a token in the OpenAI and Anthropic tokenizers;
- each row: ``ROW_TOKENS`` for the role and the message's framing, each tool call
  ``CALL_TOKENS`` more;
- an image: OpenAI's published rule for ``detail: high`` (scaled to fit 2048 × 2048,
  then its short side to 768; 170 tokens a 512-pixel tile plus 85), from the pixel
  size read off the PNG, JPEG, GIF or WebP header of inline data; ``detail: low``
  is 85; an image by URL, or whose size cannot be read, counts as 1024 × 1024;
- a PDF: ``PDF_PAGE_TOKENS`` a page (Anthropic's published range is 1,500 to 3,000
  text tokens a page, plus the page image), pages counted from the document's page
  objects; any other file or a file by id: ``FILE_TOKENS``;
- audio: ``AUDIO_TOKENS``; an encrypted reasoning item or a signed block: a token per
  four characters of its payload, as it is sent back;
- any other part: a token per four bytes of its JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Callable, Mapping
from typing import Any

# a token counter: one stored row in, its tokens out (issue 28)
Counter = Callable[[Mapping[str, Any]], int]

TextCounter = Callable[[str], int]

ROW_TOKENS = 4
CALL_TOKENS = 8
IMAGE_LOW_TOKENS = 85
PDF_PAGE_TOKENS = 1_500
FILE_TOKENS = 1_500
AUDIO_TOKENS = 1_000
_UNKNOWN_SIZE = (1024, 1024)
_HEADER_BYTES = 64 * 1024  # an image's size is in its first bytes: decode no more


def text_tokens(text: str) -> int:
    """Estimated tokens of a text: a token per four UTF-8 bytes, rounded up."""
    if text.isascii():  # a byte a character: no encoding (ceil(n / 4) in integers)
        return (len(text) + 3) // 4
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)


def image_tokens(width: int, height: int, detail: str | None = None) -> int:
    """OpenAI's published image cost for ``detail`` (``high`` unless ``low``)."""
    if detail == "low":
        return IMAGE_LOW_TOKENS
    if width <= 0 or height <= 0:
        width, height = _UNKNOWN_SIZE
    scale = min(1.0, 2048 / max(width, height))
    wide, high = width * scale, height * scale
    scale = min(1.0, 768 / min(wide, high))
    wide, high = wide * scale, high * scale
    tiles = math.ceil(wide / 512) * math.ceil(high / 512)
    return 85 + 170 * tiles


def image_size(data: bytes) -> tuple[int, int] | None:
    """The pixel size in a PNG, JPEG, GIF or WebP header, or None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return int(width), int(height)
        at += 2 + length
    return None


def _decoded_head(data: object, limit: int = _HEADER_BYTES) -> bytes:
    if not isinstance(data, str):
        return b""
    head = data[: limit // 3 * 4]
    try:
        return base64.b64decode(head[: len(head) // 4 * 4], validate=False)
    except (binascii.Error, ValueError):
        return b""


def _pdf_pages(data: object) -> int:
    if not isinstance(data, str):
        return 1
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return 1
    pages = raw.count(b"/Type /Page") - raw.count(b"/Type /Pages")
    pages += raw.count(b"/Type/Page") - raw.count(b"/Type/Pages")
    return max(1, pages)


def part_tokens(part: object, text: TextCounter = text_tokens) -> int:
    """Estimated tokens of one content part (see the module docstring); ``text`` counts its text."""
    if isinstance(part, str):
        return text(part)
    if not isinstance(part, Mapping):
        return 0
    kind = part.get("type")
    if kind == "text":
        return text(str(part.get("text", "")))
    if kind == "image":
        size = image_size(_decoded_head(part.get("data"))) or _UNKNOWN_SIZE
        detail = part.get("detail")
        return image_tokens(*size, detail=detail if isinstance(detail, str) else None)
    if kind == "file":
        if part.get("media_type") == "application/pdf" and "data" in part:
            return PDF_PAGE_TOKENS * _pdf_pages(part.get("data"))
        return FILE_TOKENS
    if kind == "audio":
        return AUDIO_TOKENS
    if kind == "reasoning":
        return _reasoning_tokens(part, text)
    return text(_json(part))


def _reasoning_tokens(part: Mapping[str, Any], text: TextCounter) -> int:
    total = 0
    for key in ("text",):
        value = part.get(key)
        if isinstance(value, str):
            total += text(value)
    for key in ("signature", "redacted_data", "encrypted_content"):  # opaque: as sent back
        value = part.get(key)
        if isinstance(value, str):
            total += text_tokens(value)
    summary = part.get("summary")
    if isinstance(summary, list):
        total += sum(text(s) if isinstance(s, str) else part_tokens(s, text) for s in summary)
    return total


def _json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _content_tokens(content: object, text: TextCounter) -> int:
    if isinstance(content, str):
        return text(content)
    if isinstance(content, list):
        return sum(part_tokens(part, text) for part in content)
    return 0 if content is None else text(_json(content))


def _calls(row: Mapping[str, Any]) -> list[Any]:
    calls = row.get("tool_calls")
    if calls is None and isinstance(row.get("metadata"), (dict, Mapping)):  # dict: no abc call
        calls = row["metadata"].get("tool_calls")
    return calls if isinstance(calls, list) else []


def estimate_tokens(row: Mapping[str, Any]) -> int:
    """The default counter: the estimated tokens of one stored (or flat) row."""
    return count_tokens(row, text_tokens)


def count_tokens(row: Mapping[str, Any], text: TextCounter) -> int:
    """One row's tokens with ``text`` counting its texts (a tokenizer) and the rules above for the rest."""
    total = ROW_TOKENS + _content_tokens(row.get("content"), text)
    for call in _calls(row):
        total += CALL_TOKENS
        if isinstance(call, (dict, Mapping)):
            function = call.get("function")
            if isinstance(function, (dict, Mapping)):
                call = {**call, **function}
            for key in ("name", "arguments", "args", "input"):
                value = call.get(key)
                if value is not None:
                    total += text(value if isinstance(value, str) else _json(value))
    return total
