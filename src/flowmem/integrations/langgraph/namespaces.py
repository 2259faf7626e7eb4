"""LangGraph namespaces as flowmem record keys, and where a namespace lives (decision 0041).

The encoding ``flowmem.integrations.langgraph.store`` describes: each label escaped and
followed by a separator, one more separator, then the item's key; order-preserving, so
a namespace prefix is a record key prefix. ``Place``: a namespace's scope and scope id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langgraph.store.base import InvalidNamespaceError

from flowmem.errors import InvalidInputError
from flowmem.store.listing import prefix_end

GLOBAL_SCOPE = "global"
USER_SCOPE = "user"
KEY_PREFIX = "langgraph:"
"""Every record key of a LangGraph item starts with this."""
FORMAT = "langgraph.store/1"
"""The ``format`` of a record value that is a LangGraph item (the envelope)."""
SEPARATOR = " "  # ends each label, and (once more) the namespace
ESCAPE = "!"  # a label character <= ESCAPE is ESCAPE + chr(ord(c) + _SHIFT)
_SHIFT = 0x40


class NamespaceError(InvalidInputError, InvalidNamespaceError):
    """A namespace LangGraph or flowmem cannot take: both an ``InvalidInputError`` and LangGraph's error."""


# --- record keys ------------------------------------------------------------------------
def _escape(label: str) -> str:
    if all(char > ESCAPE for char in label):
        return label
    return "".join(ESCAPE + chr(ord(c) + _SHIFT) if c <= ESCAPE else c for c in label)


def encode_labels(labels: Sequence[str]) -> str:
    """The record key text of namespace labels: each escaped, each followed by the separator."""
    return "".join(_escape(label) + SEPARATOR for label in labels)


def record_key(labels: Sequence[str], key: str) -> str:
    """The record key of an item: the prefix, its stored labels, one more separator, its key."""
    return KEY_PREFIX + encode_labels(labels) + SEPARATOR + key


def decode_record_key(text: str) -> tuple[tuple[str, ...], str] | None:
    """The stored labels and the item key of a record key; None when it is not one of ours."""
    if not text.startswith(KEY_PREFIX):
        return None
    labels: list[str] = []
    position = len(KEY_PREFIX)
    end = len(text)
    while position < end:
        if text[position] == SEPARATOR:
            return tuple(labels), text[position + 1 :]
        chars: list[str] = []
        while position < end and text[position] != SEPARATOR:
            char = text[position]
            if char == ESCAPE:
                if position + 1 >= end:
                    return None
                char = chr(ord(text[position + 1]) - _SHIFT)
                position += 1
            chars.append(char)
            position += 1
        if position >= end:
            return None
        labels.append("".join(chars))
        position += 1  # the separator that ended the label
    return None


# --- where a namespace lives --------------------------------------------------------------
@dataclass(frozen=True)
class Place:
    """A namespace's flowmem address: scope and scope id, and the user label as the caller wrote it."""

    scope: str
    scope_id: str
    user_label: str | None = None  # the second label (the user id) of a user's namespace

    def stored(self, namespace: Sequence[str]) -> tuple[str, ...]:
        """The labels kept in the record key: all, but the user id of a user's namespace."""
        if self.user_label is None or len(namespace) < 2:
            return tuple(namespace)
        return (namespace[0], *namespace[2:])

    def namespace(self, stored: Sequence[str]) -> tuple[str, ...]:
        """The namespace of stored labels (the user id put back)."""
        if self.user_label is None or not stored:
            return tuple(stored)
        return (stored[0], self.user_label, *stored[1:])


GLOBAL = Place(GLOBAL_SCOPE, "")


def after_prefix(labels_text: str) -> str:
    """The smallest record key after every one starting with ``KEY_PREFIX + labels_text``."""
    end = prefix_end(KEY_PREFIX + labels_text)
    if end is None:  # never: the text ends with the separator
        raise AssertionError("a record key prefix always has an end")
    return end


def prefix_key(place: Place | None, prefix: tuple[str, ...]) -> str:
    """The record key prefix of a namespace prefix at ``place`` (the global scope when None)."""
    return KEY_PREFIX + encode_labels((place or GLOBAL).stored(prefix))


def namespace_path(namespace: Sequence[str]) -> str:
    """A namespace as dotted text, for messages."""
    return ".".join(namespace)  # labels hold no "." (LangGraph's rule): an exact text form


__all__ = [
    "ESCAPE",
    "FORMAT",
    "GLOBAL",
    "GLOBAL_SCOPE",
    "KEY_PREFIX",
    "SEPARATOR",
    "USER_SCOPE",
    "NamespaceError",
    "Place",
    "after_prefix",
    "decode_record_key",
    "encode_labels",
    "namespace_path",
    "prefix_key",
    "record_key",
]
