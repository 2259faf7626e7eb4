"""OpenAI Responses API / Agents SDK input items ↔ flowmem rows (lossless within the format)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from flowmem.core import Message, entry_id
from flowmem.errors import UnknownRoleError
from flowmem.formats._common import (
    HINT,
    entries,
    extra_of,
    fields_of,
    is_provider_part,
    note,
    part_kind,
    parts_of,
    provider_part,
    put_extra,
    read_parts,
)
from flowmem.formats.fast import provider_rows
from flowmem.formats.origins import Origins
from flowmem.formats.responses_items import (
    CALL_ITEMS,
    OUTPUT_ID_KEY,
    OUTPUT_ITEMS,
    call_from_item,
    call_item,
    output_item,
    output_row,
)
from flowmem.formats.responses_parts import (
    FMT,
    content_from_responses,
    content_to_responses,
    item_of_part,
    reasoning_part,
)

_LAYOUT = HINT + "layout"  # the order of a row's items: p(art item), m(essage list), s(tring message), c(all)


# --- rows → items ---------------------------------------------------------------------------


def _default_layout(content: Any, item_parts: int, message_parts: Sequence[Mapping[str, Any]], calls: int) -> str:
    if isinstance(content, str):
        return ("s" if content != "" or not calls else "") + "c" * calls
    return "p" * item_parts + ("m" if message_parts else "") + "c" * calls


def _layout_fits(layout: object, item_parts: int, message_parts: Sequence[Mapping[str, Any]], calls: int) -> bool:
    if not isinstance(layout, str) or set(layout) - set("pmsc"):
        return False
    messages = layout.count("m") + layout.count("s")
    return (
        layout.count("p") == item_parts
        and layout.count("c") == calls
        and messages <= 1
        and (messages == 1 or not message_parts)
        and ("s" not in layout or all(p.get("type") == "text" for p in message_parts))
    )


def _plain_text(parts: Sequence[Mapping[str, Any]], fields: Mapping[str, Any]) -> bool:
    """True when an assistant message would be spelled with string content by default."""
    return "id" not in fields and all(p.get("type") == "text" and not extra_of(p, FMT) for p in parts)


def _split_parts(
    content: Any, dropped: dict[str, int] | None
) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """An assistant row's parts: those that are items of their own, and the message's."""
    item_parts: list[dict[str, Any]] = []
    message_parts: list[Mapping[str, Any]] = []
    for part in read_parts(content) if isinstance(content, list) else []:
        item = item_of_part(part)
        if item is not None:
            item_parts.append(item)
        elif part.get("type") == "text" or is_provider_part(part, FMT):
            message_parts.append(part)  # an image or file (a Gemini model's) has no place here
        else:
            note(dropped, part_kind(part))
    return item_parts, message_parts


def _layout_of(
    content: Any,
    extra: Mapping[str, Any],
    fields: Mapping[str, Any],
    item_parts: int,
    message_parts: Sequence[Mapping[str, Any]],
    calls: int,
) -> str:
    """The row's recorded layout when it fits its items, else the default one."""
    layout: Any = extra.get(_LAYOUT)
    if _layout_fits(layout, item_parts, message_parts, calls):
        return str(layout)
    layout = _default_layout(content, item_parts, message_parts, calls)
    if "m" in layout and _plain_text(message_parts, fields):
        layout = layout.replace("m", "s")
    return str(layout)


def _assistant_message(
    content: Any,
    token: str,
    message_parts: Sequence[Mapping[str, Any]],
    fields: Mapping[str, Any],
    dropped: dict[str, int] | None,
) -> dict[str, Any]:
    """The assistant message item (``s``: string content, ``m``: a list of parts)."""
    if isinstance(content, str):
        body: Any = content
    elif token == "s":
        body = "".join(p["text"] for p in message_parts if isinstance(p.get("text"), str))
    else:
        body = content_to_responses(message_parts, "assistant", dropped)
    message = {"role": "assistant", "content": body}
    message.update(fields)
    return message


def _assistant_items(row: Message, kinds: dict[str, str], dropped: dict[str, int] | None) -> list[dict[str, Any]]:
    content = row["content"]
    calls = [call_item(call, kinds) for call in row.get("tool_calls") or []]
    if type(content) is str and row.get("extra") is None:  # no layout, no fields: the default, written at once
        if content == "" and calls:
            return calls
        return [{"role": "assistant", "content": content}, *calls]
    extra = extra_of(row, FMT)
    fields = fields_of(extra)
    item_parts, message_parts = _split_parts(content, dropped)
    layout = _layout_of(content, extra, fields, len(item_parts), message_parts, len(calls))
    out: list[dict[str, Any]] = []
    parts_iter, calls_iter = iter(item_parts), iter(calls)
    for token in layout:
        if token == "p":
            out.append(next(parts_iter))
        elif token == "c":
            out.append(next(calls_iter))
        else:
            out.append(_assistant_message(content, token, message_parts, fields, dropped))
    return out


