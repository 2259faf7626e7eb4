"""Anthropic Messages (``system`` + ``messages``) ↔ flowmem rows (lossless within the format)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowmem.core import Message
from flowmem.errors import InvalidMessageError, UnknownRoleError, UnsupportedContentError
from flowmem.formats._common import (
    HINT,
    call_entry,
    entries,
    extra_of,
    fields_of,
    input_object,
    is_provider_part,
    kept_whole,
    lossless_part,
    note,
    object_list,
    part_kind,
    put_extra,
    read_entry,
    read_parts,
    required_call_id,
    whole,
)
from flowmem.formats.fast import provider_rows
from flowmem.formats.origins import OUTSIDE, Origins

FMT = "anthropic"
SYSTEM_SEPARATOR = "\n\n"
CALL_KINDS = ("function",)
"""The call kinds Anthropic carries (``tool_use``); any other kind is dropped with its results."""

_ORDER = HINT + "order"  # the order of an assistant message's parts (p) and tool_use blocks (c)
_IN_MESSAGES = HINT + "in_messages"  # a system row that came as a ``{"role": "system"}`` message
_PDF = "application/pdf"


# --- blocks ---------------------------------------------------------------------------------


def _source_of(part: Mapping[str, Any], base64_types: tuple[str, ...] | None) -> dict[str, Any] | None:
    if isinstance(part.get("data"), str) and isinstance(part.get("media_type"), str):
        if base64_types is None or part["media_type"] in base64_types:
            return {"type": "base64", "media_type": part["media_type"], "data": part["data"]}
        return None
    if isinstance(part.get("url"), str):
        return {"type": "url", "url": part["url"]}
    if isinstance(part.get("file_id"), str):
        return {"type": "file", "file_id": part["file_id"]}
    return None


def _part_to_anthropic(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return the Anthropic block of a neutral part, or None when Anthropic has none."""
    kind = part.get("type")
    fields = fields_of(extra_of(part, FMT))
    block: dict[str, Any] | None = None
    if kind == "text" and isinstance(part.get("text"), str):
        block = {"type": "text", "text": part["text"]}
    elif kind == "image":
        source = _source_of(part, None)
        block = None if source is None else {"type": "image", "source": source}
    elif kind == "file":
        source = _source_of(part, (_PDF,))
        block = None if source is None else {"type": "document", "source": source}
    elif kind == "reasoning" and part.get("provider") == FMT:
        if isinstance(part.get("redacted_data"), str):
            block = {"type": "redacted_thinking", "data": part["redacted_data"]}
        else:
            block = {"type": "thinking", "thinking": part.get("text") or "", "signature": part.get("signature") or ""}
    elif is_provider_part(part, FMT):
        return dict(part["block"])
    if block is not None:
        block.update(fields)
    return block


_REQUIRED = {  # the string fields a block of these types cannot be without
    "text": ("text",),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
}


def _checked(block: Mapping[str, Any], where: str) -> None:
    """Raise ``UnsupportedContentError`` for a block invalid in Anthropic's own format."""
    kind = block["type"]
    missing = [key for key in _REQUIRED.get(kind, ()) if not isinstance(block.get(key), str)]
    source = block.get("source")
    if kind in ("image", "document") and not (
        isinstance(source, Mapping) and isinstance(source.get("type"), str)
    ):
        missing.append("source")
    if missing:
        raise UnsupportedContentError(
            f"{where}: {kind!r} block without {', '.join(missing)}", block=kind
        )


