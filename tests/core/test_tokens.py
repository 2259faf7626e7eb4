"""The default offline token counter (issue 28 §1): its published per-part rules."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from flowmem.core.tokens import (
    CALL_TOKENS,
    FILE_TOKENS,
    PDF_PAGE_TOKENS,
    ROW_TOKENS,
    estimate_tokens,
    image_size,
    image_tokens,
    part_tokens,
    text_tokens,
)


def _png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    return (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    )


def _jpeg(width: int, height: int) -> bytes:
    app0 = (
        b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    )
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00" * 3
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"


def _webp(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00"
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


@pytest.mark.parametrize(
    ("size", "tokens"),
    # OpenAI's worked examples for detail: high
    [((1024, 1024), 765), ((2048, 4096), 1105), ((4096, 8192), 1105), ((512, 512), 255)],
)
def test_image_cost_follows_openais_published_rule(size: tuple[int, int], tokens: int) -> None:
    assert image_tokens(*size) == tokens
    assert image_tokens(*size, detail="low") == 85


@pytest.mark.parametrize("make", [_png, _jpeg, _gif, _webp], ids=["png", "jpeg", "gif", "webp"])
def test_the_pixel_size_is_read_off_the_image_header(make) -> None:  # type: ignore[no-untyped-def]
    assert image_size(make(1500, 700)) == (1500, 700)


def test_an_inline_image_costs_by_its_size_not_by_its_base64_length() -> None:
    small = {
        "type": "image",
        "media_type": "image/png",
        "data": base64.b64encode(_png(512, 512) + b"\0" * 300_000).decode(),
    }
    large = {
        "type": "image",
        "media_type": "image/png",
        "data": base64.b64encode(_png(2048, 2048)).decode(),
    }
    assert part_tokens(small) == 255
    assert part_tokens(large) == 765
    assert part_tokens({"type": "image", "url": "https://example.com/x.png"}) == 765


def test_a_pdf_costs_per_page_and_other_files_a_flat_estimate() -> None:
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 3 >>\n" + b"<< /Type /Page >>\n" * 3
    part = {"type": "file", "media_type": "application/pdf", "data": base64.b64encode(pdf).decode()}
    assert part_tokens(part) == 3 * PDF_PAGE_TOKENS
    assert part_tokens({"type": "file", "file_id": "file-1"}) == FILE_TOKENS


def test_text_is_a_token_per_four_utf8_bytes() -> None:
    assert text_tokens("") == 0
    assert text_tokens("abcd") == 1
    assert text_tokens("abcde") == 2
    assert text_tokens("é" * 4) == 2  # eight bytes


def test_a_row_counts_its_framing_its_content_and_its_calls() -> None:
    row = {
        "role": "assistant",
        "content": "abcdefgh",
        "metadata": {"tool_calls": [{"id": "c1", "name": "look", "args": {"q": "x"}}]},
    }
    assert estimate_tokens(row) == ROW_TOKENS + 2 + CALL_TOKENS + 1 + 3
    flat = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "look", "arguments": '{"q":"x"}'}}],
    }
    assert estimate_tokens(flat) == ROW_TOKENS + CALL_TOKENS + 1 + 3


def test_encrypted_reasoning_counts_as_its_payload() -> None:
    part = {
        "type": "reasoning",
        "provider": "responses",
        "encrypted_content": "x" * 400,
        "summary": ["abcd"],
    }
    assert part_tokens(part) == 101
