"""The formats' plain path: every ``to_X`` over ``normalized`` rows, the oracle of ``fast.provider_rows``.

``flowmem.formats.to_X(messages)`` converts ``fast.provider_rows(messages)``;
the functions here convert ``_common.normalized(messages)``, MEM-5 as the core
states it, with the same converters. ``tests/formats/test_fast.py`` proves the two
equal on every history (output and ``dropped`` alike); ``bench/formats.py`` times both.
"""

from __future__ import annotations

from typing import Any

from flowmem.formats._common import normalized
from flowmem.formats.anthropic import rows_to_anthropic
from flowmem.formats.gemini import rows_to_gemini
from flowmem.formats.openai_chat import rows_to_openai
from flowmem.formats.responses import rows_to_responses


def to_openai(messages: object, dropped: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """``flowmem.formats.to_openai`` over the plain normalization."""
    return rows_to_openai(normalized(messages), dropped)


def to_anthropic(
    messages: object, dropped: dict[str, int] | None = None
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """``flowmem.formats.to_anthropic`` over the plain normalization."""
    return rows_to_anthropic(normalized(messages, systems_first=False), dropped)


def to_responses(
    messages: object, dropped: dict[str, int] | None = None, *, systems_first: bool = True
) -> list[dict[str, Any]]:
    """``flowmem.formats.to_responses`` over the plain normalization."""
    return rows_to_responses(normalized(messages, systems_first), dropped)


def to_gemini(
    messages: object, dropped: dict[str, int] | None = None
) -> tuple[str | dict[str, Any] | None, list[dict[str, Any]]]:
    """``flowmem.formats.to_gemini`` over the plain normalization."""
    return rows_to_gemini(normalized(messages), dropped)