def _part_from_anthropic(block: Mapping[str, Any], where: str = "block") -> dict[str, Any]:
    """Return the neutral part of an Anthropic block (a provider part when not modeled exactly)."""
    _checked(block, where)
    kind = block["type"]
    found: tuple[dict[str, Any], set[str]] | None = None
    if kind == "text" and isinstance(block.get("text"), str):
        found = {"type": "text", "text": block["text"]}, {"type", "text"}
    elif kind in ("image", "document") and isinstance(block.get("source"), Mapping):
        source = block["source"]
        part: dict[str, Any] = {"type": "image" if kind == "image" else "file"}
        if source.get("type") == "base64":
            part["data"], part["media_type"] = source.get("data"), source.get("media_type")
        elif source.get("type") == "url":
            part["url"] = source.get("url")
        elif source.get("type") == "file":
            part["file_id"] = source.get("file_id")
        found = part, {"type", "source"}
    elif kind == "thinking":
        thinking = {"type": "reasoning", "provider": FMT, "text": block.get("thinking"), "signature": block.get("signature")}
        found = thinking, {"type", "thinking", "signature"}
    elif kind == "redacted_thinking":
        found = {"type": "reasoning", "provider": FMT, "redacted_data": block.get("data")}, {"type", "data"}
    return lossless_part(FMT, block, found, _part_to_anthropic)


def _blocks(content: Any, dropped: dict[str, int] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in read_parts(content):
        block = _part_to_anthropic(part)
        if block is None:
            note(dropped, part_kind(part))
        else:
            out.append(block)
    return out


# --- rows → (system, messages) ------------------------------------------------------------------


def _push(out: list[dict[str, Any]], role: str, content: str | list[dict[str, Any]]) -> None:
    """Add content to the last message when it has the same role (Anthropic alternates), else start one."""
    if out and out[-1]["role"] == role:
        prev = out[-1]["content"]
        if isinstance(prev, str):
            prev = [{"type": "text", "text": prev}] if prev else []
        more = ([{"type": "text", "text": content}] if content else []) if isinstance(content, str) else content
        out[-1]["content"] = prev + more
    else:
        out.append({"role": role, "content": content})


def _assistant_content(row: Message, dropped: dict[str, int] | None, skipped: dict[str, str]) -> list[dict[str, Any]] | str | None:
    content = row["content"]
    blocks = _blocks(content, dropped) if isinstance(content, list) else []
    calls: list[dict[str, Any]] = []
    for raw in row.get("tool_calls") or []:
        call = read_entry(raw)
        if call.kind not in CALL_KINDS:
            note(dropped, call.kind)
            skipped[call.id] = call.kind
            continue
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": input_object(call.args)}
        if "extra" in raw:
            block.update(fields_of(extra_of(raw, FMT)))
        calls.append(block)
    if isinstance(content, str):
        if not calls:
            return content or None
        blocks = [{"type": "text", "text": content}] if content else []
    order = extra_of(row, FMT).get(_ORDER)
    if not (isinstance(order, str) and order.count("p") == len(blocks) and order.count("c") == len(calls) and set(order) <= {"p", "c"}):
        order = "p" * len(blocks) + "c" * len(calls)
    if not order:
        return None
    parts, uses = iter(blocks), iter(calls)
    return [next(parts) if token == "p" else next(uses) for token in order]


def _tool_result(row: Message, dropped: dict[str, int] | None) -> dict[str, Any]:
    if type(row["content"]) is not str:  # (kept whole: a list of one provider part)
        kept = kept_whole(row, FMT, lambda block: block.get("type") == "tool_result")
        if kept is not None:
            return kept
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": row["tool_call_id"]}
    content = row["content"]
    if isinstance(content, list):
        block["content"] = _blocks(content, dropped)
    elif content != "":
        block["content"] = content
    if row.get("is_error") is True:
        block["is_error"] = True
    block.update(fields_of(extra_of(row, FMT)))
    return block


def _system(rows: list[Message], dropped: dict[str, int] | None) -> str | list[dict[str, Any]] | None:
    contents: list[Any] = []
    for row in rows:
        content = row["content"]
        if isinstance(content, list):
            blocks = [b for b in _blocks(content, dropped) if b.get("type") == "text"]
            note(dropped, "system_part", len(read_parts(content)) - len(blocks))
            content = blocks
        if content not in ("", []):
            contents.append(content)
    if not contents:
        return None
    if len(contents) == 1:
        return contents[0]  # type: ignore[no-any-return]
    if all(isinstance(c, str) for c in contents):
        return SYSTEM_SEPARATOR.join(contents)
    return [b for c in contents for b in ([{"type": "text", "text": c}] if isinstance(c, str) else c)]


def to_anthropic(
    messages: object, dropped: dict[str, int] | None = None
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Return ``messages`` (flowmem stored or flat rows) as Anthropic ``(system, messages)``.

    Normalizes first (MEM-5 keeping content parts, the system rows placed as
    follows). ``system`` is the system rows' content as given (a string or text blocks with their ``cache_control``;
    several rows are joined), ``None`` when there is none. A system row read from
    a ``{"role": "system"}`` message after the conversation began (a
    mid-conversation system message, which Anthropic takes in ``messages``) stays
    there, in its place; every other system row, one leading the messages
    included (the API refuses a system message first), is in ``system``. An assistant turn's
    parts (``thinking`` first, as recorded) come before its ``tool_use`` blocks
    unless ``from_anthropic`` recorded another order; each ``tool`` row is a
    ``tool_result`` block (``is_error`` kept) in the next user message.
    Consecutive same-role turns are merged, as Anthropic requires. What Anthropic
    cannot carry (other providers' reasoning and blocks, audio, non-PDF file data,
    call kinds other than function with their results) is left out and counted
    per kind in ``dropped`` when given.
    """
    return rows_to_anthropic(provider_rows(messages, systems_first=False), dropped)


def rows_to_anthropic(rows: list[Message], dropped: dict[str, int] | None = None) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Return normalized provider-flat rows (``fast.provider_rows``, systems in place) as Anthropic ``(system, messages)``."""
    systems: list[Message] = []
    out: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}  # the calls left out (their results go too), by kind
    for row in rows:
        role, content = row["role"], row["content"]
        if role == "system":
            if out and is_system_message(row):
                out.append({"role": "system", "content": content if isinstance(content, str) else _blocks(content, dropped)})
            else:
                systems.append(row)
        elif role == "user":
            body = content if isinstance(content, str) else _blocks(content, dropped)
            if body not in ("", []):
                _push(out, "user", body)
        elif role == "assistant":
            turn = _assistant_content(row, dropped, skipped)
            if turn is not None:
                _push(out, "assistant", turn)
        elif row["tool_call_id"] in skipped:
            note(dropped, f"{skipped[row['tool_call_id']]}_result")
        else:
            _push(out, "user", [_tool_result(row, dropped)])
    return _system(systems, dropped), out


