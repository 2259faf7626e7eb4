"""The recorded Claude Code transcript of the tests and what importing it must store, block for block.

The expectation is written by hand from the fixture's lines (``blocks(uuid)`` reads a
line's own content blocks, so every value is compared exactly): which lines make
each Anthropic message, where the MEM-3 placeholder stands, what the compaction
left live.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flowmem.core import HEALED_CONTENT

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SESSION = "7f3c1e2a-5b4d-4c6e-9a8b-1d2e3f4a5b6c"
KEY = "claude_code"
DATA = FIXTURE.read_bytes()
LINES = DATA.split(b"\n")[:-1]
_BY_UUID = {json.loads(line).get("uuid"): json.loads(line) for line in LINES}


def lines_until(uuid: str) -> bytes:
    """The transcript as it stood when line ``uuid`` was the last one written."""
    for index, line in enumerate(LINES):
        if json.loads(line).get("uuid") == uuid:
            return b"".join(raw + b"\n" for raw in LINES[: index + 1])
    raise KeyError(uuid)


def blocks(*uuids: str) -> list[Any]:
    """The content blocks of these lines' messages, in order (a string is one text block)."""
    out: list[Any] = []
    for uuid in uuids:
        content = _BY_UUID[uuid]["message"]["content"]
        out.extend([{"type": "text", "text": content}] if isinstance(content, str) else content)
    return out


def text(uuid: str) -> str:
    """A line's message content, a string."""
    content = _BY_UUID[uuid]["message"]["content"]
    assert isinstance(content, str)
    return content


def healed(call_id: str) -> dict[str, Any]:
    """The MEM-3 placeholder's tool_result block for ``call_id``."""
    return {"type": "tool_result", "tool_use_id": call_id, "content": HEALED_CONTENT}


BEFORE_COMPACTION: list[dict[str, Any]] = [
    {"role": "user", "content": text("u-0001")},
    {"role": "assistant", "content": blocks("a-0001", "a-0002", "a-0003")},  # thinking, text, tool_use
    {"role": "user", "content": blocks("u-0002")},
    {"role": "assistant", "content": blocks("a-0004")},
    {"role": "user", "content": blocks("u-0003")},  # is_error
    {"role": "assistant", "content": blocks("a-0005", "a-0006")},  # redacted_thinking, Task (its sidechain skipped)
    {"role": "user", "content": blocks("u-0004")},
    {"role": "assistant", "content": blocks("a-0007")},  # the interrupted Edit
    {"role": "user", "content": [healed("toolu_04Edit"), *blocks("u-0005", "u-0006")]},  # MEM-3; the image
    {"role": "assistant", "content": blocks("a-0008")},
]
"""What the rows archived by the compaction send as Anthropic messages."""

LIVE: list[dict[str, Any]] = [
    {"role": "user", "content": blocks("c-0001", "u-0007")},  # the compaction's summary, then the user's turn
    {"role": "assistant", "content": blocks("a-0009")},
    {"role": "user", "content": blocks("u-0008")},
    {"role": "assistant", "content": blocks("a-0010")},
    {"role": "user", "content": blocks("u-0009")},
    {"role": "assistant", "content": blocks("a-0011")},
]
"""What the live rows after the compaction send."""

LIVE_ROWS = 7
ARCHIVED_ROWS = 12  # 11 rows of the lines and the placeholder
SKIPPED = {"compact_boundary": 1, "file-history-snapshot": 1, "sidechain": 2, "summary": 1, "system": 1}
