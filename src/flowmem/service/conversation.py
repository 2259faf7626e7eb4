"""Which buffer holds a session's conversation, whatever wrote it (issue 37 §1, decision 0110).

A session's conversation may be in any of its ``session``-scope buffers: ``chat_history``
(the API's turns), ``agent_items`` (the Agents SDK), ``adk`` (Google ADK), or a
framework's *lines*, where a history that is not an extension of the stored one goes
on in a new buffer: ``langgraph``, ``langgraph#<checkpoint id>`` (a LangGraph thread,
decision 0040) and ``pydantic_ai``, ``pydantic_ai#<entry id>`` (a pydantic-ai
conversation, decision 0051). The conversation is, among

- the line the thread's latest root-namespace checkpoint references (its ``messages``
  channel, else its first message channel),
- the line the pydantic-ai conversation's head entry ends,
- the session's newest buffer that is no framework line,

a non-empty one first, then the one created last; ``chat_history`` with 0 messages
when the session has none. A line that is not its thread's (conversation's) head is
``stale``: older checkpoints (entries) still read it, as history.

``read_key`` is where a buffer read's key is resolved: the first line's key of a
family (``langgraph``, ``langgraph/<channel>``, ``pydantic_ai``) reads the line the
thread (conversation) is on now, so the URL the docs give for a thread's messages
never shows a stale line. Writes keep the key they are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowmem.errors import ConfigurationError
from flowmem.results import fields_of
from flowmem.store.base import SESSION_SCOPE
from flowmem.store.heads import (
    CONVERSATION_LINE,
    GRAPH_LINE,
    BufferCount,
    SessionBuffers,
    first_line,
    is_framework_line,
    session_buffers_of,
)

DEFAULT_BUFFER = "chat_history"
"""The conversation of a session that has no buffer yet: where the API's turns write."""
MAX_LISTED = 100
"""The most buffers one session's answer lists (``buffers_more`` says when there are more)."""

FOUND_BY = ("latest_checkpoint", "head_entry", "newest_buffer", "default")
"""How a conversation was found: the rule that named it."""


@dataclass(frozen=True)
class Conversation:
    """The buffer that holds a session's conversation now, its row count and the rule that chose it."""

    buffer: str
    messages: int
    found_by: str

    def to_dict(self) -> dict[str, object]:
        """The JSON object the API serves."""
        return fields_of(self)


@dataclass(frozen=True)
class ListedBuffer:
    """One buffer of a session: its name, row count, and whether it is a line the head left."""

    name: str
    messages: int
    stale: bool

    def to_dict(self) -> dict[str, object]:
        """The JSON object the API serves."""
        return fields_of(self)


@dataclass(frozen=True)
class SessionView:
    """A session's conversation and its buffers in key order (at most ``MAX_LISTED``)."""

    conversation: Conversation
    buffers: list[ListedBuffer]
    more: bool


def _facts(store: object) -> SessionBuffers | None:
    try:
        return session_buffers_of(store)
    except ConfigurationError:
        return None


def _graph_head(lines: dict[str, str]) -> str | None:
    """The line of a thread's message list: its ``messages`` channel's, else the first channel's."""
    if GRAPH_LINE in lines:
        return lines[GRAPH_LINE]
    return lines[min(lines)] if lines else None


def choose(candidates: Sequence[tuple[BufferCount, str]]) -> Conversation:
    """The conversation among candidate buffers: a non-empty one first, then the one created last."""
    if not candidates:
        return Conversation(DEFAULT_BUFFER, 0, "default")
    found, rule = min(candidates, key=lambda c: (c[0].count == 0, -c[0].born, c[0].key))
    return Conversation(found.key, found.count, rule)


def conversations(store: object, session_ids: Sequence[str]) -> dict[str, Conversation]:
    """The conversation of each session (at most 100): four reads of the store, whatever their number."""
    facts = _facts(store)
    ids = list(dict.fromkeys(session_ids))
    if facts is None or not ids:
        return {sid: Conversation(DEFAULT_BUFFER, 0, "default") for sid in ids}
    return _choose_all(facts, ids)


def _choose_all(
    facts: SessionBuffers,
    ids: list[str],
    graphs: dict[str, dict[str, str]] | None = None,
    heads: dict[str, str] | None = None,
) -> dict[str, Conversation]:
    newest = facts.newest(ids)
    graphs = facts.graph_lines(ids) if graphs is None else graphs
    heads = facts.conversation_lines(ids) if heads is None else heads
    named: dict[str, list[tuple[str, str]]] = {sid: [] for sid in ids}
    for sid, lines in graphs.items():
        head = _graph_head(lines)
        if head is not None:
            named[sid].append((head, "latest_checkpoint"))
    for sid, key in heads.items():
        named[sid].append((key, "head_entry"))
    counted = facts.counts([(sid, key) for sid, keys in named.items() for key, _ in keys])
    found = {}
    for sid in ids:
        candidates = [(counted[(sid, key)], rule) for key, rule in named[sid] if (sid, key) in counted]
        if sid in newest:
            candidates.append((newest[sid], "newest_buffer"))
        found[sid] = choose(candidates)
    return found


def session_buffers(store: object, session_id: str) -> SessionView:
    """A session's conversation and its buffers (key order, at most ``MAX_LISTED``), stale lines marked."""
    facts = _facts(store)
    if facts is None:
        return SessionView(Conversation(DEFAULT_BUFFER, 0, "default"), [], False)
    graphs = facts.graph_lines([session_id])
    pydantic_heads = facts.conversation_lines([session_id])
    conversation = _choose_all(facts, [session_id], graphs, pydantic_heads)[session_id]
    listed = facts.buffers(session_id, MAX_LISTED + 1)
    heads = dict(graphs.get(session_id, {}))
    pydantic = pydantic_heads.get(session_id)
    if pydantic is not None:
        heads[CONVERSATION_LINE] = pydantic
    buffers = [
        ListedBuffer(b.key, b.count, _stale(b.key, heads)) for b in listed[:MAX_LISTED]
    ]
    return SessionView(conversation, buffers, len(listed) > MAX_LISTED)


def _stale(key: str, heads: dict[str, str]) -> bool:
    """True for a line of a family whose head is known and is another line."""
    if not is_framework_line(key):
        return False
    head = heads.get(first_line(key))
    return head is not None and head != key


def is_first_line(key: str) -> bool:
    """True for the first line's key of a line family (what ``read_key`` resolves)."""
    if key == CONVERSATION_LINE:
        return True
    return (key == GRAPH_LINE or key.startswith(GRAPH_LINE + "/")) and "#" not in key


def read_key(store: object, scope: str, scope_id: str, key: str) -> str:
    """The key a read of ``key`` in ``scope_id`` reads: a family's first line reads its head line.

    Any other key, any other scope, a family with no head (no checkpoint, no
    conversation record) and a store that cannot tell: ``key`` itself.
    """
    if scope != SESSION_SCOPE or not is_first_line(key):
        return key
    facts = _facts(store)
    if facts is None:
        return key
    if key == CONVERSATION_LINE:
        return facts.conversation_lines([scope_id]).get(scope_id, key)
    return facts.graph_lines([scope_id]).get(scope_id, {}).get(key, key)


__all__ = [
    "DEFAULT_BUFFER",
    "FOUND_BY",
    "MAX_LISTED",
    "Conversation",
    "ListedBuffer",
    "SessionView",
    "choose",
    "conversations",
    "is_first_line",
    "read_key",
    "session_buffers",
]
