"""Provider formats ↔ flowmem rows (pure): OpenAI Chat, OpenAI Responses/Agents, Anthropic, Gemini.

``to_X(rows, dropped=None)`` normalizes first (MEM-5, keeping content parts) and
returns what that API accepts; ``from_X(...)`` returns flowmem flat rows (content
parts, call kinds, ``extra``), without normalizing; ``to_X(from_X(h))`` is ``h``'s
normalized form, nothing lost. What a format cannot carry from another is left
out and counted in ``dropped`` (``docs/formats.md`` has the table).
``detect_format`` tells which format a payload is in, and refuses one in none
(``unknown_format``); ``check_payload`` says what its provider would reject, at the
payload's own positions.
``to_X`` reads its rows through a speed twin (``fast.provider_rows``);
``flowmem.formats.plain`` has each ``to_X`` over the plain normalization, its oracle.
"""

from flowmem.formats.anthropic import from_anthropic, to_anthropic
from flowmem.formats.check import check_payload
from flowmem.formats.detect import DETECTED, detect_format, format_candidates, is_gemini_content
from flowmem.formats.documents import (
    FIRST_ROLE,
    FORMATS,
    check_format,
    read_document,
    read_payload,
    rows_list,
    write_answer,
    write_document,
)
from flowmem.formats.gemini import from_gemini, to_gemini
from flowmem.formats.openai_chat import from_openai, to_openai
from flowmem.formats.responses import from_responses, row_to_items, to_responses

__all__ = [
    "DETECTED",
    "FIRST_ROLE",
    "FORMATS",
    "check_format",
    "check_payload",
    "detect_format",
    "format_candidates",
    "from_anthropic",
    "from_gemini",
    "from_openai",
    "from_responses",
    "is_gemini_content",
    "read_document",
    "read_payload",
    "row_to_items",
    "rows_list",
    "to_anthropic",
    "to_gemini",
    "to_openai",
    "to_responses",
    "write_answer",
    "write_document",
]
