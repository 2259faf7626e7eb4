"""A token window's cut, found without keeping what was fed (issue 38 §2): ``WindowScan``'s lean twin.

``flowmem.core.window.WindowScan`` remembers every position fed and its tokens, to
list the window's rows at the end. A reader that streams the window's rows from the
store afterwards needs only where the suffix starts, how many rows and tokens it
holds, and whether a valid start was found: ``CutScan`` keeps those (and the
result ids still waiting for their call, as the window rules need), so its memory
is bounded by the ids, not by the rows fed. Its rules are ``WindowScan.feed_rows``'
line for line; oracle: ``tests/core/test_window_cut.py`` (the same window on every
history, budget and option).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from flowmem.core.window import RowFacts, too_small


@dataclass(frozen=True, slots=True)
class Cut:
    """Where a window starts and what it keeps, without the rows (``CutScan.cut``).

    ``start``: the position of the suffix's first row (None: no suffix, only the kept
    system rows); ``suffix``: how many rows it holds; ``systems``: the positions of
    the kept system rows before it, in order; ``tokens``: the window's tokens (those
    system rows' included). ``start_index``, ``cut_messages``, ``cut_tokens`` and
    ``total`` as ``Window``'s ``start`` and the rest.
    """

    start: int | None
    suffix: int
    systems: tuple[int, ...]
    tokens: int
    start_index: int
    cut_messages: int
    cut_tokens: int | None
    total: int


class CutScan:
    """The window rules over rows fed newest first, remembering no row (see the module docstring)."""

    def __init__(
        self,
        budget: int,
        systems: Mapping[int, int] | None = None,
        keep_system: bool = True,
        first_role: str | None = None,
    ) -> None:
        """Scan for ``budget`` tokens; ``systems``: every system row's position and tokens."""
        self.budget = budget
        self.keep_system = keep_system
        self.first_role = first_role
        self._systems = dict(systems or {}) if keep_system else {}
        self.cost = sum(self._systems.values())
        self._pending: set[str] = set()
        self._first: str | None = None  # the role of the earliest non-system row fed
        self._best: int | None = None
        self._best_cost = 0  # the cost when the best start was found: the window's tokens
        self._best_fed = 0  # the rows fed when it was found: the suffix's length
        self._fed = 0
        self._needed: int | None = None
        self._next: int | None = None
        self.done = False

    def feed_rows(self, rows: Iterable[tuple[int, RowFacts]]) -> None:
        """Take each ``(position, row)`` in turn, newest first, until ``done`` (``WindowScan.feed_rows``)."""
        if self.done:
            return
        budget, keep, wanted, pending = self.budget, self.keep_system, self.first_role, self._pending
        cost, best, needed, nxt, first = self.cost, self._best, self._needed, self._next, self._first
        fed, best_cost, best_fed = self._fed, self._best_cost, self._best_fed
        try:
            for position, (role, count, calls, answers) in rows:
                if nxt is not None and position > nxt:
                    raise ValueError(f"rows are fed newest first: expected a position below {nxt + 1}")
                nxt = position - 1
                fed += 1
                kept_system = keep and role == "system"
                if not kept_system:
                    cost += count
                if answers is not None:
                    pending.add(answers)
                if calls:
                    pending.difference_update(calls)
                if role != "system":
                    first = role
                if (
                    not pending
                    and role != "tool"
                    and not kept_system
                    and (wanted is None or first in (None, wanted))
                ):
                    if needed is None:
                        needed = cost
                    if cost <= budget:
                        best, best_cost, best_fed = position, cost, fed
                if cost > budget and needed is not None:
                    self.done = True  # every earlier start costs at least as much
                    break
        finally:
            self.cost, self._best, self._needed, self._next, self._first = cost, best, needed, nxt, first
            self._fed, self._best_cost, self._best_fed = fed, best_cost, best_fed

    def cut(self, total: int, total_tokens: int | None) -> Cut:
        """The cut found once ``done`` or once the oldest row was fed (``WindowScan.window``'s).

        WindowTooSmallError when a buffer with rows has no sendable window in the budget.
        """
        best = self._best
        if best is None:
            needed = self._needed if self._needed is not None else self.cost
            if total and needed > self.budget:
                raise too_small(self.budget, needed)
            systems = tuple(sorted(self._systems))
            tokens, suffix = sum(self._systems.values()), 0
        else:
            systems = tuple(p for p in sorted(self._systems) if p < best)
            tokens, suffix = self._best_cost, self._best_fed
        cut = None if total_tokens is None else total_tokens - tokens
        kept = len(systems) + suffix
        return Cut(best, suffix, systems, tokens, total - suffix, total - kept, cut, total)