def _row_items(row: Message, kinds: dict[str, str], dropped: dict[str, int] | None) -> list[dict[str, Any]]:
    """Return a row's items; an assistant row records its calls' kinds in ``kinds``, which its results read."""
    role = row["role"]
    if role == "assistant":
        return _assistant_items(row, kinds, dropped)
    if role == "tool":
        return [output_item(row, kinds.get(row["tool_call_id"], "function"), dropped)]
    content = content_to_responses(row["content"], role, dropped)
    if content == [] and row["content"] != []:
        return []
    message = {"role": role, "content": content}
    if "extra" in row:
        message.update(fields_of(extra_of(row, FMT)))
    return [message]


def row_to_items(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return the Responses items of one flowmem row (flat or stored), without normalizing.

    A ``tool`` row is one output item (``function_call_output`` unless its extras
    say otherwise); any other row is spelled as ``to_responses`` spells it. Raises
    ``UnknownRoleError`` for an entry that is not a message.
    """
    flat = _flat(row)
    kinds = {flat["tool_call_id"]: "function"} if flat["role"] == "tool" else {}
    return _row_items(flat, kinds, None)


def _flat(row: Mapping[str, Any]) -> Message:
    """Return one flat or stored row as a provider-flat row (no normalization)."""
    if not isinstance(row, Mapping) or row.get("role") not in ("system", "user", "assistant", "tool"):
        raise UnknownRoleError(f"not a flowmem message: {row!r}")
    meta = row.get("metadata") if isinstance(row.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    content = row.get("content")
    flat: Message = {"role": row["role"], "content": content if isinstance(content, (str, list)) else ""}
    for key in ("tool_calls", "tool_call_id", "extra", "is_error"):
        value = row.get(key, meta.get(key))
        if value is not None:
            flat[key] = value
    if flat["role"] == "tool":
        flat["tool_call_id"] = str(flat.get("tool_call_id", "")).strip()
    if flat.get("tool_calls"):
        flat["tool_calls"] = [c for c in flat["tool_calls"] if isinstance(c, Mapping) and entry_id(c)]
    return flat


def to_responses(
    messages: object, dropped: dict[str, int] | None = None, *, systems_first: bool = True
) -> list[dict[str, Any]]:
    """Return ``messages`` (flowmem stored or flat rows) as Responses input items.

    Normalizes first (MEM-5, keeping content parts). An assistant row gives its
    reasoning and hosted-tool items, its message and its calls in the order
    ``from_responses`` recorded (else items, message, calls); each call is the
    item of its kind (``function_call``, ``custom_tool_call``, ``computer_call``,
    ``local_shell_call``, ``shell_call``, ``apply_patch_call``,
    ``mcp_approval_request``) and each ``tool`` row the output item of its call's
    kind. What Responses cannot carry (other providers' reasoning and blocks,
    audio, ``is_error`` outside ``apply_patch``) is left out and counted per kind
    in ``dropped`` when given. ``systems_first=False`` keeps each system and
    developer message where it is (the Responses API takes them anywhere): only
    tool pairing is repaired.
    """
    return rows_to_responses(provider_rows(messages, systems_first), dropped)


def rows_to_responses(rows: list[Message], dropped: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Return normalized provider-flat rows (``flowmem.formats.fast.provider_rows``) as Responses input items."""
    kinds: dict[str, str] = {}  # each call's kind, by id, filled as its turn is written (before its result)
    out: list[dict[str, Any]] = []
    for row in rows:
        out.extend(_row_items(row, kinds, dropped))
    return out


# --- items → rows ---------------------------------------------------------------------------


def _message_row(item: Mapping[str, Any], where: str) -> tuple[str, Any, dict[str, Any]]:
    role = item.get("role")
    if role not in ("system", "developer", "user", "assistant"):
        raise UnknownRoleError(f"{where}: unknown message role {role!r}", role=role)
    flat_role = "system" if role == "developer" else role
    content = content_from_responses(item.get("content"), flat_role, where)
    modeled = {"content"} | ({"role"} if role != "developer" else set())
    return flat_role, content, {k: v for k, v in item.items() if k not in modeled}


class _Reader:
    """The rows of one ``from_responses`` call as its items are read, and where each came from."""

    def __init__(self) -> None:
        self.rows: list[Message] = []
        self.layouts: dict[int, str] = {}  # id(row) -> its items' order, one token an item
        self.strings: dict[int, str] = {}  # id(row) -> its assistant message's string content
        self.first: dict[int, int] = {}  # id(row) -> the position of its first item
        self.call_items: dict[int, list[int]] = {}  # id(row) -> the position of each of its call items

    def read(self, item: Mapping[str, Any], kind: object, index: int, where: str) -> None:
        """Read one item into a row of its own or into the current model turn."""
        if kind == "message":
            if item.get("role") == "assistant":
                self._assistant_message(item, index, where)
            else:
                role, content, fields = _message_row(item, where)
                self._own_row(put_extra({"role": role, "content": content}, FMT, fields), index)
        elif kind in OUTPUT_ITEMS and item.get(OUTPUT_ID_KEY.get(OUTPUT_ITEMS[kind], "call_id")) is not None:
            self._own_row(output_row(item, OUTPUT_ITEMS[kind], where), index)
        else:
            self._turn_item(item, kind, index, where)

    def _own_row(self, row: Message, index: int) -> None:
        self.rows.append(row)
        self.first[id(row)] = index

    def _token(self, row: Message, token: str) -> None:
        self.layouts[id(row)] = self.layouts.get(id(row), "") + token

    def _assistant_message(self, item: Mapping[str, Any], index: int, where: str) -> None:
        _, content, fields = _message_row(item, where)
        rows = self.rows
        row = rows[-1] if rows and rows[-1]["role"] == "assistant" else None
        if row is None or set(self.layouts.get(id(row), "")) & {"m", "s"}:
            row = {"role": "assistant", "content": []}
            rows.append(row)
        self.first.setdefault(id(row), index)
        if isinstance(content, str):
            self.strings[id(row)] = content
            row["content"].extend(parts_of(content))
        else:
            row["content"].extend(content)
        self._token(row, "s" if isinstance(content, str) else "m")
        put_extra(row, FMT, fields)

    def _turn_item(self, item: Mapping[str, Any], kind: object, index: int, where: str) -> None:
        """A call, a reasoning item or any other item: a part of the current model turn."""
        row = _open_assistant(self.rows)
        self.first.setdefault(id(row), index)
        if kind in CALL_ITEMS:
            row.setdefault("tool_calls", []).append(call_from_item(item, CALL_ITEMS[kind], where))
            self.call_items.setdefault(id(row), []).append(index)
            self._token(row, "c")
            return
        row["content"].append(reasoning_part(item) if kind == "reasoning" else provider_part(FMT, dict(item)))
        self._token(row, "p")

    def finish(self, origins: Origins | None) -> list[Message]:
        """Settle each model turn's content and record its layout where not the default."""
        for row in self.rows:
            layout = self.layouts.get(id(row))
            if layout is not None:
                _settle_turn(row, layout, self.strings.get(id(row), ""))
        if origins is not None:
            for row in self.rows:
                origins.add(self.first[id(row)], self.call_items.get(id(row)))
        return self.rows


def _settle_turn(row: Message, layout: str, string: str) -> None:
    """Give a model turn made only of a string message and calls its string; record a layout not the default."""
    if set(layout) <= {"s", "c"}:
        row["content"] = string
    extra = extra_of(row, FMT)
    content = row["content"]
    message_parts = [p for p in parts_of(content) if item_of_part(p) is None] if isinstance(content, list) else []
    default = _default_layout(content, layout.count("p"), message_parts, layout.count("c"))
    if "m" in default and _plain_text(message_parts, fields_of(extra)):
        default = default.replace("m", "s")
    if default != layout:
        extra[_LAYOUT] = layout
        put_extra(row, FMT, extra)


def _open_assistant(rows: list[Message]) -> Message:
    """Return the assistant row items of the current model turn join, starting one if needed."""
    if rows and rows[-1]["role"] == "assistant":
        return rows[-1]
    row: Message = {"role": "assistant", "content": []}
    rows.append(row)
    return row


def from_responses(
    items: object, *, ignore_types: Collection[str] = (), origins: Origins | None = None
) -> list[Message]:
    """Return Responses input items as flowmem flat rows (no normalization).

    Lossless: ``to_responses(from_responses(h))`` gives ``h`` back for a sendable
    ``h``. A user, system or developer ``message`` is one row (``developer`` and
    item fields such as ``id``, ``status``, ``type`` go to ``extra.responses``).
    The items of one model turn (reasoning, hosted-tool items, at most one
    assistant message, calls of every kind) make one assistant row: reasoning
    items become ``reasoning`` parts (summary, ``encrypted_content``), hosted-tool
    and any other items ``provider`` parts, calls become call entries with their
    kind; their order is recorded when it is not the default. Each output item is
    a ``tool`` row (``apply_patch_call_output`` with status ``failed`` sets
    ``is_error``). Items whose type is in ``ignore_types`` are skipped. The SDK's
    own objects (``response.output``'s items) are read as the SDK sends them back
    (``model_dump``, ``require_map``). Raises ``InvalidMessageError``/``UnknownRoleError``
    for a malformed item. ``origins``, when given, gets each row's item position
    (a model turn's first item) and the position of each of its calls.
    """
    reader = _Reader()
    for index, where, item in entries(items, "items", "item"):
        kind = item.get("type", "message" if "role" in item else "item_reference" if "id" in item else None)
        if kind not in ignore_types:
            reader.read(item, kind, index, where)
    return reader.finish(origins)
