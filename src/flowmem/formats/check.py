"""What a provider would reject in a payload, checked per format, at the payload's positions.

``flowmem check`` and ``POST /v1/check`` run ``check_payload``. The rules are the
core's (``flowmem.core.check_sendable``), with what each provider itself accepts
or rejects (docs/decisions/0049):

- ``openai`` (Chat Completions) and ``responses``: system and developer messages
  are accepted anywhere, so a system message after the conversation started is no
  violation; tool pairing is checked as everywhere.
- ``anthropic``: the system prompt is the request's top-level ``system``. A
  ``{"role": "system"}`` message in ``messages`` is a mid-conversation system
  message, which only some models take, and only where its placement rules allow
  it: after a user turn (or an assistant turn ending in a server tool use), as the
  last message or right before an assistant turn, never first and never after
  another one. Each one placed otherwise is a ``misplaced_system_message``.
- ``rows`` (flowmem's own messages, sent on to any provider): the full MEM-5
  contract, system messages first.

Each violation's ``index`` is the position, in the list the caller sent, of the
entry it is about (``Origins``): a message of Chat or Anthropic ``messages``, a
Responses item — for a call, its own ``function_call`` item.
"""

from __future__ import annotations

from flowmem.core import Message, Violation, check_sendable
from flowmem.formats.anthropic import is_system_message
from flowmem.formats.detect import detect_format
from flowmem.formats.documents import check_format, read_document, rows_list
from flowmem.formats.origins import Origins

SYSTEMS_ANYWHERE = frozenset({"openai", "responses"})
"""The formats whose provider takes a system (or developer) message at any position."""

_SYSTEMS_CHECKED_APART = SYSTEMS_ANYWHERE | {"anthropic"}  # no MEM-5 step 2 for these

FORMAT_CODES: dict[str, str] = {
    "misplaced_system_message": (
        "a system message in Anthropic messages must follow a user turn and be the last "
        "message or come right before an assistant turn: move its text to the request's "
        "top-level system parameter"
    ),
}
"""The violation codes only a provider format has, with the sentence each stands for."""

_SERVER_TOOL_USES = frozenset({"server_tool_use", "mcp_tool_use"})


def check_rows(rows: list[Message], name: str) -> list[Violation]:
    """Return what the provider of format ``name`` would reject in ``rows`` (read from its payload).

    ``rows`` are the flat rows ``read_document(name, …)`` made (``rows``: any
    flowmem messages); the indexes are the rows' own.
    """
    found = check_sendable(rows, systems_first=name not in _SYSTEMS_CHECKED_APART)
    if name == "anthropic":
        for index, row in enumerate(rows):
            if is_system_message(row):
                reason = _misplaced(rows, index)
                if reason:
                    sentence = f"{FORMAT_CODES['misplaced_system_message']} ({reason})"
                    found.append(Violation(index, "misplaced_system_message", sentence))
        found.sort(key=lambda violation: violation.index)
    return found


def _misplaced(rows: list[Message], index: int) -> str:
    """Return which placement rule the system message at ``index`` breaks, or "" (Anthropic)."""
    before = rows[index - 1] if index else None
    if before is None or (before["role"] == "system" and not is_system_message(before)):
        return "it is the first message"
    if before["role"] == "system":
        return "it follows another system message: join them"
    if before["role"] == "assistant" and not _ends_in_server_tool_use(before):
        return "it follows an assistant turn"
    after = rows[index + 1] if index + 1 < len(rows) else None
    if after is not None and after["role"] != "assistant":
        return f"a {'user' if after['role'] == 'tool' else after['role']} message follows it"
    return ""


def _ends_in_server_tool_use(turn: Message) -> bool:
    content = turn.get("content")
    if turn.get("tool_calls") or not isinstance(content, list) or not content:
        return False
    last = content[-1]
    block = last.get("block") if isinstance(last, dict) and last.get("type") == "provider" else None
    return isinstance(block, dict) and block.get("type") in _SERVER_TOOL_USES


def check_payload(
    document: object, name: str | None = None, where: str = "payload"
) -> tuple[str, list[Violation]]:
    """Return ``(format, violations)`` of a payload as its provider would judge it.

    The format is ``name``, detected when None (a payload that plainly is not
    ``name`` raises ``FormatMismatchError``, as ``read_payload`` does). Violations
    are in payload order, each ``index`` the position of its entry in the list the
    caller sent (for ``rows``, the row's own index). Input invalid in its own
    format raises that format's typed error.
    """
    if name is None:
        name = detect_format(document)
    else:
        check_format(document, name, where)
    if name == "rows":
        return name, check_sendable(rows_list(document, where))
    origins = Origins()
    rows = read_document(name, document, origins)
    return name, origins.relocated(check_rows(rows, name))
