"""``ForwardingEditor``: a ``BufferEditor`` that passes every question and write to the one it wraps.

A wrapper that watches what the append rules do (ADK's ``TrackingEditor``, pydantic-ai's
line ``Tagging``) subclasses it and overrides only the calls it watches or changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from flowmem.core.append import Answer, BufferEditor, Dangling, PositionedRow
from flowmem.core.messages import Message

E = TypeVar("E", bound=BufferEditor)


class ForwardingEditor(Generic[E]):
    """A ``BufferEditor`` over ``inner``: each method is ``inner``'s."""

    def __init__(self, inner: E) -> None:
        self.inner = inner

    def count(self) -> int:
        """The wrapped editor's row count."""
        return self.inner.count()

    def is_declared(self, call_id: str) -> bool:
        """Whether the wrapped buffer declares ``call_id``."""
        return self.inner.is_declared(call_id)

    def answer_of(self, call_id: str) -> Answer | None:
        """The row answering ``call_id`` in the wrapped buffer."""
        return self.inner.answer_of(call_id)

    def dangling(self) -> list[Dangling]:
        """The wrapped buffer's declared, unanswered calls."""
        return self.inner.dangling()

    def oldest(self) -> PositionedRow | None:
        """The wrapped buffer's first row."""
        return self.inner.oldest()

    def index_of(self, position: int) -> int:
        """The index of the row at ``position``."""
        return self.inner.index_of(position)

    def was_evicted(self, call_id: str) -> bool:
        """Whether a turn the wrapped buffer's window evicted declared ``call_id``."""
        return self.inner.was_evicted(call_id)

    def remember_evicted(self, call_ids: Sequence[str]) -> None:
        """Remember the call ids of an evicted turn in the wrapped buffer."""
        self.inner.remember_evicted(call_ids)

    def append_row(self, row: Message) -> None:
        """Append ``row`` to the wrapped buffer."""
        self.inner.append_row(row)

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Insert ``rows`` after the row at ``position`` in the wrapped buffer."""
        self.inner.insert_after(position, rows)

    def replace(self, position: int, row: Message) -> None:
        """Replace the row at ``position`` in the wrapped buffer."""
        self.inner.replace(position, row)

    def delete(self, position: int) -> None:
        """Delete the row at ``position`` from the wrapped buffer."""
        self.inner.delete(position)


__all__ = ["ForwardingEditor"]
