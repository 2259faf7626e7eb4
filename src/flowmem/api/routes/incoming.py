"""What a request's messages become: at most ``MAX_BATCH`` rows, converted from their format.

Shared by the routes that take messages in a body (``FormattedMessages``): the
append and the compaction that replaces a history. Everything here is checked
before the store is touched, so a refusal changes nothing.
"""

from __future__ import annotations

from typing import Any

from flowmem.api.models import FormattedMessages
from flowmem.core import check_storable
from flowmem.errors import PayloadTooLargeError
from flowmem.formats import check_format, is_gemini_content, read_document

MAX_BATCH = 1000  # messages per request


def rows_of(body: FormattedMessages) -> list[Any]:
    """The body's messages as rows: one or a list, converted from a provider's format.

    413 ``payload_too_large`` past ``MAX_BATCH`` (before and after a conversion,
    which may split a message); a payload plainly in another format
    ``format_mismatch``, one in no format ``unknown_format``, invalid input in its
    own format that format's error (``invalid_message``, ``unsupported_content`` …).
    """
    messages = body.messages if isinstance(body.messages, list) else [body.messages]
    _check_batch(messages)
    if body.format == "rows":
        _check_rows(messages)
        return messages
    converted = _from_provider(body.format, messages, body.system, body.system_instruction)
    _check_batch(converted)
    return converted


def _check_batch(messages: list[Any]) -> None:
    if len(messages) > MAX_BATCH:
        raise PayloadTooLargeError(
            f"at most {MAX_BATCH} messages per request, got {len(messages)}", field="messages"
        )


def _from_provider(fmt: str, messages: list[Any], system: Any, instruction: Any) -> list[Any]:
    """A provider's messages (Anthropic's ``system``, Gemini's ``system_instruction``) as rows."""
    check_storable(system, "body.system")
    check_storable(instruction, "body.system_instruction")
    document: dict[str, Any] = {"messages": messages}
    if fmt == "anthropic" and system is not None:
        document["system"] = system
    check_format(document if fmt == "anthropic" else messages, fmt, "body.messages")
    if fmt == "responses":
        return read_document(fmt, messages)
    if fmt == "gemini":
        return read_document(fmt, {"contents": messages, "system_instruction": instruction})
    return read_document(fmt, document)


def _check_rows(messages: list[Any]) -> None:
    """Refuse Gemini contents sent as rows (``format_mismatch``): rows would read them empty."""
    if any(isinstance(m, dict) and "parts" in m and is_gemini_content(m) for m in messages):
        check_format(messages, "rows", "body.messages")
