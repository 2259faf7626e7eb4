"""Whole provider request documents ↔ flowmem rows, by format name (used by the CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowmem.core import Message
from flowmem.errors import FormatMismatchError, InvalidInputError
from flowmem.formats.anthropic import from_anthropic, to_anthropic
from flowmem.formats.detect import detect_format, format_candidates
from flowmem.formats.gemini import from_gemini, to_gemini
from flowmem.formats.openai_chat import from_openai, to_openai
from flowmem.formats.origins import Origins
from flowmem.formats.responses import from_responses, to_responses
from flowmem.formats.unknown import unknown_format

FORMATS: tuple[str, ...] = ("openai", "responses", "anthropic", "gemini")
# the role a provider's history must start with, the system prompt aside: what a token
# window (issue 28) in that format starts on; formats absent here may start on any turn
FIRST_ROLE: dict[str, str] = {"anthropic": "user", "gemini": "user"}


def _check_name(name: str) -> None:
    if name not in FORMATS:
        raise InvalidInputError(f"unknown format {name!r}: expected one of {', '.join(FORMATS)}")


def read_document(name: str, document: object, origins: Origins | None = None) -> list[Message]:
    """Return the flowmem flat rows of a provider document in format ``name``.

    ``openai``: a message list or a request body with ``messages``. ``responses``: an
    item list or a request body with ``input`` (a string is one user message) and
    optional ``instructions`` (a leading system row). ``anthropic``: a message list
    or a request body with ``messages`` and optional ``system``. ``gemini``: a content
    list or a request body with ``contents`` and optional ``system_instruction``
    (``systemInstruction``). ``origins``, when given, gets where in the document's
    list each row came from (``Origins``; not yet for ``gemini``, whose violations
    are reported at row positions).
    """
    _check_name(name)
    body: Mapping[str, Any] = document if isinstance(document, Mapping) else {}
    if name == "gemini":
        if isinstance(document, Mapping):
            system = body.get("system_instruction", body.get("systemInstruction"))
            return from_gemini(system, body.get("contents"))
        return from_gemini(None, document)
    if name == "openai":
        return from_openai(body.get("messages", document), origins=origins)
    if name == "anthropic":
        if isinstance(document, Mapping):
            return from_anthropic(body.get("system"), body.get("messages"), origins=origins)
        return from_anthropic(None, document, origins=origins)
    if not isinstance(document, Mapping):
        return from_responses(document, origins=origins)
    items = body.get("input")
    if isinstance(items, str):
        rows: list[Message] = [{"role": "user", "content": items}]
        if origins is not None:
            origins.add(0)
    else:
        rows = from_responses(items, origins=origins)
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        rows.insert(0, {"role": "system", "content": instructions})
        if origins is not None:
            origins.lead()
    return rows


def write_document(name: str, messages: object, dropped: dict[str, int] | None = None) -> Any:
    """Return ``messages`` normalized and written in format ``name`` as a JSON-ready value.

    ``openai`` and ``responses`` give a list; ``anthropic`` gives ``{"system", "messages"}``
    (``system`` only when there is one); ``gemini`` gives ``{"system_instruction",
    "contents"}`` (``system_instruction`` only when there is one). What format
    ``name`` cannot carry is counted per kind in ``dropped`` when given.
    """
    _check_name(name)
    if name == "gemini":
        instruction, contents = to_gemini(messages, dropped)
        if instruction is None:
            return {"contents": contents}
        return {"system_instruction": instruction, "contents": contents}
    if name == "openai":
        return to_openai(messages, dropped)
    if name == "responses":
        return to_responses(messages, dropped)
    system, out = to_anthropic(messages, dropped)
    return {"messages": out} if system is None else {"system": system, "messages": out}


def write_answer(name: str, messages: object, dropped: dict[str, int] | None = None) -> dict[str, Any]:
    """``write_document``'s value as the HTTP API answers it: the message list as ``messages``.

    Anthropic's ``system`` or Gemini's ``system_instruction`` comes first (None when
    the messages have none); the other formats answer ``messages`` alone.
    """
    written = write_document(name, messages, dropped)
    if name == "anthropic":
        return {"system": written.get("system"), "messages": written["messages"]}
    if name == "gemini":
        return {"system_instruction": written.get("system_instruction"), "messages": written["contents"]}
    return {"messages": written}


def rows_list(document: object, where: str = "payload") -> list[Any]:
    """Return the message list of a rows payload: a list, or ``{"messages": [...]}``."""
    if isinstance(document, Mapping) and isinstance(document.get("messages"), list):
        document = document["messages"]
    if not isinstance(document, list):
        raise InvalidInputError(f"{where} must hold a JSON list of messages", field=where)
    return document


def check_format(document: object, name: str, where: str = "payload") -> None:
    """Refuse (``format_mismatch``) a payload that plainly is not in format ``name``.

    Plain text messages fit every format but Gemini; a payload with what only
    another format has (an Anthropic ``tool_use`` block read as OpenAI, a Responses
    item read as rows, a Gemini content read as rows) is refused, so it is never
    converted into corrupt rows. A payload in no format at all (a pydantic-ai or
    LangChain dump) is ``unknown_format`` (``UnknownFormatError``).
    """
    candidates = format_candidates(document)
    if not candidates:
        raise unknown_format(document, where)
    if name not in candidates:
        found = detect_format(document)
        raise FormatMismatchError(
            f"{where} looks like a payload in format {found!r}, not {name!r}", field=where
        )


def read_payload(
    document: object, name: str | None = None, where: str = "payload"
) -> tuple[str, list[Message]]:
    """Return ``(format, rows)`` of a payload in format ``name``, detected when None.

    Rows are returned as given (a list, or ``{"messages"}``); a provider payload is
    converted with ``read_document``. An explicit format the payload plainly is not
    is refused with ``FormatMismatchError``, a payload no format reads with
    ``UnknownFormatError``; invalid input in its own format raises that format's
    typed error (``invalid_message``, ``unsupported_content`` …).
    """
    if name is None:
        if not format_candidates(document):
            raise unknown_format(document, where)
        name = detect_format(document)
    else:
        check_format(document, name, where)
    if name == "rows":
        return name, rows_list(document, where)
    return name, read_document(name, document)