# --- (system, messages) → rows ------------------------------------------------------------------


def is_system_message(row: Mapping[str, Any]) -> bool:
    """Return True for a system row ``from_anthropic`` read from a ``{"role": "system"}`` message.

    The Messages API takes no such message (its system prompt is the request's
    ``system``); ``flowmem.formats.check_payload`` reports it.
    """
    return row.get("role") == "system" and bool(extra_of(row, FMT).get(_IN_MESSAGES))


def _content(content: object, where: str) -> Any:
    if isinstance(content, str):
        return content
    return [_part_from_anthropic(block, f"{where}[{n}]") for n, block in enumerate(object_list(content, where))]


def _assistant_row(blocks: list[Mapping[str, Any]], where: str) -> Message:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    order = ""
    for n, block in enumerate(blocks):
        at = f"{where}.content[{n}]"
        if block["type"] == "tool_result":
            raise UnsupportedContentError(f"{at}: a tool_result block belongs in a user message", block="tool_result")
        if block["type"] == "tool_use":
            cid = required_call_id(block.get("id"), at)
            name = block.get("name")
            if not isinstance(name, str):
                raise InvalidMessageError(f"{at}: tool_use has no name")
            fields = {k: v for k, v in block.items() if k not in ("type", "id", "name", "input")}
            calls.append(call_entry(cid, name, block.get("input", {}), "function", FMT, fields))
            order += "c"
        else:
            parts.append(_part_from_anthropic(block, at))
            order += "p"
    row: Message = {"role": "assistant", "content": parts if parts or not calls else ""}
    if calls:
        row["tool_calls"] = calls
    if order != "p" * len(parts) + "c" * len(calls):
        put_extra(row, FMT, {_ORDER: order})
    return row


