"""Provider formats ↔ flowmem rows (pure): OpenAI Chat, OpenAI Responses/Agents, Anthropic.

``to_X(rows)`` normalizes first (MEM-5) and returns what that API accepts;
``from_X(...)`` returns flowmem flat rows, tool calls spelled
``{"tool_call_id", "name", "args"}``, without normalizing. What a format cannot
carry is listed in ``docs/formats.md``.
"""

from flowmem.formats.anthropic import from_anthropic, to_anthropic
from flowmem.formats.documents import FORMATS, read_document, write_document
from flowmem.formats.openai_chat import from_openai, to_openai
from flowmem.formats.responses import from_responses, row_to_items, to_responses

__all__ = [
    "FORMATS",
    "from_anthropic",
    "from_openai",
    "from_responses",
    "read_document",
    "row_to_items",
    "to_anthropic",
    "to_openai",
    "to_responses",
    "write_document",
]
