"""Where each row read from a provider payload came from, in the payload's own numbering."""

from __future__ import annotations

from flowmem.core import Violation

OUTSIDE = -1
"""The origin of a row a request field made, not an entry of its list (Anthropic's
``system``, Responses' ``instructions``)."""


class Origins:
    """The payload position of each row a ``from_X`` reader made, filled as it reads.

    ``from_openai``, ``from_anthropic`` and ``from_responses`` take one as
    ``origins=`` (like ``dropped`` on the way out): ``rows[n]`` is the position, in
    the list the caller sent (Chat and Anthropic ``messages``, Responses items), of
    the entry row ``n`` was read from (its first item, for a Responses model turn
    made of several); ``calls[n]``, when the format spells each call as an entry of
    its own (a Responses ``function_call`` item), is the position of each of row
    ``n``'s calls, in order. ``index_of`` maps a ``check_sendable`` violation of
    the rows back to the payload (docs/decisions/0049).
    """

    __slots__ = ("calls", "rows")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.calls: list[list[int] | None] = []

    def add(self, position: int, calls: list[int] | None = None) -> None:
        """Record the next row: read from the entry at ``position`` (its calls at ``calls``)."""
        self.rows.append(position)
        self.calls.append(calls)

    def lead(self) -> None:
        """Record a row put before the others that no list entry made (``OUTSIDE``)."""
        self.rows.insert(0, OUTSIDE)
        self.calls.insert(0, None)

    def index_of(self, violation: Violation) -> int:
        """Return the payload position a violation of the rows points at.

        A violation about one call points at that call's own entry when calls are
        entries; any other points at the entry its row was read from.
        """
        row = violation.index
        if not 0 <= row < len(self.rows):
            return row  # not a row these origins know: the rows' own index
        calls = self.calls[row]
        if calls is not None and violation.call is not None and violation.call < len(calls):
            return calls[violation.call]
        return self.rows[row]

    def relocated(self, violations: list[Violation]) -> list[Violation]:
        """Return ``violations`` at their payload positions, in payload order (stable)."""
        moved = [Violation(self.index_of(v), v.code, v.message, v.call) for v in violations]
        return sorted(moved, key=lambda violation: violation.index)
