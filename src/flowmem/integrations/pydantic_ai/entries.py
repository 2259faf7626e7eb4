"""``ConversationEntry``s made for a load without the frozen dataclass's ``__init__`` (decision 0145).

A load hands pydantic-ai one ``ConversationEntry`` per message. Its frozen
``__init__`` sets each field through ``object.__setattr__``, a third of the time a
cached load spends outside copying its messages at 100 messages. ``entry`` fills the
instance's ``__dict__`` with the same four fields instead, when the class is the one
this was written for (those fields, no ``__post_init__``, no ``__slots__``); for any
other shape of the class it calls the class (``PLAIN``). Tested equal to the class's
own constructor, field by field.
"""

from __future__ import annotations

import dataclasses

from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.messages import ModelMessage

PLAIN = (
    tuple(field.name for field in dataclasses.fields(ConversationEntry)) != ("id", "parent_id", "message", "kind")
    or hasattr(ConversationEntry, "__post_init__")
    or hasattr(ConversationEntry, "__slots__")
)
"""Whether entries are made by calling ``ConversationEntry`` (its shape is not the one ``entry`` fills)."""

_new = object.__new__


def entry(entry_id: str, parent_id: str | None, message: ModelMessage) -> ConversationEntry:
    """``ConversationEntry(id=entry_id, parent_id=parent_id, message=message)``, made faster."""
    if PLAIN:
        return ConversationEntry(id=entry_id, parent_id=parent_id, message=message)
    made: ConversationEntry = _new(ConversationEntry)
    fields = made.__dict__
    fields["id"] = entry_id
    fields["parent_id"] = parent_id
    fields["message"] = message
    fields["kind"] = "message"
    return made


__all__ = ["PLAIN", "entry"]