def _tool_row(block: Mapping[str, Any], where: str) -> Message:
    row: Message = {"role": "tool", "content": "", "tool_call_id": required_call_id(block.get("tool_use_id"), where)}
    fields = {k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content", "is_error")}
    content = block.get("content")
    if isinstance(content, str) and content:
        row["content"] = content
    elif isinstance(content, list) and content:
        row["content"] = _content(content, f"{where}.content")
    elif "content" in block:
        fields["content"] = content
    if block.get("is_error") is True:
        row["is_error"] = True
    elif "is_error" in block:
        fields["is_error"] = block["is_error"]
    return whole(put_extra(row, FMT, fields), FMT, block)


def _user_rows(blocks: list[Mapping[str, Any]], where: str) -> list[Message]:
    """Split a user message: each ``tool_result`` is a tool row; the blocks between make user rows."""
    rows: list[Message] = []
    for n, block in enumerate(blocks):
        at = f"{where}.content[{n}]"
        if block["type"] == "tool_result":
            rows.append(_tool_row(block, at))
        elif block["type"] == "tool_use":
            raise UnsupportedContentError(f"{at}: a tool_use block belongs in an assistant message", block="tool_use")
        elif rows and rows[-1]["role"] == "user":
            rows[-1]["content"].append(_part_from_anthropic(block, at))
        else:
            rows.append({"role": "user", "content": [_part_from_anthropic(block, at)]})
    return rows


def from_anthropic(
    system: object, messages: object, *, origins: Origins | None = None
) -> list[Message]:
    """Return Anthropic ``system`` + ``messages`` as flowmem flat rows (no normalization).

    Lossless: ``to_anthropic(*...)`` of the rows gives the payload back for a
    sendable one. ``system`` (a string or text blocks, ``cache_control`` kept)
    becomes one leading system row. Text, ``image`` and PDF/URL/file
    ``document`` blocks become neutral parts (``cache_control``, ``citations``,
    ``title`` kept in ``extra.anthropic``); ``thinking`` and ``redacted_thinking``
    become reasoning parts with their signature or data; server-tool blocks and
    their results, search results and any other block are ``provider`` parts;
    ``tool_use`` blocks become calls, each ``tool_result`` a tool row (``is_error``
    and image content kept). The SDK's own objects (a ``Message``, a ``TextBlock``)
    are read as the SDK sends them back (``model_dump``, ``require_map``). Raises
    ``InvalidMessageError``/``UnknownRoleError`` for a malformed message.
    ``origins``, when given, gets each row's message position (``OUTSIDE`` for the
    ``system`` row; a user message's tool results and text make one row each).
    """
    rows: list[Message] = []
    if system is not None:
        content = _content(system, "system")
        if content not in ("", []):
            rows.append({"role": "system", "content": content})
            if origins is not None:
                origins.add(OUTSIDE)
    for index, where, message in entries(messages, "messages", "message"):
        made = len(rows)
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise UnknownRoleError(f"{where}: unknown role {role!r}", role=role)
        content = message.get("content")
        if isinstance(content, str):
            rows.append({"role": role, "content": content})
        else:
            blocks = object_list(content, f"{where}.content")
            if role == "assistant":
                rows.append(_assistant_row(blocks, where))
            elif role == "user":
                rows.extend(_user_rows(blocks, where))
            else:
                rows.append({"role": "system", "content": _content(blocks, where)})
        if role == "system":
            put_extra(rows[-1], FMT, {_IN_MESSAGES: True})
        if origins is not None:
            for _ in range(len(rows) - made):
                origins.add(index)
    return rows
