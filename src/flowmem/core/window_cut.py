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

from dataclasses import dataclass

from flowmem.core.window import RowScan, too_small


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


class CutScan(RowScan):
    """The window rules over rows fed newest first, remembering no row (see the module docstring).

    Its loop is ``RowScan.feed_rows``, ``WindowScan``'s: only the positions and tokens of
    the rows fed are not kept.
    """

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
